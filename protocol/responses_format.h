// The formatter of the OpenAI Responses API (see generation_format.h for the
// contract): the response object and streaming events of one text response,
// shared by POST /v1/responses (SSE, or the response object as the body) and
// its WebSocket mode (stream is implicit there). Each event is a stream_event
// (type, JSON text); SSE writes "event: TYPE\ndata: JSON\n\n", WebSocket sends
// the JSON as one text message.
//
// Event order: response.created, response.in_progress, then the output
// items, each opened by response.output_item.added; the message item opens
// lazily, at its first text (response.output_item.added,
// response.content_part.added, then response.output_text.delta*), and closes
// at the end (response.output_text.done, response.content_part.done,
// response.output_item.done); then response.completed (or
// response.incomplete when max_output_tokens ended it, or response.failed on
// an engine error). A response that produced neither text nor calls still
// opens (and closes) an empty message item at the end, as the non-streaming
// output has one. output_index numbers the items in the order they were
// added: 0, 1, 2... (the openai SDK appends items as they are added).
//
// Tool use (tool_format given): the output is parsed for calls (tool_calls.h);
// each call is a "function_call" output item {"id","type","call_id","name",
// "arguments","status"}. Non-streaming, the message item comes first and is
// left out when the text is only whitespace and calls came out. Streaming, a
// call adds response.output_item.added, response.function_call_arguments.delta*,
// response.function_call_arguments.done and response.output_item.done as it
// comes out; text that is only whitespace is held back until other text comes
// (it then opens the message item) or the output ends (the message item is
// then left out if calls came out), so response.completed's output has the
// non-streaming shape: the same items, the message first unless its first
// text came after a call.
//
// Reasoning (a reasoning parser: think tags or harmony, output_parser.h):
// each reasoning part is a "reasoning" output item {"id","type","summary":[],
// "content":[{"type":"reasoning_text","text"}],"encrypted_content":null,
// "status"}, there whenever the output has the part (even an empty one).
// Think tags give one part, before every other item (output_index 0);
// harmony one per analysis message, in output order (the first item's id is
// reasoning_id, later ones add "_2", "_3"...). Non-streaming, the reasoning
// items come first. Streamed as OpenAI streams reasoning text:
// response.output_item.added, response.content_part.added (part
// {"type":"reasoning_text","text":""}), response.reasoning_text.delta*, then
// at the part's end ("</think>", harmony's "<|end|>", or the end of the
// output) response.reasoning_text.done, response.content_part.done and
// response.output_item.done; the message and calls are parsed from the
// content alone. usage.output_tokens_details.reasoning_tokens counts the
// tokens of the engine steps that produced reasoning or began inside it (a
// step counts whole).
//
// An engine error without a message fails the response with "internal error".
//
// Not thread-safe; one instance per response, used on one strand.
#pragma once

#include <boost/json.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "protocol/generation_format.h"
#include "protocol/openai_request.h"
#include "protocol/output_parser.h"

namespace spate {

class responses_formatter final : public generation_formatter {
 public:
  // created_at: Unix seconds. Reads req's sampling fields and stream flag only (not kept).
  // output: how the output is parsed (reasoning, harmony, tool use);
  // reasoning_id: the first reasoning item's id.
  responses_formatter(std::string response_id, std::string message_id, std::string model, int64_t created_at,
                      const api::parsed_request& req, const api::output_format& output = {}, std::string reasoning_id = "");

  // response.created, response.in_progress (streaming only).
  stream_events begin() override;
  // tokens with text: response.output_text.delta; finished: the done events and
  // response.completed or response.incomplete; error: response.failed.
  stream_events on_event(int32_t choice, const engine_event& e) override;
  bool done() const override { return done_; }
  stream_events end() override { return {}; }
  // The response object, or the engine error.
  final_body result() const override;
  // The finished event's usage, or before it (a cancelled stream) the tokens of the tokens events so far.
  int32_t completion_tokens() const override { return has_usage_ ? usage_.completion_tokens : n_tokens_; }
  std::string finish_reason_text() const override;

  // The whole response object in its current state (non-streaming body).
  boost::json::object response_object() const;
  const std::string& text() const { return text_; }

 private:
  stream_event delta(std::string_view text);
  // Streaming: a piece of content text; opens the message item at the first
  // text that is not held back (see the header comment).
  void stream_text(std::string_view text, stream_events& out);
  // Streaming: response.output_item.added and response.content_part.added of
  // the message item, at the next output index.
  void open_message(stream_events& out);
  stream_events finish(finish_reason reason, const request_usage& usage);
  stream_events fail(std::string_view message);
  stream_event make(std::string type, boost::json::object o);
  boost::json::object message_item(bool done) const;
  boost::json::object text_part() const;
  // {"item_id", "output_index", "content_index"} of the one text part (streaming: once opened).
  boost::json::object part_address() const;
  struct function_call {
    std::string item_id, call_id, name, arguments;
    bool done = false;
    bool complete = true;  // false: cut by max_output_tokens (status "incomplete")
    int64_t output_index = 0;  // streaming: its place among the output items
  };
  struct reasoning_part {
    std::string id, text;
    bool done = false;
    bool complete = false;     // ended by its end marker (not by the end of the output)
    int64_t output_index = 0;  // streaming: its place among the output items
  };
  boost::json::object call_item(const function_call& c) const;
  boost::json::object reasoning_item(const reasoning_part& r, bool done) const;
  boost::json::object reasoning_address(const reasoning_part& r) const;
  // The output items of the finished response.
  boost::json::array output_items() const;
  // Parsed output (output_parser.h): text, reasoning and calls, streamed or kept.
  void on_output(api::output_events evs, stream_events& out);
  void on_call_event(const api::output_event& ev, stream_events& out);
  void on_reasoning_event(const api::output_event& ev, stream_events& out);
  // Content text: streamed, or kept.
  void on_content(std::string_view text, stream_events& out);

  std::string id_, msg_id_, model_;
  int64_t created_at_;
  boost::json::value instructions_, max_output_tokens_, temperature_, top_p_;
  std::string status_ = "in_progress";
  std::string text_;
  std::string incomplete_reason_;
  std::string error_;
  bool has_usage_ = false;
  int32_t n_tokens_ = 0;  // token ids of the tokens events seen
  request_usage usage_;
  finish_reason reason_ = finish_reason::none;
  bool stream_ = false;
  bool done_ = false;
  int64_t seq_ = 0;
  int64_t msg_index_ = -1;  // streaming: the message item's output_index once opened, else -1
  std::string held_;        // streaming: content not yet sent (whitespace before the message item opens)
  int64_t n_items_ = 0;     // streaming: output items added so far (the next output_index)
  std::unique_ptr<api::output_parser> parser_;  // reasoning or tool use
  bool tool_use_ = false;
  std::vector<function_call> calls_;
  boost::json::value tools_echo_ = boost::json::array(), tool_choice_echo_ = "auto", format_echo_, reasoning_echo_;
  bool parallel_echo_ = true;
  std::string reasoning_id_;
  std::vector<reasoning_part> reasoning_;
  int32_t n_reasoning_tokens_ = 0;
};

}  // namespace spate
