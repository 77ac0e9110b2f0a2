#include "protocol/openai_request.h"

#include <algorithm>
#include <array>
#include <limits>
#include <set>

#include "protocol/request_errors.h"
#include "protocol/request_fields.h"
#include "protocol/responses_tools.h"
#include "protocol/sampling_json.h"

namespace spate::api {
namespace {

namespace json = boost::json;
using error_opt = std::optional<api_error>;

constexpr int64_t k_i32_max = std::numeric_limits<int32_t>::max();


std::string at(std::string_view base, size_t i) { return std::string(base) + "[" + std::to_string(i) + "]"; }
std::string dot(std::string_view base, std::string_view key) { return std::string(base) + "." + std::string(key); }

// Offset of the first byte that does not belong to a well-formed UTF-8
// sequence (no overlongs, surrogates or code points above U+10FFFF), or npos.
size_t first_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) { ++i; continue; }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
    else if (c == 0xED) { len = 3; hi = 0x9F; }
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }
    if (len == 0 || i + len > n) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace

// Parses the body into a JSON object (request_errors.h).
error_opt parse_body_object(std::string_view body, json::object& out) {
  if (const size_t bad_at = first_invalid_utf8(body); bad_at != std::string_view::npos)
    return bad("", "request body is not valid UTF-8 (first invalid byte at offset " + std::to_string(bad_at) + ")");
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return bad("", "request body is empty; expected a JSON object");
  json::parse_options opts;
  opts.max_depth = k_max_json_depth;
  json::parser p(json::storage_ptr(), opts);
  boost::system::error_code ec;
  const size_t n = p.write(body.data(), body.size(), ec);
  if (ec == json::error::too_deep)
    return bad("", "malformed JSON: nested deeper than " + std::to_string(k_max_json_depth) + " levels at offset " +
                       std::to_string(n));
  if (ec) return bad("", "malformed JSON: " + ec.message() + " at offset " + std::to_string(n));
  json::value v = p.release();
  if (!v.is_object()) return bad("", "request body must be a JSON object, got " + describe_json(v));
  out = std::move(v.get_object());
  return std::nullopt;
}

namespace {

error_opt parse_object(std::string_view body, json::object& out) { return parse_body_object(body, out); }

// Typed access to the top-level fields of a body; remembers which keys were
// looked at so the rest can be reported as unknown. Absent and null are alike.
class fields {
 public:
  explicit fields(const json::object& o) : o_(o) {}

  const json::value* get(std::string_view key) {
    seen_.insert(std::string(key));
    const json::value* v = o_.if_contains(key);
    return v && !v->is_null() ? v : nullptr;
  }
  bool has(std::string_view key) const {
    const json::value* v = o_.if_contains(key);
    return v && !v->is_null();
  }
  void mark(std::string_view key) { seen_.insert(std::string(key)); }

  error_opt boolean(std::string_view key, bool& out) {
    if (const json::value* v = get(key)) {
      if (!v->is_bool()) return type_error(key, "a boolean", *v);
      out = v->get_bool();
    }
    return std::nullopt;
  }
  error_opt string(std::string_view key, std::string& out) {
    if (const json::value* v = get(key)) {
      if (!v->is_string()) return type_error(key, "a string", *v);
      out = std::string(v->get_string());
    }
    return std::nullopt;
  }
  error_opt integer(std::string_view key, int32_t& out) {
    if (const json::value* v = get(key)) {
      int64_t i = 0;
      switch (json_get_int(*v, std::numeric_limits<int32_t>::min(), k_i32_max, i)) {
        case json_int_status::ok: out = static_cast<int32_t>(i); break;
        case json_int_status::out_of_range:
          return bad(std::string(key), "'" + std::string(key) + "' must be a 32-bit integer, got " + describe_json(*v));
        case json_int_status::not_integer: return type_error(key, "an integer", *v);
      }
    }
    return std::nullopt;
  }

  std::vector<std::string> unknown() const {
    std::vector<std::string> out;
    for (const auto& kv : o_)
      if (!seen_.count(std::string(kv.key()))) out.emplace_back(kv.key());
    return out;
  }

