// The tojson filter as Hugging Face transformers defines it for chat templates:
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys),
// byte for byte (Python's separators, float repr, string escaping, indentation).
#pragma once

#include <optional>
#include <string>

#include "jinja/jinja_value.h"

namespace spate::jinja {

struct json_options {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: single line
  std::string item_sep = ", ";        // json.dumps defaults (", " / "," with indent)
  std::string key_sep = ": ";
  bool sort_keys = false;
};

// Throws runtime_error "Object of type X is not JSON serializable" like Python.
std::string to_json(render_context& ctx, const value& v, const json_options& opts);

}  // namespace spate::jinja
