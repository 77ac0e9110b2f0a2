// What the protocol layer knows of the model it serves: plain data, filled
// once at start-up (by the command line) and read-only afterwards.
//
// Thread-safety: const after start-up; the tokenizer and chat template are
// themselves safe for concurrent const use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine_api.h"
#include "protocol/reasoning.h"
#include "protocol/tool_calls.h"

namespace spate {

class tokenizer;
class chat_template;

namespace api {

class constraint_compiler;
class reasoning_vocab;
class harmony_vocab;

struct served_model {
  const tokenizer* tok = nullptr;       // never null once serving
  int32_t n_vocab = 0;
  int32_t max_model_len = 0;            // prompt + max_tokens bound
  std::string name;                     // --served-model-name: "model" in requests and responses
  const chat_template* tmpl = nullptr;  // null when the model has none and none was given
  std::string tmpl_error;               // why tmpl is null (a parse error), "" if simply absent
  constraint_compiler* constraints = nullptr;  // structured outputs; null: refused with a 400
  tool_call_format tool_format = tool_call_format::generic;  // how the model writes tool calls
  int32_t n_embd = 0;                   // embedding width (/v1/embeddings)
  pooling_type pooling = pooling_type::none;  // /v1/embeddings; none: refused
  reasoning_parser reasoning = reasoning_parser::none;  // --reasoning-parser (or detected): how chat output splits
  std::shared_ptr<const reasoning_vocab> reasoning_tokens = nullptr;  // set whenever reasoning is qwen3 or deepseek_r1
  // Set whenever the output may be harmony (reasoning openai_gptoss, or tool_format openai).
  std::shared_ptr<const harmony_vocab> harmony_tokens = nullptr;

  // Whether chat / responses outputs of a request are harmony (harmony.h).
  bool harmony_output(bool uses_tools) const {
    return reasoning == reasoning_parser::openai_gptoss || (uses_tools && tool_format == tool_call_format::openai);
  }
};

}  // namespace api
}  // namespace spate