 private:
  const json::object& o_;
  std::set<std::string> seen_;
};

// tool_choice (chat's {"type":"function","function":{"name"}} or the
// Responses API's {"type":"function","name"}) against the validated tools.
error_opt parse_tool_choice(const json::value* tc, const json::value* tools, tool_request& out) {
  using choice = tool_request::choice;
  const bool have_tools = tools && !tools->get_array().empty();
  if (tools) out.tools = tools->get_array();
  out.mode = have_tools ? choice::automatic : choice::none;
  if (!tc) return std::nullopt;
  if (tc->is_object()) {
    const json::object& o = tc->get_object();
    const json::value* fn = o.if_contains("function");
    const json::value* name = fn && fn->is_object() ? fn->get_object().if_contains("name") : o.if_contains("name");
    if (!name || !name->is_string()) return bad("tool_choice", "a named 'tool_choice' must give the function's name");
    out.name = std::string(name->get_string());
    const auto& ts = out.tools;
    const bool known = std::any_of(ts.begin(), ts.end(), [&](const json::value& t) {
      return t.at("function").at("name").get_string() == out.name;
    });
    if (!known) return bad("tool_choice", "tool_choice names '" + out.name + "', which is not one of 'tools'");
    out.mode = choice::named;
    return std::nullopt;
  }
  if (!tc->is_string()) return type_error("tool_choice", "a string or an object", *tc);
  const std::string_view v = tc->get_string();
  if (v == "none") {
    out.mode = choice::none;
  } else if (v == "auto" || v == "required") {
    if (!have_tools) return bad("tool_choice", "tool_choice \"" + std::string(v) + "\" requires 'tools'");
    out.mode = v == "auto" ? choice::automatic : choice::required;
  } else {
    return bad("tool_choice", "unknown tool_choice '" + std::string(v) + "'; expected \"none\", \"auto\", \"required\" or a named function");
  }
  return std::nullopt;
}

// Chat template inputs shared by chat completions and tokenize: tools,
// tool_choice, documents, chat_template_kwargs, add_generation_prompt and
// continue_final_message. messages must already be parsed.
error_opt parse_template_inputs(fields& f, const json::array& messages, json::object& extra, bool& add_generation_prompt,
                                bool& continue_final_message, tool_request& tool_use) {
  const json::value* tools = f.get("tools");
  if (tools) {
    if (!tools->is_array()) return type_error("tools", "a list of tools", *tools);
    const json::array& a = tools->get_array();
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string tp = at("tools", i);
      if (!a[i].is_object()) return type_error(tp, "a tool object", a[i]);
      const json::object& t = a[i].get_object();
      if (const json::value* ty = t.if_contains("type"); ty && !ty->is_null() && !(ty->is_string() && ty->get_string() == "function"))
        return bad(dot(tp, "type"), "'" + dot(tp, "type") + "' must be \"function\" (the only tool type supported)");
      const json::value* fn = t.if_contains("function");
      if (!fn || fn->is_null()) return bad(dot(tp, "function"), "'" + dot(tp, "function") + "' is required");
      if (!fn->is_object()) return type_error(dot(tp, "function"), "an object", *fn);
      const std::string fp = dot(tp, "function");
      const json::value* name = fn->get_object().if_contains("name");
      if (!name || name->is_null()) return bad(dot(fp, "name"), "'" + dot(fp, "name") + "' is required");
      if (!name->is_string() || name->get_string().empty()) return type_error(dot(fp, "name"), "a non-empty string", *name);
      if (const json::value* ps = fn->get_object().if_contains("parameters"); ps && !ps->is_null() && !ps->is_object())
        return type_error(dot(fp, "parameters"), "an object (a JSON schema)", *ps);
    }
  }
  if (auto e = parse_tool_choice(f.get("tool_choice"), tools, tool_use)) return e;
  if (auto e = f.boolean("parallel_tool_calls", tool_use.parallel)) return e;
  if (tools && tool_use.mode != tool_request::choice::none) extra["tools"] = *tools;

