// Chat request parts (request_errors.h): messages, content parts,
// chat_template_kwargs and the reasoning fields (the reasoning effort of the
// Responses API too).
#include "protocol/request_errors.h"

#include <algorithm>
#include <array>
#include <limits>

namespace spate::api {
namespace {

namespace json = boost::json;
using error_opt = std::optional<api_error>;

std::string at(std::string_view base, size_t i) { return std::string(base) + "[" + std::to_string(i) + "]"; }
std::string dot(std::string_view base, std::string_view key) { return std::string(base) + "." + std::string(key); }

// Part types that carry non-text data; rejected with "not supported".
bool is_media_part(std::string_view type) {
  static constexpr std::array<std::string_view, 9> k_media = {
      "image_url", "image", "input_image", "input_audio", "audio_url", "video_url", "file", "input_file", "video"};
  return std::find(k_media.begin(), k_media.end(), type) != k_media.end();
}

error_opt check_tool_calls(const json::value& v, std::string_view param, json::array& out) {
  if (!v.is_array()) return type_error(param, "a list of tool calls", v);
  out = v.get_array();
  for (size_t j = 0; j < out.size(); ++j) {
    const std::string pp = at(param, j);
    if (!out[j].is_object()) return type_error(pp, "an object", out[j]);
    json::object& call = out[j].get_object();
    if (const json::value* t = call.if_contains("type"); t && !t->is_null() && !(t->is_string() && t->get_string() == "function"))
      return bad(dot(pp, "type"), "'" + dot(pp, "type") + "' must be \"function\"");
    if (const json::value* id = call.if_contains("id"); id && !id->is_null() && !id->is_string())
      return type_error(dot(pp, "id"), "a string", *id);
    json::value* fn = call.if_contains("function");
    if (!fn || fn->is_null()) return bad(dot(pp, "function"), "'" + dot(pp, "function") + "' is required");
    if (!fn->is_object()) return type_error(dot(pp, "function"), "an object", *fn);
    json::object& f = fn->get_object();
    const std::string fp = dot(pp, "function");
    const json::value* name = f.if_contains("name");
    if (!name || name->is_null()) return bad(dot(fp, "name"), "'" + dot(fp, "name") + "' is required");
    if (!name->is_string()) return type_error(dot(fp, "name"), "a string", *name);
    if (json::value* args = f.if_contains("arguments"); args && !args->is_null()) {
      if (args->is_string()) {
        // Templates index into the arguments; a JSON object in a string becomes that object.
        boost::system::error_code ec;
        json::parse_options opts;
        opts.max_depth = k_max_json_depth;
        json::value parsed = json::parse(args->get_string(), ec, json::storage_ptr(), opts);
        if (!ec && parsed.is_object()) *args = std::move(parsed);
      } else if (!args->is_object()) {
        return type_error(dot(fp, "arguments"), "a string or an object", *args);
      }
    }
  }
  return std::nullopt;
}

// Nesting depth of v: 0 for a scalar, 1 + the deepest member for a container.
size_t json_depth(const json::value& v) {
  size_t d = 0;
  if (const json::object* o = v.if_object()) {
    for (const auto& kv : *o) d = std::max(d, json_depth(kv.value()));
    return d + 1;
  }
  if (const json::array* a = v.if_array()) {
    for (const auto& e : *a) d = std::max(d, json_depth(e));
    return d + 1;
  }
  return 0;
}

}  // namespace

// Joins the text parts of a content list; text_types are the accepted part types
// (each carries its text in "text").
error_opt join_text_parts(const json::array& parts, std::string_view param,
                          std::initializer_list<std::string_view> text_types, std::string& out) {
  out.clear();
  for (size_t j = 0; j < parts.size(); ++j) {
    const std::string pp = at(param, j);
    if (!parts[j].is_object()) return type_error(pp, "a content part object", parts[j]);
    const json::object& part = parts[j].get_object();
    const json::value* t = part.if_contains("type");
    if (!t || t->is_null()) return bad(dot(pp, "type"), "'" + dot(pp, "type") + "' is required");
    if (!t->is_string()) return type_error(dot(pp, "type"), "a string", *t);
    const std::string_view type = t->get_string();
    if (is_media_part(type))
      return bad(dot(pp, "type"), "content part type '" + std::string(type) + "' in " + pp +
                                      " is not supported: this server accepts text only");
    if (std::find(text_types.begin(), text_types.end(), type) == text_types.end()) {
      std::string expected;
      for (auto tt : text_types) expected += (expected.empty() ? "'" : ", '") + std::string(tt) + "'";
      return bad(dot(pp, "type"), "unknown content part type '" + std::string(type) + "' in " + pp + "; expected " + expected);
    }
    const json::value* text = part.if_contains("text");
    if (!text || !text->is_string()) {
      if (!text || text->is_null()) return bad(dot(pp, "text"), "'" + dot(pp, "text") + "' is required");
      return type_error(dot(pp, "text"), "a string", *text);
    }
    if (j > 0) out += '\n';
    out.append(text->get_string().data(), text->get_string().size());
  }
  return std::nullopt;
}

// Validates chat messages into the template shape (see parsed_request::messages).
error_opt parse_messages(const json::value* v, std::string_view param, json::array& out) {
  if (!v) return bad(std::string(param), "'" + std::string(param) + "' is required");
  if (!v->is_array()) return type_error(param, "a list of messages", *v);
  const json::array& in = v->get_array();
  if (in.empty()) return bad(std::string(param), "'" + std::string(param) + "' must contain at least one message");
  out.clear();
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string mp = at(param, i);
    if (!in[i].is_object()) return type_error(mp, "a message object", in[i]);
    const json::object& m = in[i].get_object();
    const json::value* role_v = m.if_contains("role");
    if (!role_v || role_v->is_null()) return bad(dot(mp, "role"), "'" + dot(mp, "role") + "' is required");
    if (!role_v->is_string()) return type_error(dot(mp, "role"), "a string", *role_v);
    std::string role(role_v->get_string());
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool")
      return bad(dot(mp, "role"), "unknown role '" + role + "' in " + mp +
                                      "; expected one of system, developer, user, assistant, tool");
    if (role == "developer") role = "system";

    json::object msg;
    msg["role"] = role;
    json::array tool_calls;
    bool has_tool_calls = false;
    if (const json::value* tc = m.if_contains("tool_calls"); tc && !tc->is_null()) {
      if (role != "assistant")
        return bad(dot(mp, "tool_calls"), "'" + dot(mp, "tool_calls") + "' is only allowed in assistant messages");
      if (auto e = check_tool_calls(*tc, dot(mp, "tool_calls"), tool_calls)) return e;
      has_tool_calls = !tool_calls.empty();
    }
    const json::value* content = m.if_contains("content");
    if (!content || content->is_null()) {
      if (!has_tool_calls)
        return bad(dot(mp, "content"), "'" + dot(mp, "content") +
                                           "' is required (it may be null only in an assistant message with tool_calls)");
      msg["content"] = "";
    } else if (content->is_string()) {
      msg["content"] = content->get_string();
    } else if (content->is_array()) {
      std::string text;
      if (auto e = join_text_parts(content->get_array(), dot(mp, "content"), {"text"}, text)) return e;
      msg["content"] = std::move(text);
    } else {
      return type_error(dot(mp, "content"), "a string or a list of content parts", *content);
    }
    for (std::string_view key : {"name", "tool_call_id"}) {
      const json::value* s = m.if_contains(key);
      if (s && !s->is_null() && !s->is_string()) return type_error(dot(mp, key), "a string", *s);
    }
    for (const auto& kv : m) {
      const std::string_view k = kv.key();
      if (k == "role" || k == "content" || k == "tool_calls") continue;
      msg[k] = kv.value();
    }
    // vLLM clients send earlier reasoning back as "reasoning"; templates read reasoning_content.
    // (Read from the request's message: inserting into msg may move msg's values.)
    if (const json::value* r = m.if_contains("reasoning"); r && r->is_string() && !msg.contains("reasoning_content")) {
      msg["reasoning_content"] = r->get_string();
    }
    if (has_tool_calls) msg["tool_calls"] = std::move(tool_calls);
    out.emplace_back(std::move(msg));
  }
  return std::nullopt;
}

