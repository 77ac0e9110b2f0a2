// The pieces a model's output is parsed into for chat and the Responses API:
// reasoning, content and tool calls, in output order. The tool-call parsers
// (tool_calls.h) emit content and call events; the output parser
// (output_parser.h) adds the reasoning around them.
//
// Plain data; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spate::api {

struct output_event {
  enum class kind {
    content,          // text: a content delta
    call_begin,       // index, id, name: a call starts (its arguments follow)
    arguments,        // index, text: a piece of the call's arguments JSON
    call_end,         // index, complete
    reasoning_begin,  // a reasoning part starts (it may stay empty)
    reasoning,        // text: a piece of the current reasoning part (never empty)
    reasoning_end,    // complete: the part was closed by its end marker
                      // ("</think>", harmony's "<|end|>"), not by the end of the output
  };
  kind type = kind::content;
  int32_t index = -1;  // call_*: the call's number in this output, from 0
  std::string text;
  std::string id;
  std::string name;
  // call_end: false when the call broke off (bad JSON, the output ended, or
  // the call grew past k_max_call_bytes); see tool_calls.h for what the
  // stream does with its text. reasoning_end: see above.
  bool complete = true;
};
using output_events = std::vector<output_event>;

}  // namespace spate::api