  if (const json::value* docs = f.get("documents")) {
    if (!docs->is_array()) return type_error("documents", "a list of objects", *docs);
    for (size_t i = 0; i < docs->get_array().size(); ++i)
      if (!docs->get_array()[i].is_object()) return type_error(at("documents", i), "an object", docs->get_array()[i]);
    extra["documents"] = *docs;
  }
  if (const json::value* kw = f.get("chat_template_kwargs")) {
    if (!kw->is_object()) return type_error("chat_template_kwargs", "an object", *kw);
    if (auto e = check_template_kwargs(kw->get_object())) return e;
    for (const auto& kv : kw->get_object()) extra[kv.key()] = kv.value();
  }

  const bool explicit_agp = f.has("add_generation_prompt");
  if (auto e = f.boolean("add_generation_prompt", add_generation_prompt)) return e;
  if (auto e = f.boolean("continue_final_message", continue_final_message)) return e;
  if (continue_final_message) {
    if (explicit_agp && add_generation_prompt)
      return bad("continue_final_message", "cannot set both 'continue_final_message' and 'add_generation_prompt' to true");
    if (messages.empty() || messages.back().get_object().at("role").get_string() != "assistant")
      return bad("continue_final_message", "'continue_final_message' requires the last message to be an assistant message");
    add_generation_prompt = false;
  }
  return std::nullopt;
}

// Completions' prompt: a string, token ids, or a list of strings or of
// token-id lists (several prompts: the first goes to prompt_text/prompt_ids,
// the rest to more_prompts).
error_opt parse_prompt(const json::value* v, parsed_request& out) {
  if (!v) return bad("prompt", "'prompt' is required");
  using item = parsed_request::prompt_item;
  const auto read_ids = [&](const json::array& a, const std::string& param, item& dst) -> error_opt {
    std::vector<int32_t> ids;
    ids.reserve(a.size());
    for (size_t j = 0; j < a.size(); ++j) {
      int64_t id = 0;
      const auto st = json_get_int(a[j], std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), id);
      if (st == json_int_status::not_integer) return type_error(at(param, j), "a token id (an integer)", a[j]);
      if (st != json_int_status::ok || id < 0 || id > k_i32_max)
        return bad(at(param, j), at(param, j) + " must be a token id in [0, 2147483647], got " + describe_json(a[j]));
      ids.push_back(static_cast<int32_t>(id));
    }
    dst.ids = std::move(ids);
    return std::nullopt;
  };
  const auto read_text = [&](const json::string& s, const std::string& param, item& dst) -> error_opt {
    if (s.empty()) return bad(param, "'" + param + "' must not be empty");
    dst.text = std::string(s);
    return std::nullopt;
  };
  std::vector<item> items(1);
  if (v->is_string()) {
    if (auto e = read_text(v->get_string(), "prompt", items[0])) return e;
  } else if (!v->is_array()) {
    return type_error("prompt", "a string, a list of token ids, or a list of these", *v);
  } else if (const json::array& a = v->get_array(); a.empty()) {
    return bad("prompt", "'prompt' must not be empty");
  } else if (!a[0].is_string() && !a[0].is_array()) {
    if (auto e = read_ids(a, "prompt", items[0])) return e;
  } else {
    if (a.size() > static_cast<size_t>(k_max_prompts))
      return bad("prompt", "at most " + std::to_string(k_max_prompts) + " prompts per request, got " + std::to_string(a.size()));
    items.resize(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string param = at("prompt", i);
      if (a[i].is_string()) {
        if (auto e = read_text(a[i].get_string(), param, items[i])) return e;
      } else if (a[i].is_array()) {
        if (a[i].get_array().empty()) return bad(param, "'" + param + "' must not be empty");
        if (auto e = read_ids(a[i].get_array(), param, items[i])) return e;
      } else {
        return type_error(param, "a string or a list of token ids", a[i]);
      }
    }
  }
  out.prompt_text = std::move(items[0].text);
  out.prompt_ids = std::move(items[0].ids);
  out.more_prompts.assign(std::make_move_iterator(items.begin() + 1), std::make_move_iterator(items.end()));
  return std::nullopt;
}

