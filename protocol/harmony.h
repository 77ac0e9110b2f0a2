// OpenAI's harmony response format (gpt-oss models): the model's output is a
// sequence of messages, each a header, "<|message|>" and its text:
//
//   <|channel|>analysis<|message|>I should call the tool.<|end|>
//   <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>
//
// (the prompt ends with "<|start|>assistant", so the first header has no
// role). This is what vLLM's openai_gptoss reasoning parser and openai tool
// parser and llama.cpp's gpt-oss chat parser read. A message becomes:
//   analysis (no recipient)         reasoning (one reasoning part per message);
//                                   dropped when reasoning is off
//   recipient functions.NAME        a tool call NAME whose arguments are the
//                                   text, on any channel (llama.cpp accepts
//                                   commentary and analysis); dropped when
//                                   calls are off
//   another recipient (browser.search, python...), or a role other than
//   assistant                       dropped (built-in tools are not served)
//   final, commentary without a recipient (a preamble, as llama.cpp), no
//   channel                         content
// A recipient may be in the role part ("<|start|>assistant to=functions.f
// <|channel|>commentary json<|message|>") or after the channel;
// "to=assistant" counts as no recipient. A message's text ends at "<|end|>",
// "<|call|>" or "<|return|>" (the last two end the generation and are
// usually not in the text), at "<|start|>" or "<|channel|>" (a new message
// whose "<|end|><|start|>assistant" the model left out), or at the end of the
// output; "<|message|>" and "<|constrain|>" inside it are text. The arguments
// of a call are its text as written, without the whitespace around it, and
// are not checked (JSON when the model follows the json content type).
// Several reasoning or content messages are concatenated as written.
//
// Leniency: text outside any message (after "<|end|>", or an output that is
// not harmony at all) is content, without whitespace at its end; a header
// that stops looking like one (a byte other than [A-Za-z0-9_.:=/ -] outside
// the markers, more than k_max_harmony_header bytes, or for the first header
// anything but " to=..." before its first marker) is content too, from where
// it began. A header the output ends in is dropped. Nothing throws (but
// std::bad_alloc).
//
// The markers are matched in the text: the tokenizer renders harmony's
// control tokens (as llama.cpp does). The stream is incremental: fed the
// output in pieces of any size, it emits the same events as fed it whole,
// and never lets a partial marker out (a suffix of the text that may still
// become one is held back until it does or cannot).
//
// Thread-safety: free functions are pure; a harmony_stream is used by one
// thread at a time (copies are independent).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/tool_calls.h"

namespace spate::api {

namespace detail {
class output_event_sink;
}

inline constexpr std::string_view k_harmony_start = "<|start|>";
inline constexpr std::string_view k_harmony_channel = "<|channel|>";
inline constexpr std::string_view k_harmony_message = "<|message|>";
inline constexpr std::string_view k_harmony_constrain = "<|constrain|>";
inline constexpr std::string_view k_harmony_end = "<|end|>";
inline constexpr std::string_view k_harmony_call = "<|call|>";
inline constexpr std::string_view k_harmony_return = "<|return|>";
// The text that starts a final message's text, where a response format's grammar begins.
inline constexpr std::string_view k_harmony_final = "<|channel|>final<|message|>";
inline constexpr size_t k_max_harmony_header = 256;

// How one request's harmony output is read.
struct harmony_options {
  bool reasoning = true;  // analysis messages are reasoning; false: dropped
  bool calls = false;     // messages to functions.NAME are calls; false: dropped
  // The prompt left a message open (continue_final_message): its header with
  // its role ("assistant<|channel|>final"); the output starts in its text.
  // nullopt: the output starts with a header (after "<|start|>assistant").
  std::optional<std::string> open_header;
};

// The header of the message a rendered prompt leaves open: the text between
// its last "<|start|>" and the "<|message|>" after it, when no end marker
// follows; nullopt when the prompt ends between messages or in a header.
std::optional<std::string> harmony_open_header(std::string_view prompt_text);

struct harmony_header {
  std::string role;          // as written after "<|start|>"; "" for the output's first message
  std::string channel;       // "analysis", "commentary", "final"...; "" when none
  std::string recipient;     // "functions.get_weather"...; "" when none or "assistant"
  std::string content_type;  // "json" ("<|constrain|>json" or a word after the channel); "" when none
};

// Reads a header's words: has_role: the text starts with the role.
harmony_header parse_harmony_header(std::string_view text, bool has_role);

class harmony_stream {
 public:
  enum class place { header, body, outside };
  // What the current message's text becomes.
  enum class body_kind { content, reasoning, call, dropped };

  harmony_stream(harmony_options o, tool_call_ids ids);

  // Feeds the next piece of output; the events now certain go to out (null:
  // only the state moves on).
  void feed(std::string_view text, detail::output_event_sink* out);
  // The end of the output: a held partial marker is text (dropped when cut);
  // an open message ends (reasoning_end with complete = false; a call with
  // complete = !cut). Do not feed again.
  void finish(bool cut, detail::output_event_sink* out);

  place where() const { return place_; }
  body_kind body() const { return kind_; }
  // The header of the current (or last) message.
  const harmony_header& header() const { return header_; }
  // Messages whose text has started: a constraint sees a new one begin.
  uint32_t n_messages() const { return n_messages_; }
  // In a header: its text so far (markers included; after "<|start|>", the role first).
  const std::string& header_text() const { return header_raw_; }
  // A held partial marker ("<|me"), or "".
  const std::string& pending() const { return pending_; }
  bool in_reasoning() const { return place_ == place::body && kind_ == body_kind::reasoning; }

 private:
  enum class marker { start, channel, message, constrain, end, call, ret };

  void settle(detail::output_event_sink* out);
  void resolve_pending(detail::output_event_sink* out);
  void on_text(std::string_view text, detail::output_event_sink* out);
  void on_marker(marker m, detail::output_event_sink* out);
  void on_header_marker(marker m, detail::output_event_sink* out);
  void on_body_marker(marker m, detail::output_event_sink* out);
  void header_text(std::string_view text, detail::output_event_sink* out);
  void body_text(std::string_view text, detail::output_event_sink* out);
  void outside_text(std::string_view text, detail::output_event_sink* out);
  bool header_byte_ok(char c) const;
  void begin_header(bool after_start, std::string_view first_marker);
  void open_body(detail::output_event_sink* out);
  void close_body(bool complete, detail::output_event_sink* out);

  harmony_options opts_;
  tool_call_ids ids_;
  place place_ = place::header;
  body_kind kind_ = body_kind::dropped;
  harmony_header header_;
  std::string header_raw_;     // header: its text so far (markers included)
  bool after_start_ = false;   // header: it began at "<|start|>" (a role comes first)
  bool has_marker_ = false;    // header: it holds "<|channel|>" or "<|constrain|>"
  bool open_pending_ = false;  // the prompt's open message is yet to be opened (at the first feed)
  std::string pending_;        // a partial marker
  std::string held_ws_;        // call arguments, outside text: whitespace at the end, not yet emitted
  bool args_started_ = false;  // call: non-whitespace arguments came
  int32_t call_index_ = -1;
  int32_t n_calls_ = 0;
  uint32_t n_messages_ = 0;
};

}  // namespace spate::api
