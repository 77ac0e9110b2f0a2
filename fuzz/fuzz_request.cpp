// libFuzzer target: the OpenAI request parser and everything prepare_generation
// does with a request (chat template, tokenizer, sampling checks, structured
// output and tool grammars) on the real model's text side. Errors are answers
// (api_error); only crashes, sanitizer reports and unexpected exceptions count.
// Input: byte 0 picks the endpoint (completions, chat, responses, or the
// embeddings parser and its response formatter), the rest is the JSON body.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_model.h"
#include "protocol/embeddings.h"
#include "protocol/generation.h"
#include "protocol/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spate;
  if (size < 1) return 0;
  const auto& m = fuzz::model();
  const api::endpoint kinds[] = {api::endpoint::completions, api::endpoint::chat_completions, api::endpoint::responses};
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 4 == 3) {
    api::embeddings_request er;
    if (api::parse_embeddings(body, er)) return 0;
    std::vector<std::vector<float>> vecs(er.n_inputs(), std::vector<float>(3, 0.5f));
    (void)api::format_embeddings(vecs, er.base64, er.model, 1);
    return 0;
  }
  const api::endpoint kind = kinds[data[0] % 4];
  api::parsed_request r;
  if (api::parse_request(kind, body, r)) return 0;
  if (api::validate_for_model(r, m.served.n_vocab)) return 0;
  prepared_generation g;
  (void)prepare_generation(m.served, r, g);
  return 0;
}