// The field a sampling validate() message is about: its first word.
std::string validate_field(const std::string& msg) { return msg.substr(0, msg.find(' ')); }

// Range checks with the request's own field names, then validate() for the rest.
error_opt check_sampling_ranges(const parsed_request& r, const fields& f) {
  const sampling_params& p = r.params;
  if (p.max_tokens && *p.max_tokens < 1) {
    std::string name = "max_tokens";
    if (r.kind == endpoint::responses) name = "max_output_tokens";
    else if (r.kind == endpoint::chat_completions && f.has("max_completion_tokens")) name = "max_completion_tokens";
    return bad(name, name + " must be at least 1, got " + std::to_string(*p.max_tokens));
  }
  if (r.n < 1 || r.n > k_max_n)
    return bad("n", "n must be in [1, " + std::to_string(k_max_n) + "], got " + std::to_string(r.n));
  if (const int64_t n_choices = static_cast<int64_t>(r.n) * static_cast<int64_t>(1 + r.more_prompts.size()); n_choices > k_max_choices)
    return bad("n", "prompts x n must be at most " + std::to_string(k_max_choices) + ", got " + std::to_string(n_choices));
  if (r.kind == endpoint::completions && p.logprobs && (*p.logprobs < 0 || *p.logprobs > k_max_completion_logprobs))
    return bad("logprobs", "logprobs must be in [0, " + std::to_string(k_max_completion_logprobs) + "], got " +
                               std::to_string(*p.logprobs));
  if (r.kind == endpoint::chat_completions && p.logprobs && (*p.logprobs < 0 || *p.logprobs > max_top_logprobs))
    return bad("top_logprobs", "top_logprobs must be in [0, " + std::to_string(max_top_logprobs) + "], got " +
                                   std::to_string(*p.logprobs));
  // Token ids (stop_token_ids, logit_bias) are checked against the model's
  // vocabulary in validate_for_model(); everything else here.
  sampling_params q = p;
  q.stop_token_ids.clear();
  q.logit_bias.clear();
  if (std::string msg = validate(q, std::numeric_limits<int32_t>::max()); !msg.empty()) return bad(validate_field(msg), msg);
  return std::nullopt;
}

// Copies the body's sampling fields (except those in skip) into a small object for
// parse_sampling_json and marks them seen.
error_opt read_sampling(fields& f, const json::object& o, std::initializer_list<std::string_view> skip,
                        sampling_params& out) {
  json::object s;
  for (const auto& kv : o) {
    const std::string_view k = kv.key();
    if (!is_sampling_field(k) || std::find(skip.begin(), skip.end(), k) != skip.end()) continue;
    f.mark(k);
    s[k] = kv.value();
  }
  std::string field;
  if (std::string msg = parse_sampling_json(s, out, &field); !msg.empty()) return bad(field, msg);
  return std::nullopt;
}

error_opt parse_stream(fields& f, parsed_request& out) {
  if (auto e = f.boolean("stream", out.stream)) return e;
  if (const json::value* so = f.get("stream_options")) {
    if (!so->is_object()) return type_error("stream_options", "an object", *so);
    if (!out.stream) return bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (const json::value* iu = so->get_object().if_contains("include_usage"); iu && !iu->is_null()) {
      if (!iu->is_bool()) return type_error("stream_options.include_usage", "a boolean", *iu);
      out.include_usage = iu->get_bool();
    }
  }
  return std::nullopt;
}

