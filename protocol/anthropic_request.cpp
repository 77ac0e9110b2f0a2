#include "protocol/anthropic_request.h"

#include <cctype>
#include <set>

namespace spate::api {

namespace json = boost::json;

namespace {

api_error bad(std::string message, std::string param = "") {
  return api_error{400, std::move(message), "invalid_request_error", std::move(param), ""};
}

std::string type_name(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::bool_: return "a boolean";
    case json::kind::string: return "a string";
    case json::kind::array: return "an array";
    case json::kind::object: return "an object";
    default: return "a number";
  }
}

// The object and type of content block b at `at`, or the 400.
std::optional<api_error> block_at(const json::value& b, const std::string& at, const json::object*& o, std::string_view& ty) {
  o = b.if_object();
  const json::value* type = o ? o->if_contains("type") : nullptr;
  if (!type || !type->is_string()) return bad(at + ": a content block needs a string 'type'", at);
  ty = type->as_string();
  return std::nullopt;
}

api_error unsupported_block(const std::string& at, std::string_view ty) {
  return bad(at + ": content block type '" + std::string(ty) + "' is not supported by this server (text, tool_use, tool_result" +
                 " and thinking are)", at + ".type");
}

// Appends a text block's "text" to out, after sep when out is not empty.
std::optional<api_error> append_text_block(const json::object& o, const std::string& at, std::string_view sep, std::string& out) {
  const json::value* s = o.if_contains("text");
  if (!s || !s->is_string()) return bad(at + ".text: must be a string", at + ".text");
  if (!out.empty()) out += sep;
  out += s->as_string();
  return std::nullopt;
}

// The text of a string, or of an array of text blocks (joined by "\n"), at `where`.
std::optional<api_error> text_of(const json::value& v, const std::string& where, std::string& out) {
  out.clear();
  if (v.is_string()) {
    out = std::string(v.as_string());
    return std::nullopt;
  }
  if (!v.is_array()) return bad(where + ": must be a string or an array of text blocks, got " + type_name(v), where);
  size_t i = 0;
  for (const json::value& b : v.as_array()) {
    const std::string at = where + "[" + std::to_string(i++) + "]";
    const json::object* o = nullptr;
    std::string_view ty;
    if (auto err = block_at(b, at, o, ty)) return err;
    if (ty != "text") return bad(at + ": block type '" + std::string(ty) + "' is not supported here (text only)", at);
    if (auto err = append_text_block(*o, at, "\n", out)) return err;
  }
  return std::nullopt;
}

struct translation {
  json::array messages;
  std::set<std::string> tool_use_ids;  // ids of the assistant's tool_use blocks so far
};

// One user message: its tool_result blocks become tool messages, then its text a user message.
std::optional<api_error> user_message(const json::value& content, const std::string& where, translation& t) {
  if (content.is_string()) {
    t.messages.push_back(json::object{{"role", "user"}, {"content", content.as_string()}});
    return std::nullopt;
  }
  if (!content.is_array()) return bad(where + ": must be a string or an array of content blocks, got " + type_name(content), where);
  std::string text;
  size_t i = 0;
  for (const json::value& b : content.as_array()) {
    const std::string at = where + "[" + std::to_string(i++) + "]";
    const json::object* o = nullptr;
    std::string_view ty;
    if (auto err = block_at(b, at, o, ty)) return err;
    if (ty == "text") {
      if (auto err = append_text_block(*o, at, "\n", text)) return err;
    } else if (ty == "tool_result") {
      const json::value* id = o->if_contains("tool_use_id");
      if (!id || !id->is_string() || id->as_string().empty()) return bad(at + ".tool_use_id: must be a non-empty string", at + ".tool_use_id");
      if (!t.tool_use_ids.count(std::string(id->as_string())))
        return bad(at + ".tool_use_id: '" + std::string(id->as_string()) + "' names no tool_use block of an earlier assistant message",
                   at + ".tool_use_id");
      std::string result;
      if (const json::value* c = o->if_contains("content"); c && !c->is_null()) {
        if (auto err = text_of(*c, at + ".content", result)) return err;
      }
      if (const json::value* e = o->if_contains("is_error"); e && e->is_bool() && e->as_bool()) result = "Error: " + result;
      t.messages.push_back(json::object{{"role", "tool"}, {"tool_call_id", id->as_string()}, {"content", result}});
    } else {
      return unsupported_block(at, ty);
    }
  }
  if (!text.empty() || content.as_array().empty()) t.messages.push_back(json::object{{"role", "user"}, {"content", text}});
  return std::nullopt;
}

// One assistant message: text, tool_use (-> tool_calls), thinking (dropped).
std::optional<api_error> assistant_message(const json::value& content, const std::string& where, translation& t) {
  if (content.is_string()) {
    t.messages.push_back(json::object{{"role", "assistant"}, {"content", content.as_string()}});
    return std::nullopt;
  }
  if (!content.is_array()) return bad(where + ": must be a string or an array of content blocks, got " + type_name(content), where);
  std::string text;
  json::array calls;
  size_t i = 0;
  for (const json::value& b : content.as_array()) {
    const std::string at = where + "[" + std::to_string(i++) + "]";
    const json::object* o = nullptr;
    std::string_view ty;
    if (auto err = block_at(b, at, o, ty)) return err;
    if (ty == "text") {
      if (auto err = append_text_block(*o, at, "", text)) return err;
    } else if (ty == "tool_use") {
      const json::value* id = o->if_contains("id");
      const json::value* name = o->if_contains("name");
      const json::value* input = o->if_contains("input");
      if (!id || !id->is_string() || id->as_string().empty()) return bad(at + ".id: must be a non-empty string", at + ".id");
      if (!name || !name->is_string() || name->as_string().empty()) return bad(at + ".name: must be a non-empty string", at + ".name");
      if (!input || !input->is_object()) return bad(at + ".input: must be an object", at + ".input");
      t.tool_use_ids.insert(std::string(id->as_string()));
      calls.push_back(json::object{{"id", id->as_string()}, {"type", "function"},
                                   {"function", json::object{{"name", name->as_string()}, {"arguments", json::serialize(*input)}}}});
    } else if (ty == "thinking" || ty == "redacted_thinking") {
      continue;  // earlier turns' reasoning is not replayed to the model
    } else {
      return unsupported_block(at, ty);
    }
  }
  json::object m{{"role", "assistant"}, {"content", text}};
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  t.messages.push_back(std::move(m));
  return std::nullopt;
}

std::optional<api_error> translate_tools(const json::object& in, json::object& chat) {
  if (const json::value* tools = in.if_contains("tools"); tools && !tools->is_null()) {
    if (!tools->is_array()) return bad("tools: must be an array", "tools");
    json::array out;
    size_t i = 0;
    for (const json::value& v : tools->as_array()) {
      const std::string at = "tools[" + std::to_string(i++) + "]";
      const json::object* o = v.if_object();
      if (!o) return bad(at + ": must be an object", at);
      if (const json::value* ty = o->if_contains("type"); ty && !(ty->is_string() && ty->as_string() == "custom"))
        return bad(at + ": tool type '" + (ty->is_string() ? std::string(ty->as_string()) : type_name(*ty)) +
                       "' (a server tool) is not supported; give custom tools with name and input_schema", at + ".type");
      const json::value* name = o->if_contains("name");
      const json::value* schema = o->if_contains("input_schema");
      if (!name || !name->is_string() || name->as_string().empty()) return bad(at + ".name: must be a non-empty string", at + ".name");
      if (!schema || !schema->is_object()) return bad(at + ".input_schema: must be an object", at + ".input_schema");
      json::object fn{{"name", name->as_string()}, {"parameters", *schema}};
      if (const json::value* d = o->if_contains("description"); d && d->is_string()) fn["description"] = d->as_string();
      out.push_back(json::object{{"type", "function"}, {"function", std::move(fn)}});
    }
    chat["tools"] = std::move(out);
  }
  const json::value* choice = in.if_contains("tool_choice");
  if (!choice || choice->is_null()) return std::nullopt;
  const json::object* o = choice->if_object();
  const json::value* ty = o ? o->if_contains("type") : nullptr;
  if (!ty || !ty->is_string()) return bad("tool_choice: must be an object with a string 'type'", "tool_choice");
  const std::string_view t = ty->as_string();
  if (t == "auto") {
    chat["tool_choice"] = "auto";
  } else if (t == "any") {
    chat["tool_choice"] = "required";
  } else if (t == "none") {
    chat["tool_choice"] = "none";
  } else if (t == "tool") {
    const json::value* name = o->if_contains("name");
    if (!name || !name->is_string()) return bad("tool_choice.name: must be a string for type 'tool'", "tool_choice.name");
    chat["tool_choice"] = json::object{{"type", "function"}, {"function", json::object{{"name", name->as_string()}}}};
  } else {
    return bad("tool_choice.type: must be auto, any, tool or none, got '" + std::string(t) + "'", "tool_choice.type");
  }
  if (const json::value* d = o->if_contains("disable_parallel_tool_use"); d && d->is_bool() && d->as_bool())
    chat["parallel_tool_calls"] = false;
  return std::nullopt;
}

std::optional<api_error> translate_thinking(const json::value& v, json::object& chat) {
  const json::object* o = v.if_object();
  const json::value* ty = o ? o->if_contains("type") : nullptr;
  if (!ty || !ty->is_string()) return bad("thinking: must be an object with a string 'type'", "thinking");
  if (ty->as_string() == "disabled") {
    chat["chat_template_kwargs"] = json::object{{"enable_thinking", false}};
    return std::nullopt;
  }
  if (ty->as_string() != "enabled") return bad("thinking.type: must be enabled or disabled", "thinking.type");
  chat["chat_template_kwargs"] = json::object{{"enable_thinking", true}};
  if (const json::value* b = o->if_contains("budget_tokens"); b && !b->is_null()) chat["thinking_token_budget"] = *b;
  return std::nullopt;
}

// An error of the translated chat request names the client's field instead
// of the chat field it became: in param (the field or a prefix of it) and in
// the message (quoted 'name', name[ or name. after a non-name character, or
// the name opening the message).
void rename_field(api_error& e, std::string_view chat, std::string_view client) {
  const bool in_param = e.param == chat || (e.param.size() > chat.size() && e.param.starts_with(chat) &&
                                            (e.param[chat.size()] == '[' || e.param[chat.size()] == '.'));
  if (!in_param) return;
  e.param = std::string(client) + e.param.substr(chat.size());
  auto name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  std::string_view m = e.message;
  for (size_t i = 0; i < m.size();) {
    const bool starts = m.substr(i).starts_with(chat) && (i == 0 || !name_char(m[i - 1]));
    const char next = i + chat.size() < m.size() ? m[i + chat.size()] : '\0';
    const bool quoted = starts && i > 0 && m[i - 1] == '\'' && next == '\'';
    const bool indexed = starts && (next == '[' || next == '.');
    const bool opening = starts && i == 0 && next == ' ';
    if (quoted || indexed || opening) {
      out += client;
      i += chat.size();
    } else {
      out += m[i++];
    }
  }
  e.message = std::move(out);
}

// The chat fields the translation writes, by the Anthropic field they came from.
void name_client_fields(api_error& e) {
  rename_field(e, "thinking_token_budget", "thinking.budget_tokens");
  rename_field(e, "chat_template_kwargs", "thinking");
  rename_field(e, "stop", "stop_sequences");
  rename_field(e, "parallel_tool_calls", "tool_choice.disable_parallel_tool_use");
}

// The top-level fields handled here; others are passed through (sampling) or listed as unknown.
const std::set<std::string, std::less<>>& known_fields() {
  static const std::set<std::string, std::less<>> k = {"model", "messages", "system", "max_tokens", "stop_sequences", "temperature",
                                                       "top_p", "top_k", "stream", "tools", "tool_choice", "metadata", "thinking"};
  return k;
}

}  // namespace

