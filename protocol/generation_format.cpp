#include "protocol/generation_format.h"

#include <algorithm>

#include "protocol/anthropic_format.h"
#include "protocol/ollama_format.h"

#include "protocol/completions_format.h"
#include "protocol/responses_format.h"

namespace spate {

namespace json = boost::json;

std::string sse_frame(const stream_event& e) {
  if (e.type.empty()) return "data: " + e.data + "\n\n";
  return "event: " + e.type + "\ndata: " + e.data + "\n\n";
}

void choice_accumulator::add(const engine_event& e, bool keep_content) {
  switch (e.type) {
    case engine_event::kind::tokens:
      completion_tokens += static_cast<int32_t>(e.token_ids.size());
      if (keep_content) {
        text += e.text;
        token_ids.insert(token_ids.end(), e.token_ids.begin(), e.token_ids.end());
        logprobs.insert(logprobs.end(), e.logprobs.begin(), e.logprobs.end());
      }
      return;
    case engine_event::kind::finished:
      done = true;
      reason = e.reason;
      usage = e.usage;
      completion_tokens = e.usage.completion_tokens;
      return;
    case engine_event::kind::error:
      done = true;
      error = e.error.empty() ? "internal error" : e.error;
      return;
  }
}

std::unique_ptr<generation_formatter> make_formatter(const api::served_model& m, const api::parsed_request& r,
                                                     const prepared_generation& g, const id_maker& make_id, int64_t created) {
  if (r.ollama_kind) return std::make_unique<ollama_formatter>(m, r, g);
  if (r.kind == api::endpoint::messages) {
    std::string id = make_id("msg");
    std::replace(id.begin(), id.end(), '-', '_');  // Anthropic's "msg_..."
    return std::make_unique<anthropic_formatter>(m, r, g, std::move(id));
  }
  if (r.kind == api::endpoint::responses) {
    std::string response_id = make_id("resp");
    std::string message_id = make_id("msg");
    std::string reasoning_id = g.output().splits_reasoning() ? make_id("rs") : "";
    return std::make_unique<responses_formatter>(std::move(response_id), std::move(message_id), m.name, created, r, g.output(),
                                                 std::move(reasoning_id));
  }
  return std::make_unique<completions_formatter>(m, r, g, make_id(r.kind == api::endpoint::chat_completions ? "chatcmpl" : "cmpl"),
                                                 created);
}

json::object usage_json(int32_t prompt_tokens, int32_t completion_tokens, int32_t cached_tokens) {
  json::object u;
  u["prompt_tokens"] = prompt_tokens;
  u["completion_tokens"] = completion_tokens;
  u["total_tokens"] = prompt_tokens + completion_tokens;
  if (cached_tokens > 0) {
    json::object d;
    d["cached_tokens"] = cached_tokens;
    u["prompt_tokens_details"] = std::move(d);
  }
  return u;
}

}  // namespace spate
