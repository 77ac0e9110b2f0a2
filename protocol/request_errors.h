// The 400s of request parsing: an api_error naming the field (param) and
// saying what is wrong. Shared by the request parsers of this library.
#pragma once

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

}  // namespace spate::api
