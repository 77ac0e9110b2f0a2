// The part of every generating endpoint that is independent of the transport:
// from a parsed OpenAI request to token ids and validated sampling parameters
// (chat template, tokenizer, max_tokens default, context check).
//
// Thread-safety: any thread (uses only const model data).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "protocol/openai_request.h"
#include "protocol/served_model.h"

namespace spate {

struct prepared_generation {
  std::vector<int32_t> prompt;      // token ids
  std::string prompt_text;          // the rendered / given prompt text (echo, logs)
  sampling_params params;           // validated, max_tokens set
  int32_t n = 1;
};

// Renders messages through the chat template (chat/responses) or tokenizes the
// prompt (completions), applies the max_tokens default (completions: 16 as in
// OpenAI/vLLM; chat/responses: what is left of --max-model-len) and checks the
// context (400 context_length_exceeded). Returns the error or nullopt.
std::optional<api::api_error> prepare_generation(const api::served_model& m, const api::parsed_request& r, prepared_generation& out);

// "stop" / "length" (OpenAI finish_reason) for an engine finish reason; abort -> "abort".
std::string openai_finish_reason(finish_reason r);

}  // namespace spate
