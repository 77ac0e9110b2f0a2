// The parse of a chat or Responses output into reasoning, content and tool
// calls (output_events.h), written once for both formatters and for both
// streaming and whole outputs:
//
//   1. the reasoning: split from <think>...</think> (reasoning.h), or read
//      from harmony's channels (harmony.h), or none (all is content);
//   2. the tool calls, when the request uses tools: parsed from the content
//      alone (tool_calls.h); harmony's calls (format openai) are read in 1.
//
// A reasoning part is announced by reasoning_begin (it may stay empty: the
// output "had reasoning") and closed by reasoning_end; think tags give at
// most one part, harmony one per analysis message.
//
// Thread-safety: parse_output is pure; an output_parser is used by one
// thread at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/harmony.h"
#include "protocol/output_events.h"
#include "protocol/reasoning.h"
#include "protocol/tool_calls.h"

namespace spate::api {

// How one request's output is read. At most one of reasoning and harmony is set.
struct output_format {
  std::optional<reasoning_start> reasoning;  // think tags
  std::optional<harmony_options> harmony;    // harmony (its calls flag is set from tools)
  std::optional<tool_call_format> tools;     // the request uses tools
  // Whether the output has reasoning for the client: a think-tag start, or
  // harmony with analysis as reasoning.
  bool splits_reasoning() const { return reasoning.has_value() || (harmony && harmony->reasoning); }
  // Whether the output is parsed at all (else it is content as written).
  bool parses() const { return reasoning || harmony || tools; }
};

class output_parser {
 public:
  output_parser(const output_format& f, tool_call_ids ids);
  ~output_parser();
  output_parser(output_parser&&) noexcept;
  output_parser& operator=(output_parser&&) noexcept;

  // The events the next piece of output makes certain.
  output_events feed(std::string_view text);
  // The end of the output (cut: by the length limit, see tool_call_stream::finish):
  // what was held back, an open reasoning part's reasoning_end (complete =
  // false) and open calls. Further feed()/finish() calls return nothing.
  output_events finish(bool cut);
  // Inside a reasoning part (whose text may continue): reasoning tokens are counted so.
  bool in_reasoning() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// A whole output, parsed.
struct parsed_output {
  bool has_reasoning = false;  // a reasoning part was announced (perhaps empty)
  std::string reasoning;       // the parts' text, concatenated
  std::string content;
  std::vector<tool_call> calls;  // complete calls; with cut also the one cut off (arguments so far)
};

// The same as feeding text to an output_parser and finishing it; ids moves on past the calls.
parsed_output parse_output(const output_format& f, std::string_view text, tool_call_ids& ids, bool cut);

}  // namespace spate::api