error_opt check_template_kwargs(const json::object& kw) {
  const std::string p = "chat_template_kwargs";
  if (kw.size() > k_max_template_kwargs)
    return bad(p, "'" + p + "' has " + std::to_string(kw.size()) + " keys; at most " + std::to_string(k_max_template_kwargs) +
                      " are allowed");
  for (const auto& kv : kw) {
    const std::string_view k = kv.key();
    if (k == "messages" || k == "add_generation_prompt" || k == "continue_final_message")
      return bad(dot(p, k), "'" + p + "' may not set '" + std::string(k) + "'; use the top-level field");
    if (json_depth(kv.value()) > k_max_template_kwargs_depth)
      return bad(dot(p, k), "'" + dot(p, k) + "' is nested deeper than " + std::to_string(k_max_template_kwargs_depth) + " levels");
    // The reasoning parsers read enable_thinking (reasoning.h): a string "false" would
    // render as true in the template and be ambiguous to them.
    if (k == "enable_thinking" && !kv.value().is_bool() && !kv.value().is_null())
      return type_error(dot(p, k), "a boolean", kv.value());
  }
  if (const size_t n = json::serialize(kw).size(); n > k_max_template_kwargs_bytes)
    return bad(p, "'" + p + "' is " + std::to_string(n) + " bytes of JSON; at most " + std::to_string(k_max_template_kwargs_bytes) +
                      " are allowed");
  return std::nullopt;
}