error_opt parse_completions(fields& f, const json::object& o, parsed_request& out) {
  if (auto e = parse_prompt(f.get("prompt"), out)) return e;
  if (const json::value* lp = f.get("logprobs"); lp && lp->is_bool())
    return type_error("logprobs", "an integer", *lp);
  // top_logprobs and max_completion_tokens are chat fields; here they are unknown.
  if (auto e = read_sampling(f, o, {"top_logprobs", "max_completion_tokens"}, out.params)) return e;
  if (auto e = f.boolean("echo", out.echo)) return e;
  if (const json::value* sfx = f.get("suffix")) {
    if (!sfx->is_string()) return type_error("suffix", "a string", *sfx);
    if (!sfx->get_string().empty()) return bad("suffix", "'suffix' is not supported");
  }
  if (auto e = f.integer("n", out.n)) return e;
  out.logprobs = out.params.logprobs;
  if (auto e = parse_output_constraint([&f](std::string_view k) { return f.get(k); }, out.constraint)) return e;
  return parse_stream(f, out);
}

error_opt parse_chat(fields& f, const json::object& o, parsed_request& out) {
  if (auto e = parse_messages(f.get("messages"), "messages", out.messages)) return e;
  if (auto e = parse_template_inputs(f, out.messages, out.template_extra, out.add_generation_prompt,
                                     out.continue_final_message, out.tool_use))
    return e;
  if (const json::value* lp = f.get("logprobs"); lp && !lp->is_bool()) return type_error("logprobs", "a boolean", *lp);
  if (auto e = read_sampling(f, o, {}, out.params)) return e;
  // parse_sampling_json takes a lone top_logprobs as the count; chat follows vLLM:
  // a top_logprobs other than 0 needs logprobs:true.
  out.chat_logprobs = f.has("logprobs") && o.at("logprobs").get_bool();
  if (!out.chat_logprobs && out.params.logprobs) {
    if (*out.params.logprobs != 0) return bad("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
    out.params.logprobs.reset();
  }
  out.logprobs = out.params.logprobs;
  if (auto e = parse_output_constraint([&f](std::string_view k) { return f.get(k); }, out.constraint)) return e;
  if (auto e = parse_reasoning_fields([&f](std::string_view k) { return f.get(k); }, out)) return e;
  if (auto e = f.integer("n", out.n)) return e;
  return parse_stream(f, out);
}

// One Responses API input item -> a chat message.
error_opt parse_input_item(const json::value& item, const std::string& ip, json::array& out) {
  if (!item.is_object()) return type_error(ip, "an input item object", item);
  const json::object& m = item.get_object();
  if (const json::value* t = m.if_contains("type"); t && !t->is_null()) {
    if (!t->is_string()) return type_error(dot(ip, "type"), "a string", *t);
    if (t->get_string() == "function_call" || t->get_string() == "function_call_output")
      return convert_function_call_item(m, ip, out);
    if (t->get_string() == "reasoning") return convert_reasoning_item(m, ip, out);
    if (t->get_string() != "message")
      return bad(dot(ip, "type"), "input item type '" + std::string(t->get_string()) + "' in " + ip +
                                      " is not supported; send message, reasoning, function_call or function_call_output items");
  }
  const json::value* role_v = m.if_contains("role");
  if (!role_v || role_v->is_null()) return bad(dot(ip, "role"), "'" + dot(ip, "role") + "' is required");
  if (!role_v->is_string()) return type_error(dot(ip, "role"), "a string", *role_v);
  std::string role(role_v->get_string());
  if (role != "system" && role != "developer" && role != "user" && role != "assistant")
    return bad(dot(ip, "role"), "unknown role '" + role + "' in " + ip + "; expected one of system, developer, user, assistant");
  if (role == "developer") role = "system";
  const json::value* content = m.if_contains("content");
  std::string text;
  if (!content || content->is_null()) return bad(dot(ip, "content"), "'" + dot(ip, "content") + "' is required");
  if (content->is_string()) {
    text = std::string(content->get_string());
  } else if (content->is_array()) {
    if (auto e = join_text_parts(content->get_array(), dot(ip, "content"), {"input_text", "output_text", "text"}, text))
      return e;
  } else {
    return type_error(dot(ip, "content"), "a string or a list of content parts", *content);
  }
  if (json::object* turn = role == "assistant" ? open_reasoning_turn(out) : nullptr) {
    (*turn)["content"] = std::move(text);  // the message of the turn whose reasoning came before
    return std::nullopt;
  }
  json::object msg;
  msg["role"] = role;
  msg["content"] = std::move(text);
  out.emplace_back(std::move(msg));
  return std::nullopt;
}

error_opt parse_responses(fields& f, const json::object& o, parsed_request& out) {
  // Stateless server: conversation state and background runs would be silently lost.
  if (f.get("previous_response_id"))
    return bad("previous_response_id", "'previous_response_id' is not supported: this server does not store "
                                       "responses; send the whole conversation in 'input'");
  bool background = false;
  if (auto e = f.boolean("background", background)) return e;
  if (background) return bad("background", "'background' responses are not supported");
  if (f.get("prompt")) return bad("prompt", "prompt templates ('prompt') are not supported; use 'input'");
  if (const json::value* tools = f.get("tools")) {
    json::value chat_tools = json::array();
    if (auto e = convert_responses_tools(*tools, chat_tools.as_array())) return e;
    if (auto e = parse_tool_choice(f.get("tool_choice"), &chat_tools, out.tool_use)) return e;
    if (out.tool_use.mode != tool_request::choice::none) out.template_extra["tools"] = chat_tools;
  } else if (f.get("tool_choice")) {
    if (auto e = parse_tool_choice(f.get("tool_choice"), nullptr, out.tool_use)) return e;
  }
  if (auto e = f.boolean("parallel_tool_calls", out.tool_use.parallel)) return e;
  if (const json::value* text = f.get("text")) {
    if (!text->is_object()) return type_error("text", "an object", *text);
    if (const json::value* fmt = text->get_object().if_contains("format"); fmt && !fmt->is_null()) {
      if (!fmt->is_object()) return type_error("text.format", "an object", *fmt);
      if (auto e = parse_text_format(fmt->get_object(), out.constraint)) return e;
    }
  }

  if (auto e = parse_responses_reasoning(f.get("reasoning"), out)) return e;

  if (const json::value* ins = f.get("instructions")) {
    if (!ins->is_string()) return type_error("instructions", "a string", *ins);
    if (!ins->get_string().empty()) out.messages.emplace_back(json::object{{"role", "system"}, {"content", ins->get_string()}});
  }
  const json::value* input = f.get("input");
  if (!input) return bad("input", "'input' is required");
  if (input->is_string()) {
    out.messages.emplace_back(json::object{{"role", "user"}, {"content", input->get_string()}});
  } else if (input->is_array()) {
    const json::array& a = input->get_array();
    if (a.empty()) return bad("input", "'input' must contain at least one item");
    for (size_t i = 0; i < a.size(); ++i)
      if (auto e = parse_input_item(a[i], at("input", i), out.messages)) return e;
  } else {
    return type_error("input", "a string or a list of input items", *input);
  }

  int32_t max_output = 0;
  if (auto e = f.integer("max_output_tokens", max_output)) return e;
  if (f.has("max_output_tokens")) out.params.max_tokens = max_output;
  json::object s;
  for (std::string_view k : {"temperature", "top_p"}) {
    if (const json::value* v = f.get(k)) s[k] = *v;
  }
  std::string field;
  if (std::string msg = parse_sampling_json(s, out.params, &field); !msg.empty()) return bad(field, msg);
  return parse_stream(f, out);
}

}  // namespace

