// The Messages API's answer (Anthropic's public API reference), from the same
// engine events and output parser (output_parser.h) as chat's:
//
// Non-streaming: {"id": "msg_...", "type": "message", "role": "assistant",
//   "model", "content": [thinking, text and tool_use blocks, in output order],
//   "stop_reason": end_turn | max_tokens | stop_sequence | tool_use,
//   "stop_sequence": the stop string that matched or null,
//   "usage": {"input_tokens", "output_tokens"}}.
// Streaming (SSE, `event: TYPE` + `data: JSON`): message_start; per block
//   content_block_start, content_block_delta (text_delta, input_json_delta,
//   thinking_delta) and content_block_stop; message_delta (stop_reason,
//   stop_sequence, usage.output_tokens); message_stop. Keep-alives are `ping`
//   events (sse_sink); an engine error is an `error` event.
//
// Thread-safety: as generation_formatter (one per request).
#pragma once

#include <memory>
#include <string>

#include "protocol/generation_format.h"
#include "protocol/output_parser.h"

namespace spate {

class anthropic_formatter final : public generation_formatter {
 public:
  // m, r and g must outlive the formatter. id: "msg_..." (n is 1).
  anthropic_formatter(const api::served_model& m, const api::parsed_request& r, const prepared_generation& g, std::string id);

  stream_events begin() override;
  stream_events on_event(int32_t choice, const engine_event& e) override;
  bool done() const override { return acc_.done; }
  stream_events end() override;
  final_body result() const override;
  int32_t completion_tokens() const override { return acc_.completion_tokens; }
  std::string finish_reason_text() const override;

 private:
  enum class block { none, text, thinking, tool_use };
  // Streaming: the events of parsed output pieces (opening and closing blocks).
  void stream_output(const api::output_events& evs, stream_events& out);
  void open_block(block b, boost::json::object content_block, stream_events& out);
  void close_block(stream_events& out);
  stream_event event(const char* type, boost::json::object o) const;
  // stop_reason for the accumulated finish (tool_use once a call completed).
  std::string stop_reason(bool called) const;

  const api::served_model& model_;
  const api::parsed_request& req_;
  const prepared_generation& gen_;
  std::string id_;
  choice_accumulator acc_;
  int32_t stop_index_ = -1;
  std::unique_ptr<api::output_parser> parser_;  // streaming, when the output is parsed
  block open_ = block::none;
  int32_t n_blocks_ = 0;  // blocks started so far (the next one's index)
  bool called_ = false;   // streaming: a tool call completed
};

}  // namespace spate
