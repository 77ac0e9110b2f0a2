// The 400s of request parsing: an api_error naming the field (param) and
// saying what is wrong, and the parsers of request parts that more than one
// body shares. Internal to this library.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/openai_request.h"
#include "protocol/sampling_json.h"

namespace spate::api {

// Parses a request body into a JSON object: a 400 for invalid UTF-8 (with the
// offset), an empty body, malformed JSON, nesting deeper than the bound, or a
// value that is not an object.
std::optional<api_error> parse_body_object(std::string_view body, boost::json::object& out);

inline api_error bad(std::string param, std::string message) {
  api_error e;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

// "'param' must be WANT, got <what was given>".
inline api_error type_error(std::string_view param, std::string_view want, const boost::json::value& got) {
  return bad(std::string(param), "'" + std::string(param) + "' must be " + std::string(want) + ", got " + describe_json(got));
}

// Joins the text parts of a content list; text_types are the accepted part
// types (each carries its text in "text"). Media parts are "not supported".
std::optional<api_error> join_text_parts(const boost::json::array& parts, std::string_view param,
                                         std::initializer_list<std::string_view> text_types, std::string& out);

// Validates chat messages (v: the field's value, null when absent) into the
// template shape (see parsed_request::messages).
std::optional<api_error> parse_messages(const boost::json::value* v, std::string_view param, boost::json::array& out);

// Bounds of chat_template_kwargs: keys, nesting below the object, and its
// size as compact JSON.
inline constexpr size_t k_max_template_kwargs = 64;
inline constexpr size_t k_max_template_kwargs_depth = 8;
inline constexpr size_t k_max_template_kwargs_bytes = 64u << 10;

// Checks chat_template_kwargs (already known to be an object): the bounds
// above, no key that redefines messages / add_generation_prompt /
// continue_final_message, and the types of the variables the server itself
// reads (enable_thinking: a boolean).
std::optional<api_error> check_template_kwargs(const boost::json::object& kw);

// Chat's reasoning fields (vLLM's): include_reasoning (a boolean),
// thinking_token_budget (an integer >= 0) and reasoning_effort (see
// parse_reasoning_effort).
std::optional<api_error> parse_reasoning_fields(const field_getter& get, parsed_request& out);

// A reasoning effort (chat's reasoning_effort, the Responses API's
// reasoning.effort; param names it): null, or "low", "medium" or "high",
// which goes to out.reasoning_effort and to the template as the variable
// reasoning_effort (unless chat_template_kwargs set that variable).
std::optional<api_error> parse_reasoning_effort(const boost::json::value& v, const std::string& param, parsed_request& out);

// The Responses API's reasoning object (v: null when absent): effort as
// above; summary and generate_summary ("auto", "concise", "detailed")
// accepted and ignored, as no summaries are written.
std::optional<api_error> parse_responses_reasoning(const boost::json::value* v, parsed_request& out);

}  // namespace spate::api
