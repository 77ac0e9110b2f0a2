#include "protocol/output_constraint.h"

#include "protocol/openai_request.h"
#include "protocol/request_errors.h"
#include "protocol/sampling_json.h"

namespace spate::api {
namespace {

namespace json = boost::json;
using error_opt = std::optional<api_error>;
using kind = output_constraint::kind;


// Records the constraint; a second one in the same request is an error.
error_opt set(output_constraint& out, kind k, std::string param) {
  if (!out.none()) {
    return bad(param, "'" + param + "' and '" + out.param + "' both constrain the output; give only one");
  }
  out.type = k;
  out.param = std::move(param);
  return std::nullopt;
}

// A schema given as an object (or boolean), or as a string holding JSON (vLLM accepts both).
error_opt read_schema(const json::value& v, const std::string& param, output_constraint& out) {
  if (v.is_string()) {
    boost::system::error_code ec;
    json::value parsed = json::parse(v.get_string(), ec);
    if (ec) return bad(param, "'" + param + "' is not valid JSON: " + ec.message());
    return read_schema(parsed, param, out);
  }
  if (!v.is_object() && !v.is_bool()) return type_error(param, "a JSON schema (an object)", v);
  if (auto e = set(out, kind::json_schema, param)) return e;
  out.schema = v;
  return std::nullopt;
}

error_opt read_string(const json::value& v, const std::string& param, kind k, output_constraint& out) {
  if (!v.is_string()) return type_error(param, "a string", v);
  if (auto e = set(out, k, param)) return e;
  out.text = std::string(v.get_string());
  return std::nullopt;
}

error_opt read_choices(const json::value& v, const std::string& param, output_constraint& out) {
  if (!v.is_array() || v.get_array().empty()) return type_error(param, "a non-empty list of strings", v);
  std::vector<std::string> choices;
  for (size_t i = 0; i < v.get_array().size(); ++i) {
    const json::value& c = v.get_array()[i];
    const std::string cp = param + "[" + std::to_string(i) + "]";
    if (!c.is_string()) return type_error(cp, "a string", c);
    if (c.get_string().empty()) return bad(cp, "'" + cp + "' must not be empty");
    choices.emplace_back(c.get_string());
  }
  if (auto e = set(out, kind::choice, param)) return e;
  out.choices = std::move(choices);
  return std::nullopt;
}

// OpenAI's {"name", "schema", "strict", "description"}: response_format.json_schema, and text.format itself.
error_opt read_named_schema(const json::object& o, const std::string& param, output_constraint& out) {
  const json::value* schema = o.if_contains("schema");
  if (const json::value* name = o.if_contains("name"); name && !name->is_null() && !name->is_string()) {
    return type_error(param + ".name", "a string", *name);
  }
  if (const json::value* strict = o.if_contains("strict"); strict && !strict->is_null() && !strict->is_bool()) {
    return type_error(param + ".strict", "a boolean", *strict);
  }
  // No schema: any JSON object, as OpenAI's json_schema without a schema would be meaningless.
  if (!schema || schema->is_null()) return bad(param + ".schema", "'" + param + ".schema' is required");
  return read_schema(*schema, param + ".schema", out);
}

error_opt read_response_format(const json::value& rf, output_constraint& out) {
  if (!rf.is_object()) return type_error("response_format", "an object", rf);
  const json::object& o = rf.get_object();
  const json::value* t = o.if_contains("type");
  if (!t || !t->is_string()) return bad("response_format.type", "'response_format.type' must be a string");
  const std::string_view type = t->get_string();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return set(out, kind::json_object, "response_format");
  if (type == "json_schema") {
    const json::value* js = o.if_contains("json_schema");
    if (!js || js->is_null()) return bad("response_format.json_schema", "'response_format.json_schema' is required");
    if (!js->is_object()) return type_error("response_format.json_schema", "an object", *js);
    return read_named_schema(js->get_object(), "response_format.json_schema", out);
  }
  return bad("response_format.type", "unknown response_format type '" + std::string(type) +
                                         "'; expected \"text\", \"json_object\" or \"json_schema\"");
}

// vLLM's structured_outputs object: exactly one of its constraint keys.
error_opt read_structured_outputs(const json::value& so, output_constraint& out) {
  if (!so.is_object()) return type_error("structured_outputs", "an object", so);
  for (const auto& kv : so.get_object()) {
    const std::string k(kv.key());
    const std::string p = "structured_outputs." + k;
    const json::value& v = kv.value();
    if (v.is_null()) continue;
    error_opt e;
    if (k == "json") {
      e = read_schema(v, p, out);
    } else if (k == "regex") {
      e = read_string(v, p, kind::regex, out);
    } else if (k == "choice") {
      e = read_choices(v, p, out);
    } else if (k == "grammar") {
      e = read_string(v, p, kind::grammar, out);
    } else if (k == "json_object") {
      if (!v.is_bool()) return type_error(p, "a boolean", v);
      if (v.get_bool()) e = set(out, kind::json_object, p);
    } else {
      e = bad(p, "'" + p + "' is not supported; use one of json, regex, choice, grammar, json_object");
    }
    if (e) return e;
  }
  return std::nullopt;
}

}  // namespace

std::optional<api_error> parse_output_constraint(const field_getter& get, output_constraint& out) {
  if (const json::value* rf = get("response_format")) {
    if (auto e = read_response_format(*rf, out)) return e;
  }
  if (const json::value* so = get("structured_outputs")) {
    if (auto e = read_structured_outputs(*so, out)) return e;
  }
  if (const json::value* v = get("guided_json")) {
    if (auto e = read_schema(*v, "guided_json", out)) return e;
  }
  if (const json::value* v = get("json_schema")) {
    if (auto e = read_schema(*v, "json_schema", out)) return e;
  }
  if (const json::value* v = get("guided_regex")) {
    if (auto e = read_string(*v, "guided_regex", kind::regex, out)) return e;
  }
  if (const json::value* v = get("guided_choice")) {
    if (auto e = read_choices(*v, "guided_choice", out)) return e;
  }
  for (const char* key : {"guided_grammar", "grammar"}) {
    if (const json::value* v = get(key)) {
      if (auto e = read_string(*v, key, kind::grammar, out)) return e;
    }
  }
  // The backend choice is ours to make; any value is accepted (docs/api.md: ignored fields).
  if (const json::value* v = get("guided_decoding_backend"); v && !v->is_string()) {
    return type_error("guided_decoding_backend", "a string", *v);
  }
  if (get("guided_whitespace_pattern")) {
    return bad("guided_whitespace_pattern", "'guided_whitespace_pattern' is not supported");
  }
  return std::nullopt;
}

std::optional<api_error> parse_text_format(const json::object& format, output_constraint& out) {
  const json::value* t = format.if_contains("type");
  if (!t || !t->is_string()) return bad("text.format.type", "'text.format.type' must be a string");
  const std::string_view type = t->get_string();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return set(out, kind::json_object, "text.format");
  if (type == "json_schema") return read_named_schema(format, "text.format", out);
  return bad("text.format.type", "unknown text.format type '" + std::string(type) +
                                     "'; expected \"text\", \"json_object\" or \"json_schema\"");
}

}  // namespace spate::api
