// The grammar that makes a model call tools (tool_choice "required" or a
// named function, and the generic format's "auto"), in the syntax of the
// model's tool-call format (tool_calls.h):
//
//   root  ::= list_open call (list_sep call){0,7} list_close  (parallel_tool_calls)
//           | list_open call list_close                         (otherwise)
//           | "{\"response\": " string "}"                      (generic "auto" only)
//   call  ::= call_prefix "{\"NAME_KEY\": \"f\", \"ARGS_KEY\": " <f's parameters schema> "}" call_suffix
//           | ... one alternative per allowed function
//
// so every call names a known function and its arguments validate against
// that function's `parameters` (any JSON object when it has none). At most
// k_max_parallel_tool_calls calls per answer, so a model repeating itself
// still ends.
//
// The spec is plain JSON, so the constraint cache keys on it like on a schema:
//   {"format": "hermes", "functions": [{"name", "parameters"}], "parallel": bool, "response": bool}
// Pure functions; any thread.
#pragma once

#include <boost/json.hpp>

#include "grammar/grammar_ir.h"
#include "protocol/openai_request.h"
#include "protocol/tool_calls.h"

namespace spate::api {

inline constexpr int k_max_parallel_tool_calls = 8;

// The spec for a request's tool use (t.active(), mode required, named, or
// automatic with the generic format).
boost::json::value tool_grammar_spec(const tool_request& t, tool_call_format f);

// Throws grammar::grammar_error (a function's parameters are not a schema we compile).
grammar::grammar build_tool_grammar(const boost::json::value& spec);

}  // namespace spate::api
