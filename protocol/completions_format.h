// The formatter of POST /v1/completions and /v1/chat/completions (see
// generation_format.h for the contract).
//
// Streaming (SSE `data:` chunks, OpenAI's shapes):
//   chat: first one role delta {"role":"assistant","content":""} per choice;
//   completions with echo: first the prompt text per choice;
//   then a chunk per tokens event that has text (or logprobs when requested),
//   a chunk with finish_reason per finished choice, an {"error": {...}} chunk
//   per failed choice, and at the end the usage chunk (include_usage: empty
//   choices) and "[DONE]". With include_usage every chunk carries "usage":null.
// Non-streaming: {"id","object","created","model","choices":[...],"usage"},
//   choices in index order; the first engine error fails the whole request.
// Tool use (prepared_generation::tool_format set): the output is parsed for
//   calls (tool_calls.h): message.tool_calls [{"id","type":"function",
//   "function":{"name","arguments"}}] with the rest as content (null when
//   only whitespace), finish_reason "tool_calls" when a call came out and the
//   model stopped; streamed as delta.tool_calls [{"index","id","type",
//   "function":{"name","arguments":""}}] then {"index","function":{"arguments":
//   piece}} deltas, as OpenAI streams them.
// Reasoning (chat with a reasoning parser: prepared_generation::reasoning or
//   harmony set): the output is split as output_parser.h says (think tags,
//   or harmony's channels); message.reasoning_content and message.reasoning
//   (llama-server's and vLLM's current name, the same text) hold the
//   reasoning (null when the output had none; harmony's analysis messages
//   concatenated) and content the rest, which alone is parsed for tool calls
//   (harmony's calls are its messages to functions.NAME). Streamed as
//   delta.reasoning_content and delta.reasoning pieces (in the same chunk as
//   content when a tokens event carries both); a partial tag or marker is
//   held back until it resolves, the rest at the end. include_reasoning
//   false leaves the reasoning out (no field at all).
//
// Not thread-safe; one per request.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "protocol/generation_format.h"
#include "protocol/output_parser.h"

namespace spate {

class completions_formatter final : public generation_formatter {
 public:
  // m, r and g must outlive the formatter. id: "chatcmpl-..." or "cmpl-...".
  completions_formatter(const api::served_model& m, const api::parsed_request& r, const prepared_generation& g, std::string id,
                        int64_t created);

  stream_events begin() override;
  stream_events on_event(int32_t choice, const engine_event& e) override;
  bool done() const override { return n_done_ == static_cast<int32_t>(choices_.size()); }
  stream_events end() override;
  final_body result() const override;
  int32_t completion_tokens() const override;
  std::string finish_reason_text() const override;

 private:
  struct choice {
    choice_accumulator acc;
    int64_t text_offset = 0;  // completions logprobs: running offset of the streamed text
    std::unique_ptr<api::output_parser> parser;  // streaming chat with reasoning or tool use
    bool called = false;                         // a complete tool call was streamed
  };

  // logprobs JSON of lps (null when not requested); completions advance text_offset.
  boost::json::value logprobs_json(int64_t& text_offset, const std::vector<token_logprob>& lps) const;
  // One streaming chunk.
  // chat: reasoning (when not empty) goes in delta.reasoning_content and delta.reasoning.
  stream_event chunk(int32_t index, std::string_view text, const std::string& finish, bool role,
                     boost::json::value logprobs = nullptr, std::string_view reasoning = {}) const;
  boost::json::object envelope(bool streaming) const;  // id, object, created, model
  // A chat chunk with the given delta object.
  stream_event delta_chunk(int32_t index, boost::json::object delta, const std::string& finish,
                           boost::json::value logprobs = nullptr) const;
  // Streaming chat: the chunks of a piece of parsed output: one with its
  // reasoning and content (and the logprobs), then the call deltas.
  void stream_output(int32_t index, choice& c, const api::output_events& evs, boost::json::value logprobs, stream_events& out) const;
  // The seed of choice index's tool call ids.
  uint64_t call_id_seed(int32_t index) const;
  // Non-streaming chat message of a finished choice (content and tool_calls).
  boost::json::object message_of(int32_t index, const choice_accumulator& c, std::string& finish) const;
  const std::string* first_error() const;
  int32_t cached_tokens() const;

  const api::served_model& model_;
  const api::parsed_request& req_;
  const prepared_generation& gen_;
  const bool chat_;
  const bool want_logprobs_;
  std::string id_;
  int64_t created_;
  std::vector<choice> choices_;
  int32_t n_done_ = 0;
};

}  // namespace spate