std::string error_body(const api_error& e) {
  json::object err;
  err["message"] = e.message;
  err["type"] = e.type;
  err["param"] = e.param.empty() ? json::value(nullptr) : json::value(e.param);
  err["code"] = e.code.empty() ? json::value(nullptr) : json::value(e.code);
  return json::serialize(json::object{{"error", std::move(err)}});
}

std::optional<api_error> parse_request(endpoint kind, std::string_view body, parsed_request& out) {
  out = parsed_request{};
  out.kind = kind;
  json::object o;
  if (auto e = parse_object(body, o)) return e;
  fields f(o);
  if (auto e = f.string("model", out.model)) return e;
  error_opt err;
  switch (kind) {
    case endpoint::completions: err = parse_completions(f, o, out); break;
    case endpoint::chat_completions: err = parse_chat(f, o, out); break;
    case endpoint::responses: err = parse_responses(f, o, out); break;
    case endpoint::messages:
    case endpoint::ollama_chat:
    case endpoint::ollama_generate: return api_error{400, "internal: this API's body has its own parser", "", "", ""};
  }
  if (err) return err;
  if (auto e = check_sampling_ranges(out, f)) return e;
  if (auto e = refuse_unsupported_fields(kind, o, out.n)) return e;
  for (const auto& kv : o) {
    if (is_listed_field(kind, kv.key())) f.mark(kv.key());
  }
  out.unknown_fields = f.unknown();
  return std::nullopt;
}

