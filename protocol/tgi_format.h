// TGI's answers (text-generation-inference's router schemas), from the
// engine events of one generation:
//   /generate:        {"generated_text", "details"?: {"finish_reason": "length" |
//                      "eos_token" | "stop_sequence", "generated_tokens", "seed"
//                      (null unless sampling), "prefill": [], "tokens": [{"id",
//                      "text", "logprob", "special"}], "top_tokens"?: [[token...]]}}
//                     (details only when parameters.details; POST / without
//                     stream answers [that object])
//   /generate_stream: SSE events data:{"index": 0, "token": {...}, "top_tokens":
//                      [...], "generated_text": null, "details": null}; the last
//                      event carries the last token, "generated_text" and, with
//                      parameters.details, "details": {"finish_reason",
//                      "generated_tokens", "seed", "input_length"}. An engine
//                      error is data:{"error", "error_type": "generation"}.
// Token texts are the incremental UTF-8 decode of the tokens (special tokens
// give ""), so the stream's texts add up to the decoded output;
// generated_text is the engine's text (stop strings cut, as every spate API
// does), prefixed by the inputs with return_full_text. special: end-of-
// generation and control tokens. A logprob of -inf is written as -9999.0.
//
// Thread-safety: as generation_formatter (one per request).
#pragma once

#include <boost/json.hpp>
#include <optional>

#include "protocol/generation_format.h"
#include "protocol/tgi_request.h"
#include "tokenizer/tokenizer.h"

namespace spate {

class tgi_formatter final : public generation_formatter {
 public:
  // m, r and g must outlive the formatter; g.params is what was submitted (its seed is reported).
  tgi_formatter(const api::served_model& m, const api::tgi_request& r, const prepared_generation& g);

  stream_events begin() override { return {}; }
  stream_events on_event(int32_t choice, const engine_event& e) override;
  bool done() const override { return acc_.done; }
  stream_events end() override { return {}; }
  final_body result() const override;
  int32_t completion_tokens() const override { return acc_.completion_tokens; }
  std::string finish_reason_text() const override;

 private:
  struct token_out {
    boost::json::object token;
    boost::json::array top;
  };
  token_out make_token(int32_t id, const token_logprob* lp, std::string text) const;
  boost::json::object token_json(int32_t id, float logprob, std::string text) const;
  std::string generated_text() const;
  stream_event stream_chunk(token_out t, bool last) const;

  const api::served_model& model_;
  const api::tgi_request& req_;
  const prepared_generation& gen_;
  incremental_decoder decoder_;
  choice_accumulator acc_;
  int32_t stop_index_ = -1;
  std::vector<token_out> tokens_;    // not streamed: every token, for details
  std::optional<token_out> pending_;  // streamed: the last token, sent with the end
};

// TGI's finish_reason for an engine finish: stop by a stop string (stop_index >= 0) ->
// "stop_sequence", other stops -> "eos_token", length -> "length".
const char* tgi_finish_reason(finish_reason r, int32_t stop_index);

// GET /info (TGI's Info; max_concurrent_requests: the requests the engine holds waiting, --max-queued-requests): model_id, max_input_tokens, max_total_tokens, max_best_of,
// max_stop_sequences, max_top_n_tokens, version, router, ... for model m.
boost::json::object tgi_info(const api::served_model& m, int32_t max_concurrent_requests, std::string_view version);

}  // namespace spate
