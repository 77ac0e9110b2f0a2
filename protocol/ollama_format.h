// Ollama's answers to /api/chat and /api/generate (Ollama's public API docs),
// from the same engine events and output parser (output_parser.h) as chat's.
// Each event is one JSON object; streamed as NDJSON (one per line):
//   chat:     {"model", "created_at", "message": {"role": "assistant",
//              "content", ["thinking"], ["tool_calls": [{"function": {"name",
//              "arguments": {...}}}]]}, "done": false}
//   generate: {"model", "created_at", "response", ["thinking"], "done": false}
// and a last object with "done": true, "done_reason" (stop | length), and
// total_duration, load_duration, prompt_eval_count, prompt_eval_duration,
// eval_count, eval_duration (nanoseconds). With "logprobs": true, a chunk
// carries "logprobs": [{"token", "logprob", "bytes", "top_logprobs"}] for the
// tokens it covers (the whole answer's when not streamed). Not streamed: that last object
// carries the whole message / response. An engine error is {"error": ...}.
//
// Thread-safety: as generation_formatter (one per request).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "protocol/generation_format.h"
#include "protocol/output_parser.h"

namespace spate {

class ollama_formatter final : public generation_formatter {
 public:
  // m, r and g must outlive the formatter; r.ollama_kind is set.
  ollama_formatter(const api::served_model& m, const api::parsed_request& r, const prepared_generation& g);

  stream_events begin() override { return {}; }
  stream_events on_event(int32_t choice, const engine_event& e) override;
  bool done() const override { return acc_.done; }
  stream_events end() override { return {}; }
  final_body result() const override;
  int32_t completion_tokens() const override { return acc_.completion_tokens; }
  std::string finish_reason_text() const override;

 private:
  boost::json::object envelope() const;
  // The pieces of parsed output as message / response fields.
  struct pieces {
    std::string content, thinking;
    boost::json::array calls;
  };
  void add_events(const api::output_events& evs, pieces& p);
  boost::json::object chunk(const pieces& p, bool done, const std::vector<token_logprob>* lps = nullptr) const;
  void add_stats(boost::json::object& o) const;

  const api::served_model& model_;
  const api::parsed_request& req_;
  const prepared_generation& gen_;
  bool chat_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::string created_at_;
  choice_accumulator acc_;
  request_metrics metrics_;
  std::unique_ptr<api::output_parser> parser_;
  std::vector<std::string> call_args_;  // streaming: arguments of the calls in progress, by index
  std::vector<std::string> call_names_;
  std::vector<token_logprob> pending_logprobs_;  // streaming: not yet sent with a chunk
};

}  // namespace spate