std::optional<api_error> validate_for_model(const parsed_request& r, int32_t n_vocab) {
  if (std::string msg = validate(r.params, n_vocab); !msg.empty()) return bad(validate_field(msg), msg);
  if (r.prompt_ids) {
    if (auto e = validate_token_ids(*r.prompt_ids, n_vocab, r.more_prompts.empty() ? "prompt" : "prompt[0]")) return e;
  }
  for (size_t i = 0; i < r.more_prompts.size(); ++i) {
    if (r.more_prompts[i].ids) {
      if (auto e = validate_token_ids(*r.more_prompts[i].ids, n_vocab, at("prompt", i + 1))) return e;
    }
  }
  return std::nullopt;
}

std::optional<api_error> validate_token_ids(std::span<const int32_t> ids, int32_t n_vocab, std::string_view param) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_vocab)
      return bad(at(param, i), "token id " + std::to_string(ids[i]) + " at " + at(param, i) + " is out of range [0, " +
                                   std::to_string(n_vocab) + ")");
  }
  return std::nullopt;
}

std::optional<api_error> parse_tokenize(std::string_view body, tokenize_request& out) {
  out = tokenize_request{};
  json::object o;
  if (auto e = parse_object(body, o)) return e;
  fields f(o);
  if (auto e = f.string("model", out.model)) return e;
  const bool has_prompt = f.has("prompt"), has_messages = f.has("messages");
  if (has_prompt && has_messages) return bad("messages", "send either 'prompt' or 'messages', not both");
  if (!has_prompt && !has_messages) return bad("prompt", "'prompt' or 'messages' is required");
  if (has_prompt) {
    std::string prompt;
    if (auto e = f.string("prompt", prompt)) return e;
    out.prompt = std::move(prompt);
  } else {
    out.add_special_tokens = false;  // the chat template adds them
    if (auto e = parse_messages(f.get("messages"), "messages", out.messages)) return e;
    if (auto e = parse_template_inputs(f, out.messages, out.template_extra, out.add_generation_prompt,
                                       out.continue_final_message, out.tool_use))
      return e;
  }
  if (auto e = f.boolean("add_special_tokens", out.add_special_tokens)) return e;
  out.unknown_fields = f.unknown();
  return std::nullopt;
}

std::optional<api_error> parse_detokenize(std::string_view body, detokenize_request& out) {
  out = detokenize_request{};
  json::object o;
  if (auto e = parse_object(body, o)) return e;
  fields f(o);
  if (auto e = f.string("model", out.model)) return e;
  const json::value* tokens = f.get("tokens");
  if (!tokens) return bad("tokens", "'tokens' is required");
  if (!tokens->is_array()) return type_error("tokens", "a list of token ids", *tokens);
  const json::array& a = tokens->get_array();
  out.tokens.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t id = 0;
    const auto st = json_get_int(a[i], std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), id);
    if (st == json_int_status::not_integer) return type_error(at("tokens", i), "a token id (an integer)", a[i]);
    if (st != json_int_status::ok || id < 0 || id > k_i32_max)
      return bad(at("tokens", i), at("tokens", i) + " must be a token id in [0, 2147483647], got " + describe_json(a[i]));
    out.tokens.push_back(static_cast<int32_t>(id));
  }
  out.unknown_fields = f.unknown();
  return std::nullopt;
}

}  // namespace spate::api
