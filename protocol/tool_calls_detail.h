// Internal to the output parsers (protocol/tool_calls*.cpp, harmony*.cpp,
// output_parser.cpp): byte-at-a-time JSON checkers and the event collector.
// Not a public API.
//
// Thread-safety: each object is used by one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/tool_calls.h"

namespace spate::api::detail {

// Decodes the body of a JSON string, fed one byte at a time after the opening
// quote; decoded UTF-8 is appended to `out`. Rejects raw control characters,
// bad escapes and unpaired surrogates.
class json_string_decoder {
 public:
  enum class status { more, done, error };
  void reset() { *this = json_string_decoder{}; }
  status feed(char c, std::string& out);

 private:
  status feed_hex(char c, std::string& out);

  enum class st { normal, escape, hex, want_backslash, want_u } st_ = st::normal;
  int hex_left_ = 0;
  uint32_t code_ = 0;
  uint32_t high_ = 0;  // a high surrogate waiting for its low half
};

// Checks that bytes form one JSON value (RFC 8259), fed one byte at a time,
// starting at the value's first byte (no leading whitespace). Nesting deeper
// than k_max_depth is an error. done_unconsumed: the value (a top-level
// number) ended before this byte, which belongs to what follows.
class json_value_scanner {
 public:
  static constexpr size_t k_max_depth = 64;
  enum class status { more, done, done_unconsumed, error };
  void reset() { *this = json_value_scanner{}; }
  status feed(char c);

 private:
  enum class st { value, obj_first, obj_key, colon, arr_first, after, string, number, literal };
  status value_start(char c);
  status value_end();
  status feed_string(char c);
  status feed_number(char c);

  st st_ = st::value;
  std::vector<char> stack_;  // '{' or '['
  bool in_key_ = false;
  int esc_ = 0;               // string: 1 after '\\', 2..5 hex digits to go + 1
  int num_ = 0;               // number sub-state, see feed_number
  const char* lit_ = nullptr; // literal: the rest to match
};

inline bool is_json_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The number of bytes at the end of s that start a UTF-8 sequence which is not
// complete yet (0..3); 0 when s ends on a boundary or in invalid UTF-8.
size_t incomplete_utf8_tail(const std::string& s);

// Collects a parser's events (output_events.h): merges consecutive content
// (and arguments of one call, and reasoning) into one event, and holds an
// incomplete trailing UTF-8 sequence back until the next take().
class output_event_sink {
 public:
  using kind = output_event::kind;
  void content(std::string_view text);
  void arguments(int32_t index, std::string_view text);
  void begin(int32_t index, std::string id, std::string name);
  void end(int32_t index, bool complete);
  void reasoning_begin();
  void reasoning(std::string_view text);
  void reasoning_end(bool complete);
  // The events so far; unless final, an incomplete UTF-8 sequence at the end
  // of the last content/arguments/reasoning event waits for the next call.
  output_events take(bool final);

 private:
  void append(kind k, int32_t index, std::string_view text);
  void text(kind k, int32_t index, std::string_view text);  // a text event; nothing when text is empty
  void flush_carry();
  void push(kind k, int32_t index = -1, bool complete = true);

  output_events out_;
  std::string carry_;
  kind carry_kind_ = kind::content;
  int32_t carry_index_ = -1;
};

// Drops from a tool-call stream's events each call that repeats an earlier
// complete call of the same output: the same name, and arguments equal but
// for the whitespace outside strings (how the tool grammar compares them,
// grammar/distinct_items.h; it lets a repeat through to end the list). A call
// is held back while it may still turn out a repeat (an earlier call has its
// name and its arguments so far start that call's), then passed on whole once
// it cannot; the calls passed on are numbered from 0 without gaps. Events in
// order; the output is a function of the concatenated input alone.
class repeated_call_filter {
 public:
  output_events filter(output_events in);

 private:
  struct call {
    std::string name, args;
  };
  void add_args(std::string_view text);
  bool may_repeat() const;
  bool repeats() const;
  void release(output_events& out);

  std::vector<call> done_;
  std::string name_, args_;  // the open call; args_ without whitespace outside strings
  bool in_string_ = false, escape_ = false, holding_ = false;
  int32_t out_index_ = -1, next_out_ = 0;
  output_events held_;
};

}  // namespace spate::api::detail
