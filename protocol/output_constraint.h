// Structured outputs on the request side: the constraint a request asks for,
// read from whichever of the accepted spellings it uses, into one plain struct.
//
//   chat, completions:  response_format {"type": "json_object"} |
//                         {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
//                       structured_outputs {json | regex | choice | grammar | json_object}   (vLLM)
//                       guided_json, guided_regex, guided_choice, guided_grammar            (vLLM, older)
//                       json_schema, grammar                                                (llama.cpp)
//   responses:          text.format {"type": "json_schema", "name", "schema", "strict"} | {"type": "json_object"}
//
// At most one constraint per request (a second one is a 400 naming both).
// Pure functions; any thread.
#pragma once

#include <boost/json.hpp>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spate::api {

struct api_error;

struct output_constraint {
  enum class kind { none, json_object, json_schema, regex, choice, grammar, tool_calls };
  kind type = kind::none;
  boost::json::value schema;         // json_schema; tool_calls: the tool_grammar.h spec
  std::string text;                  // regex pattern or GBNF source
  std::vector<std::string> choices;  // choice: non-empty strings, at least one
  std::string param;                 // the request field it came from, for error messages
  bool none() const { return type == kind::none; }
};

// Looks a top-level body field up (absent and null alike: nullptr) and marks
// it as read.
using field_getter = std::function<const boost::json::value*(std::string_view)>;

// Reads the chat / completions spellings above into out.
std::optional<api_error> parse_output_constraint(const field_getter& get, output_constraint& out);
// Reads a Responses API `text.format` object (type already known not to be "text").
std::optional<api_error> parse_text_format(const boost::json::object& format, output_constraint& out);

}  // namespace spate::api