std::optional<api_error> parse_messages_request(std::string_view body, parsed_request& out, bool count_only) {
  boost::system::error_code ec;
  json::parse_options po;
  po.max_depth = k_max_json_depth;
  const json::value v = json::parse(body, ec, {}, po);
  if (ec) return bad("malformed JSON: " + ec.message());
  if (!v.is_object()) return bad("the body must be a JSON object");
  const json::object& in = v.as_object();
  json::object chat;
  if (const json::value* m = in.if_contains("model"); m && !m->is_null()) {
    if (!m->is_string()) return bad("model: must be a string", "model");
    chat["model"] = *m;
  }
  const json::value* max_tokens = in.if_contains("max_tokens");
  if (!count_only) {
    if (!max_tokens || max_tokens->is_null()) return bad("max_tokens: Field required", "max_tokens");
    chat["max_tokens"] = *max_tokens;
  }
  translation t;
  if (const json::value* sys = in.if_contains("system"); sys && !sys->is_null()) {
    std::string text;
    if (auto err = text_of(*sys, "system", text)) return err;
    t.messages.push_back(json::object{{"role", "system"}, {"content", text}});
  }
  const json::value* msgs = in.if_contains("messages");
  if (!msgs || !msgs->is_array()) return bad("messages: Field required (an array of messages)", "messages");
  if (msgs->as_array().empty()) return bad("messages: at least one message is required", "messages");
  size_t i = 0;
  for (const json::value& m : msgs->as_array()) {
    const std::string at = "messages[" + std::to_string(i++) + "]";
    const json::object* o = m.if_object();
    const json::value* role = o ? o->if_contains("role") : nullptr;
    const json::value* content = o ? o->if_contains("content") : nullptr;
    if (!role || !role->is_string()) return bad(at + ".role: must be 'user' or 'assistant'", at + ".role");
    if (!content) return bad(at + ".content: Field required", at + ".content");
    std::optional<api_error> err;
    if (role->as_string() == "user") {
      err = user_message(*content, at + ".content", t);
    } else if (role->as_string() == "assistant") {
      err = assistant_message(*content, at + ".content", t);
    } else {
      return bad(at + ".role: must be 'user' or 'assistant', got '" + std::string(role->as_string()) + "'", at + ".role");
    }
    if (err) return err;
  }
  chat["messages"] = std::move(t.messages);
  if (const json::value* s = in.if_contains("stop_sequences"); s && !s->is_null()) {
    if (!s->is_array()) return bad("stop_sequences: must be an array of strings, got " + type_name(*s), "stop_sequences");
    chat["stop"] = *s;
  }
  for (const char* k : {"temperature", "top_p", "top_k"}) {
    if (const json::value* f = in.if_contains(k); f && !f->is_null()) chat[k] = *f;
  }
  if (const json::value* s = in.if_contains("stream"); s && !s->is_null()) {
    if (count_only) return bad("stream: count_tokens does not stream", "stream");
    chat["stream"] = *s;
  }
  if (auto err = translate_tools(in, chat)) return err;
  if (const json::value* th = in.if_contains("thinking"); th && !th->is_null()) {
    if (auto err = translate_thinking(*th, chat)) return err;
  }
  if (const json::value* md = in.if_contains("metadata"); md && !md->is_null() && !md->is_object())
    return bad("metadata: must be an object", "metadata");
  if (count_only) chat["max_tokens"] = 1;
  if (auto err = parse_request(endpoint::chat_completions, json::serialize(chat), out)) {
    name_client_fields(*err);
    return err;
  }
  out.kind = endpoint::messages;
  out.thinking_budget_field = "thinking.budget_tokens";
  out.unknown_fields.clear();
  for (const auto& kv : in)
    if (!known_fields().count(kv.key())) out.unknown_fields.emplace_back(kv.key());
  return std::nullopt;
}

const char* anthropic_error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

std::string anthropic_error_body(int status, std::string_view message) {
  json::object e{{"type", anthropic_error_type(status)}, {"message", message}};
  return json::serialize(json::object{{"type", "error"}, {"error", std::move(e)}});
}

}  // namespace spate::api
