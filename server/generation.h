// The part of every generating endpoint that is independent of the protocol:
// from a parsed OpenAI request to token ids (chat template, tokenizer,
// max_tokens default, context check) and then to engine requests whose events
// flow into a request_stream.
//
// Thread-safety: any I/O thread (uses only const model data and engine::submit/cancel).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/openai_request.h"
#include "server/request_stream.h"
#include "server/server_context.h"

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
std::optional<api::api_error> prepare_generation(const server_context& ctx, const api::parsed_request& r, prepared_generation& out);

// Submits the n choices (choice i uses seed + i when a seed was given). On a
// refusal, already-submitted choices are cancelled and the error returned
// (429 with Retry-After semantics when the queue is full, 400 context_length
// for what can never fit, 503 when stopping). ids receives the engine ids.
std::optional<api::api_error> submit_generation(server_context& ctx, const prepared_generation& g,
                                                const std::shared_ptr<request_stream>& stream, std::vector<int64_t>& ids);

void cancel_generation(server_context& ctx, const std::vector<int64_t>& ids);

// "stop" / "length" (OpenAI finish_reason) for an engine finish reason; abort -> "abort".
std::string openai_finish_reason(finish_reason r);

}  // namespace spate
