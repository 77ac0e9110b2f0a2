// The real model's text side for the fuzz targets that need one (request
// parser, WebSocket messages, tokenizer): the default model's GGUF metadata,
// tokenizer, chat template and a constraint compiler, loaded once. The file
// is SPATE_FUZZ_MODEL, else ~/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf
// (scripts/fetch-model.sh puts it there). Fuzz harness only.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "jinja/chat_template.h"
#include "model/gguf_file.h"
#include "model/tokenizer_gguf.h"
#include "protocol/constraint_compiler.h"
#include "protocol/served_model.h"
#include "protocol/tool_calls.h"

namespace spate::fuzz {

struct text_model {
  std::unique_ptr<gguf_file> file;
  std::unique_ptr<tokenizer> tok;
  std::unique_ptr<chat_template> tmpl;
  std::unique_ptr<api::constraint_compiler> compiler;
  api::served_model served;
};

inline const text_model& model() {
  static const text_model m = [] {
    text_model t;
    const char* env = std::getenv("SPATE_FUZZ_MODEL");
    const char* home = std::getenv("HOME");
    const std::string path = env ? env : std::string(home ? home : "") + "/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    t.file = gguf_file::open(path);
    t.tok = std::make_unique<tokenizer>(tokenizer_from_gguf(*t.file));
    const std::string src = t.file->get_string("tokenizer.chat_template").value_or("");
    t.tmpl = std::make_unique<chat_template>(src, t.tok->token_to_piece(t.tok->bos_id(), true),
                                             t.tok->token_to_piece(t.tok->eos_id(), true));
    t.compiler = std::make_unique<api::constraint_compiler>(*t.tok);
    t.served = api::served_model{t.tok.get(), t.tok->n_vocab(), 2048, "fuzz", t.tmpl.get(), "", t.compiler.get(),
                                 api::detect_tool_call_format(src)};
    return t;
  }();
  return m;
}

}  // namespace spate::fuzz
