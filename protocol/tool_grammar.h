// The grammar of a request's answer when it may call tools, in the syntax of
// the model's tool-call format (tool_calls.h):
//
//   list  ::= list_open call (list_sep call){0,7} list_close   (parallel_tool_calls)
//           | list_open call list_close                         (otherwise)
//   call  ::= call_prefix "{\"NAME_KEY\": \"f\", \"ARGS_KEY\": " <f's parameters schema> "}" call_suffix
//           | ... one alternative per allowed function
//
// so every call names a known function and its arguments validate against
// that function's `parameters` (any JSON object when it has none). At most
// k_max_parallel_tool_calls calls per answer, and no two calls of one answer
// are identical (same name, same arguments as written): the list is a
// distinct rule (grammar/distinct_items.h) whose repeats end it: a model that
// repeats a call ends its list there (the repeat is written, then the list
// closes, and the parsers drop the repeat), rather than being steered into a
// different, invented call.
//
// The root, by tool_choice:
//   required, named          list                 (a response format is ignored: tools alone)
//   auto, a response format  list | ANSWER        (generic: list | {"response": ANSWER} for JSON answers)
//   auto, generic            list | {"response": string}
//   auto, hermes / mistral   free text up to the format's marker ("<tool_call>", "[TOOL_CALLS]"),
//                            then the rest of the list: a lazy grammar, the marker is its trigger
//   auto, llama3_json        list | text that does not start with '{' or whitespace | ""
// where ANSWER is the response format's own grammar (JSON schema, JSON
// object, regex, choice or GBNF), embedded whole.
//
// The spec is plain JSON, so the constraint cache keys on it like on a schema:
//   {"format": "hermes", "functions": [{"name", "parameters"}], "parallel": bool,
//    "response": bool, "free_text": bool, "answer": null | <answer_spec>}
// Pure functions; any thread.
#pragma once

#include <boost/json.hpp>

#include "grammar/grammar_ir.h"
#include "protocol/openai_request.h"
#include "protocol/output_constraint.h"
#include "protocol/tool_calls.h"

namespace spate::api {

inline constexpr int k_max_parallel_tool_calls = 8;

// The spec for a request's tool use (t.active(), any mode but none); answer:
// the request's response format (none when it has none).
boost::json::value tool_grammar_spec(const tool_request& t, tool_call_format f, const output_constraint& answer);

// A response format as JSON (in the spec) and back.
boost::json::value answer_spec(const output_constraint& c);
output_constraint answer_of(const boost::json::value& spec);
// Whether the generic format wraps this answer in {"response": ...}: JSON answers.
bool wraps_answer(const output_constraint& c);

// answer: the compiled grammar of spec's "answer" (null when it has none).
// Throws grammar::grammar_error (a function's parameters are not a schema we compile).
// compact_json: no whitespace in the arguments' JSON (--json-whitespace compact).
grammar::grammar build_tool_grammar(const boost::json::value& spec, const grammar::grammar* answer, bool compact_json = false);

}  // namespace spate::api
