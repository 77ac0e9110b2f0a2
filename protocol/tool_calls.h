// Tool calls in model output: which format a chat template uses, the literal
// text a call is wrapped in (for grammars), the system prompt of the generic
// format, and parsers that turn the model's text into OpenAI tool calls,
// whole (parse_tool_calls) or as the text streams in (tool_call_stream).
//
// Formats (names as vLLM's --tool-call-parser):
//   hermes       <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//                one or more blocks anywhere in the text; the rest is content.
//   llama3_json  {"name": "f", "parameters": {...}} ("arguments" accepted),
//                optionally after <|python_tag|>, several separated by ';'.
//                Only at the start of the output (after whitespace); an
//                output that does not start with a call is plain content.
//   mistral      [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...] or the
//                newer [TOOL_CALLS]f[ARGS]{...}; text before is content.
//   generic      the whole output is {"tool_calls": [{"name": "f",
//                "arguments": {...}}, ...]}, {"tool_call": {...}} or
//                {"response": "text"} (the string is the content; another
//                JSON value there, a response format's answer, is the
//                content as written); anything else is plain content. The tools are described to the model
//                by generic_tool_system_prompt().
//   openai       OpenAI's harmony format (gpt-oss): a message to
//                functions.NAME, "<|channel|>commentary to=functions.NAME
//                <|constrain|>json<|message|>{...}". The harmony parser
//                (harmony.h) reads these calls along with the channels;
//                tool_call_stream treats this format's output as plain content.
//
// A call object is {"name": STRING, ARGS_KEY: OBJECT-or-STRING} where
// ARGS_KEY is "arguments" (or "parameters"); the keys "id" and "type" may
// appear anywhere and are ignored; any other key makes the object not a call.
// Arguments given as a JSON string are passed on decoded (the string is meant
// to hold JSON). A missing arguments key means "{}" except for llama3_json,
// where it means "not a call" (a bare {"name": ...} is too likely an answer).
// When "name" comes first (the usual order) the arguments are passed on as
// the model's own JSON text, byte for byte, and stream as they come; when the
// arguments come first, the object is checked to its end, parsed whole, and
// the arguments are re-serialized (compact JSON) in one piece. Nesting deeper
// than 64 levels is not a call.
//
// A call that repeats an earlier complete call of the same output (the same
// name, arguments equal but for the whitespace outside strings) is dropped:
// the tool grammar lets a repeat through to end the list (tool_grammar.h). A
// stream holds a call back while it may still turn out a repeat, and numbers
// the calls it passes on from 0 without gaps.
//
// The markers ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>") must be in the
// text: detokenize with special tokens kept for models where they are special.
//
// Leniency and failures: text that does not parse as a call is content,
// never thrown away, and nothing throws (but std::bad_alloc). Once a call has
// fully parsed it stays a call even if the text after it breaks the format
// (say a missing </tool_call>, or text after a llama3 call): the rest is
// content. Dropped, on purpose: whitespace right after a call, the format's
// markers, separators and closers around calls that parsed, the generic
// format's {"response": "..."} wrapping, and an escape sequence cut off by
// the end of the output inside that response string.
//
// Thread-safety: free functions are pure and thread-safe; a tool_call_stream
// or tool_call_ids object is used by one thread at a time.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/output_events.h"

namespace spate::api {

enum class tool_call_format { generic, hermes, llama3_json, mistral, openai };

// vLLM's --tool-call-parser names: "hermes" (aliases "qwen", "qwen2_5"),
// "llama3_json" (aliases "llama3", "llama3_1", "llama4_json"), "mistral",
// "generic" (alias "json"), "openai". Case-sensitive; nullopt for anything else.
std::optional<tool_call_format> tool_call_format_from_name(std::string_view name);
// The canonical name ("hermes", "llama3_json", "mistral", "generic", "openai").
const char* tool_call_format_name(tool_call_format f);

// The format a chat template makes its model write, from the template source:
//   openai       if it mentions "<|channel|>" (harmony: gpt-oss);
//   hermes       else if it mentions "<tool_call>" (Hermes 2 Pro/3, Qwen 2.5);
//   mistral      else if it mentions "[TOOL_CALLS]" (Mistral Nemo...);
//   llama3_json  else if it mentions "<|start_header_id|>", "\"parameters\""
//                and either "Environment: ipython" or "<|python_tag|>"
//                (Llama 3.1/3.2/3.3; not functionary v3.1, whose calls are
//                <function=...>, nor Command R, which has no ipython role);
//   generic      otherwise (templates without a tool format we parse).
tool_call_format detect_tool_call_format(std::string_view chat_template_source);

// The literal text around calls, to assemble a grammar (built elsewhere):
//   list_open call (list_sep call)* list_close
// where call = call_prefix {"NAME_KEY": "<fn>", "ARGS_KEY": <params>} call_suffix.
// All parsers here also accept whitespace around the separators.
struct tool_call_syntax {
  std::string list_open;
  std::string call_prefix;
  std::string call_suffix;
  std::string list_sep;
  std::string list_close;
  std::string name_key = "name";
  std::string args_key = "arguments";
  // Whether the model may write text before the calls (hermes, mistral: a
  // lazy grammar starts at list_open / call_prefix); otherwise the calls are
  // the whole output (llama3_json also accepts a leading "<|python_tag|>").
  bool text_before_calls = false;
};
tool_call_syntax syntax_of(tool_call_format f);

struct tool_call {
  std::string id;         // "call_" + 24 alphanumerics
  std::string name;
  std::string arguments;  // JSON text (an object, unless a string argument held other text); see above
  bool complete = true;   // false: cut by the length limit, arguments as far as written
};

struct parsed_tool_output {
  std::string content;  // the text that is not part of a call ("" when none)
  std::vector<tool_call> calls;
};

// Call ids: "call_" + 24 characters of [A-Za-z0-9], a pure function of the
// seed and of how many ids came before (splitmix64). Give each request its
// own seed (e.g. from its request id) for unique-looking ids.
class tool_call_ids {
 public:
  explicit tool_call_ids(uint64_t seed) : seed_(seed) {}
  std::string next();

