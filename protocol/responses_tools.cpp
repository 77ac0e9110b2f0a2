#include "protocol/responses_tools.h"

#include "protocol/request_errors.h"

namespace spate::api {
namespace {

namespace json = boost::json;
using error_opt = std::optional<api_error>;

// A required string member of item.
error_opt required_string(const json::object& o, const char* key, const std::string& ip, std::string& out) {
  const json::value* v = o.if_contains(key);
  const std::string p = ip + "." + key;
  if (!v || v->is_null()) return bad(p, "'" + p + "' is required");
  if (!v->is_string()) return type_error(p, "a string", *v);
  out = std::string(v->get_string());
  return std::nullopt;
}

}  // namespace

std::optional<api_error> convert_responses_tools(const json::value& tools, json::array& out) {
  if (!tools.is_array()) return type_error("tools", "a list of tools", tools);
  const json::array& a = tools.get_array();
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string tp = "tools[" + std::to_string(i) + "]";
    if (!a[i].is_object()) return type_error(tp, "a tool object", a[i]);
    const json::object& t = a[i].get_object();
    std::string type;
    if (auto e = required_string(t, "type", tp, type)) return e;
    if (type != "function") {
      return bad(tp + ".type", "tool type '" + type + "' is not supported; only \"function\" tools are");
    }
    json::object fn;
    std::string name;
    if (auto e = required_string(t, "name", tp, name)) return e;
    if (name.empty()) return bad(tp + ".name", "'" + tp + ".name' must not be empty");
    fn["name"] = name;
    if (const json::value* d = t.if_contains("description"); d && !d->is_null()) {
      if (!d->is_string()) return type_error(tp + ".description", "a string", *d);
      fn["description"] = *d;
    }
    if (const json::value* ps = t.if_contains("parameters"); ps && !ps->is_null()) {
      if (!ps->is_object()) return type_error(tp + ".parameters", "an object (a JSON schema)", *ps);
      fn["parameters"] = *ps;
    }
    out.push_back(json::object{{"type", "function"}, {"function", std::move(fn)}});
  }
  return std::nullopt;
}

std::optional<api_error> convert_function_call_item(const json::object& item, const std::string& ip, json::array& messages) {
  std::string call_id;
  if (auto e = required_string(item, "call_id", ip, call_id)) return e;
  if (item.at("type").get_string() == "function_call_output") {
    const json::value* out = item.if_contains("output");
    if (!out || out->is_null()) return bad(ip + ".output", "'" + ip + ".output' is required");
    if (!out->is_string()) return type_error(ip + ".output", "a string", *out);
    messages.push_back(json::object{{"role", "tool"}, {"tool_call_id", call_id}, {"content", out->get_string()}});
    return std::nullopt;
  }
  std::string name, arguments;
  if (auto e = required_string(item, "name", ip, name)) return e;
  if (auto e = required_string(item, "arguments", ip, arguments)) return e;
  boost::system::error_code ec;
  json::value args = json::parse(arguments, ec);
  if (ec || !args.is_object()) return bad(ip + ".arguments", "'" + ip + ".arguments' must be a JSON object in a string");
  json::object call{{"id", call_id}, {"type", "function"}, {"function", json::object{{"name", name}, {"arguments", std::move(args)}}}};
  if (json::object* turn = open_reasoning_turn(messages)) {
    (*turn)["tool_calls"] = json::array{std::move(call)};
    return std::nullopt;
  }
  // Consecutive calls belong to one assistant turn.
  if (!messages.empty()) {
    json::object& last = messages.back().as_object();
    if (last.at("role") == "assistant" && last.contains("tool_calls")) {
      last.at("tool_calls").as_array().push_back(std::move(call));
      return std::nullopt;
    }
  }
  messages.push_back(json::object{{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array{std::move(call)}}});
  return std::nullopt;
}

std::optional<api_error> convert_reasoning_item(const json::object& item, const std::string& ip, json::array& messages) {
  if (const json::value* enc = item.if_contains("encrypted_content"); enc && !enc->is_null()) {
    return bad(ip + ".encrypted_content", "'" + ip + ".encrypted_content' is not supported: this server does not encrypt "
                                          "reasoning; send its text in content");
  }
  std::string text;
  const json::value* content = item.if_contains("content");
  const json::value* summary = item.if_contains("summary");
  if (content && !content->is_null()) {
    if (!content->is_array()) return type_error(ip + ".content", "a list of reasoning_text parts", *content);
    if (auto e = join_text_parts(content->get_array(), ip + ".content", {"reasoning_text"}, text)) return e;
  } else if (summary && !summary->is_null()) {
    if (!summary->is_array()) return type_error(ip + ".summary", "a list of summary_text parts", *summary);
    if (auto e = join_text_parts(summary->get_array(), ip + ".summary", {"summary_text"}, text)) return e;
  } else {
    return bad(ip + ".content", "'" + ip + ".content' (or '" + ip + ".summary') is required");
  }
  // Several reasoning items in a row are one turn's reasoning.
  if (json::object* turn = open_reasoning_turn(messages)) {
    json::string& r = turn->at("reasoning_content").as_string();
    r.append(text);
    return std::nullopt;
  }
  messages.push_back(json::object{{"role", "assistant"}, {"content", ""}, {"reasoning_content", text}});
  return std::nullopt;
}

json::object* open_reasoning_turn(json::array& messages) {
  if (messages.empty()) return nullptr;
  json::object& last = messages.back().as_object();
  const json::value* content = last.if_contains("content");
  const bool open = last.at("role") == "assistant" && last.contains("reasoning_content") && !last.contains("tool_calls") &&
                    content && content->is_string() && content->get_string().empty();
  return open ? &last : nullptr;
}

}  // namespace spate::api