error_opt parse_reasoning_fields(const field_getter& get, parsed_request& out) {
  if (const json::value* v = get("include_reasoning")) {
    if (!v->is_bool()) return type_error("include_reasoning", "a boolean", *v);
    out.include_reasoning = v->get_bool();
  }
  if (const json::value* v = get("thinking_token_budget")) {
    int64_t n = 0;
    const auto st = json_get_int(*v, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), n);
    if (st == json_int_status::not_integer) return type_error("thinking_token_budget", "an integer", *v);
    if (st != json_int_status::ok || n < 0 || n > std::numeric_limits<int32_t>::max())
      return bad("thinking_token_budget", "thinking_token_budget must be in [0, 2147483647], got " + describe_json(*v));
    out.thinking_token_budget = static_cast<int32_t>(n);
  }
  if (const json::value* v = get("reasoning_effort")) return parse_reasoning_effort(*v, "reasoning_effort", out);
  return std::nullopt;
}

error_opt parse_reasoning_effort(const json::value& v, const std::string& param, parsed_request& out) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_string()) return type_error(param, "a string", v);
  const std::string_view effort = v.get_string();
  if (effort != "low" && effort != "medium" && effort != "high")
    return bad(param, "'" + param + "' must be \"low\", \"medium\" or \"high\", got " + describe_json(v));
  out.reasoning_effort = std::string(effort);
  if (!out.template_extra.contains("reasoning_effort")) out.template_extra["reasoning_effort"] = v;
  return std::nullopt;
}

// The Responses API's reasoning object: effort as chat's reasoning_effort;
// summary (and the older generate_summary) accepted and ignored: no
// summaries are written.
error_opt parse_responses_reasoning(const json::value* v, parsed_request& out) {
  if (!v) return std::nullopt;
  if (!v->is_object()) return type_error("reasoning", "an object", *v);
  const json::object& r = v->get_object();
  if (const json::value* effort = r.if_contains("effort")) {
    if (auto e = parse_reasoning_effort(*effort, "reasoning.effort", out)) return e;
  }
  for (const std::string key : {"summary", "generate_summary"}) {
    const json::value* s = r.if_contains(key);
    if (!s || s->is_null()) continue;
    const std::string param = "reasoning." + key;
    if (!s->is_string()) return type_error(param, "a string", *s);
    if (s->get_string() != "auto" && s->get_string() != "concise" && s->get_string() != "detailed")
      return bad(param, "'" + param + "' must be \"auto\", \"concise\" or \"detailed\", got " + describe_json(*s));
  }
  return std::nullopt;
}

}  // namespace spate::api