 private:
  uint64_t seed_;
  uint64_t count_ = 0;
};

// Whole-output parse; see the format notes above. Equals what a
// tool_call_stream fed the same text (in any pieces) and finish(cut) produce,
// minus the calls it ends with complete = false (whose text it also emits as
// content), except that with cut those calls are kept, with the arguments
// written so far (as OpenAI returns a call cut by max_tokens).
parsed_tool_output parse_tool_calls(tool_call_format f, std::string_view text, tool_call_ids& ids, bool cut = false);

// The events of a tool-call stream: content, call_begin, arguments and
// call_end only (output_events.h). call_end's complete is false when the call
// broke off after its arguments started (bad JSON, the output ended, or the
// call grew past k_max_call_bytes). The stream then also emits the call's
// whole raw text as content, which is what parse_tool_calls returns for it: a
// client sees a partial call and the text.
using tool_stream_event = output_event;
using tool_stream_events = output_events;

// The longest call (its raw text, from its opening marker) a stream follows;
// a longer one ends with complete = false and the rest is content.
inline constexpr size_t k_max_call_bytes = size_t{1} << 20;

// Incremental parser: feed it the model's text deltas in order, then finish().
// Content deltas are only text that is certainly not part of a call: text
// that may still turn out to be a call (a partial "<tool_c", the start of a
// llama3/generic output) is held back until it is decided, at most
// k_max_call_bytes plus a marker's length. Deltas are cut on UTF-8 character
// boundaries (an incomplete trailing sequence waits for the next feed).
// The concatenated content of all events and the calls they describe do not
// depend on how the text was split. A moved-from stream may only be destroyed
// or assigned to.
class tool_call_stream {
 public:
  tool_call_stream(tool_call_format f, uint64_t id_seed);
  tool_call_stream(tool_call_format f, tool_call_ids ids);
  ~tool_call_stream();
  tool_call_stream(tool_call_stream&&) noexcept;
  tool_call_stream& operator=(tool_call_stream&&) noexcept;

  tool_stream_events feed(std::string_view delta);
  // Ends the output: decides what was held back (a call whose object had not
  // closed ends with complete = false and its text is content; a partial
  // marker is content). Further feed()/finish() calls return nothing.
  // cut: the output was cut by the length limit (finish_reason "length"):
  // whatever was held back as possible call syntax (a marker, a list
  // separator, a partial call, the generic format's wrapper) is dropped
  // instead of becoming content, and an open call ends with complete = false
  // without its text as content. Content is then only the model's own text.
  tool_stream_events finish(bool cut = false);

  // The id source, advanced past the ids given so far.
  const tool_call_ids& ids() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// The generic format's system prompt: the tools (each tools[i].function's
// name, description and parameters, as JSON) and the JSON answer shapes.
// parallel_tool_calls=false asks for exactly one call per answer;
// call_required (tool_choice "required") leaves out the plain "response"
// answer. direct_answer, when not empty, replaces the plain answer's
// instructions (a response format constrains it). Entries of `tools` that are
// not {"type":"function","function":{..}} objects are skipped.
std::string generic_tool_system_prompt(const boost::json::array& tools, bool parallel_tool_calls,
                                       bool call_required = false, std::string_view direct_answer = {});

// Adds `prompt` to a chat's messages, before the caller's own system text
// (stable first, for the prefix cache): prompt + "\n\n" + the first message's
// content when that is a system message with string content (or a first text
// part prompt + "\n\n" in an array of parts), else a new system message is
// prepended.
void add_system_prompt(boost::json::array& messages, std::string_view prompt);

}  // namespace spate::api
