#include "protocol/ollama_request.h"

#include <cmath>
#include <limits>
#include <set>

namespace spate::api {

namespace json = boost::json;

namespace {

api_error bad(std::string message, std::string param = "") {
  return api_error{400, std::move(message), "invalid_request_error", std::move(param), ""};
}

std::optional<api_error> parse_object(std::string_view body, json::value& v) {
  boost::system::error_code ec;
  json::parse_options po;
  po.max_depth = k_max_json_depth;
  v = json::parse(body, ec, {}, po);
  if (ec) return bad("malformed JSON: " + ec.message());
  if (!v.is_object()) return bad("the body must be a JSON object");
  return std::nullopt;
}

// Ollama's options -> the chat / completions fields.
std::optional<api_error> translate_options(const json::object& in, json::object& out, ollama_extras& x, std::vector<std::string>& unknown) {
  const json::value* o = in.if_contains("options");
  if (!o || o->is_null()) return std::nullopt;
  if (!o->is_object()) return bad("options: must be an object", "options");
  static const std::set<std::string, std::less<>> same = {"temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty",
                                                          "frequency_penalty", "stop"};
  for (const auto& kv : o->as_object()) {
    const std::string_view k = kv.key();
    const json::value& v = kv.value();
    if (v.is_null()) continue;
    if (same.count(k)) {
      out[k] = v;
    } else if (k == "repeat_penalty") {
      out["repetition_penalty"] = v;
    } else if (k == "num_predict") {
      if (!v.is_int64() && !v.is_uint64()) return bad("options.num_predict: must be an integer", "options.num_predict");
      if (v.is_uint64() || v.as_int64() > std::numeric_limits<int32_t>::max())
        return bad("options.num_predict: must be at most 2147483647 (-1: until the context is full)", "options.num_predict");
      if (v.as_int64() >= 0) out["max_tokens"] = v;  // -1 (or -2): until the context is full
    } else if (k == "num_ctx") {
      if (!v.is_int64() && !v.is_uint64()) return bad("options.num_ctx: must be an integer", "options.num_ctx");
      x.num_ctx = v.is_int64() ? v.as_int64() : std::numeric_limits<int64_t>::max();  // above the int64 range: too large anyway
    } else {
      unknown.emplace_back("options." + std::string(k));
    }
  }
  return std::nullopt;
}

std::optional<api_error> translate_format(const json::object& in, json::object& out) {
  const json::value* f = in.if_contains("format");
  if (!f || f->is_null() || (f->is_string() && f->as_string().empty())) return std::nullopt;
  if (f->is_string() && f->as_string() == "json") {
    out["response_format"] = json::object{{"type", "json_object"}};
  } else if (f->is_object()) {
    out["response_format"] = json::object{{"type", "json_schema"}, {"json_schema", json::object{{"name", "format"}, {"schema", *f}}}};
  } else {
    return bad("format: must be \"json\" or a JSON Schema object", "format");
  }
  return std::nullopt;
}

// Ollama messages -> chat messages: tool_calls' arguments are objects (kept:
// templates index into them), images refused.
std::optional<api_error> translate_messages(const json::value& msgs, json::array& out) {
  if (!msgs.is_array()) return bad("messages: must be an array", "messages");
  size_t i = 0;
  for (const json::value& m : msgs.as_array()) {
    const std::string at = "messages[" + std::to_string(i++) + "]";
    const json::object* o = m.if_object();
    if (!o) return bad(at + ": must be an object", at);
    if (const json::value* im = o->if_contains("images"); im && !im->is_null() && !(im->is_array() && im->as_array().empty()))
      return bad(at + ".images: images are not supported by this server", at + ".images");
    json::object c;
    for (const auto& kv : *o) {
      if (kv.key() == "images" || kv.key() == "thinking") continue;
      if (kv.key() == "tool_name") {
        c["name"] = kv.value();
        continue;
      }
      c[kv.key()] = kv.value();
    }
    if (json::value* calls = c.if_contains("tool_calls"); calls && calls->is_array()) {
      size_t k = 0;
      for (json::value& call : calls->as_array()) {
        if (!call.is_object()) return bad(at + ".tool_calls: must be objects", at + ".tool_calls");
        json::object& co = call.as_object();
        if (!co.contains("type")) co["type"] = "function";
        if (!co.contains("id")) co["id"] = "call_" + std::to_string(i) + "_" + std::to_string(k);
        ++k;
      }
    }
    if (!c.contains("content")) c["content"] = "";
    out.push_back(std::move(c));
  }
  return std::nullopt;
}

// Ollama's logprobs (bool) and top_logprobs (0..20): the count of alternatives, set when logprobs is true.
std::optional<api_error> read_logprobs(const json::object& in, std::optional<int32_t>& n_top) {
  n_top.reset();
  const json::value* lp = in.if_contains("logprobs");
  if (lp && !lp->is_null() && !lp->is_bool()) return bad("logprobs: must be a boolean", "logprobs");
  int64_t top = 0;
  if (const json::value* t = in.if_contains("top_logprobs"); t && !t->is_null()) {
    if (!t->is_int64() && !t->is_uint64()) return bad("top_logprobs: must be an integer", "top_logprobs");
    top = t->is_int64() ? t->as_int64() : static_cast<int64_t>(std::min<uint64_t>(t->as_uint64(), 1000));
    if (top < 0 || top > max_top_logprobs)
      return bad("top_logprobs: must be in [0, " + std::to_string(max_top_logprobs) + "], got " + std::to_string(top), "top_logprobs");
  }
  if (lp && lp->is_bool() && lp->as_bool()) n_top = static_cast<int32_t>(top);
  return std::nullopt;
}

// keep_alive: absent or null -> unset; malformed or above k_max_keep_alive_s -> a 400.
std::optional<api_error> read_keep_alive(const json::object& in, std::optional<double>& keep_alive_s) {
  keep_alive_s.reset();
  const json::value* ka = in.if_contains("keep_alive");
  if (!ka || ka->is_null()) return std::nullopt;
  const std::optional<double> s = parse_keep_alive(*ka);
  if (!s) return bad("keep_alive: must be a number of seconds or a duration such as \"5m\" (negative: keep the model loaded)", "keep_alive");
  if (*s > k_max_keep_alive_s)
    return bad("keep_alive: at most 1e9 seconds (about 31 years); a negative value such as -1 keeps the model loaded", "keep_alive");
  keep_alive_s = s;
  return std::nullopt;
}

// A field that must have one JSON type when present and not null: a 400 naming it otherwise.
std::optional<api_error> check_type(const json::object& in, std::string_view key, json::kind want, const char* what) {
  const json::value* v = in.if_contains(key);
  if (!v || v->is_null()) return std::nullopt;
  const bool ok = want == json::kind::double_ ? v->is_number() : v->kind() == want;
  if (ok) return std::nullopt;
  return bad(std::string(key) + ": must be " + what, std::string(key));
}

// The fields of /api/generate and /api/chat that are passed through or read
// later, checked for their types here so a wrong one is a 400, never ignored.
std::optional<api_error> check_field_types(endpoint kind, const json::object& in) {
  using k = json::kind;
  struct field {
    const char* key;
    k want;
    const char* what;
  };
  static const field common[] = {{"options", k::object, "an object"}};
  static const field gen[] = {{"prompt", k::string, "a string"}, {"suffix", k::string, "a string"}, {"system", k::string, "a string"},
                              {"template", k::string, "a string"}, {"raw", k::bool_, "a boolean"}, {"images", k::array, "an array of base64 strings"},
                              {"context", k::array, "an array of token ids"}};
  static const field chat[] = {{"tools", k::array, "an array of tool definitions"}};
  for (const field& f : common)
    if (auto err = check_type(in, f.key, f.want, f.what)) return err;
  if (kind == endpoint::ollama_generate) {
    for (const field& f : gen)
      if (auto err = check_type(in, f.key, f.want, f.what)) return err;
  } else {
    for (const field& f : chat)
      if (auto err = check_type(in, f.key, f.want, f.what)) return err;
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> parse_keep_alive(const json::value& v) {
  if (v.is_number()) return v.to_number<double>();  // a JSON number is finite
  if (!v.is_string()) return std::nullopt;
  const std::string s(v.as_string());
  if (s.empty()) return std::nullopt;
  size_t used = 0;
  double n = 0;
  try {
    n = std::stod(s, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!std::isfinite(n)) return std::nullopt;
  const std::string unit = s.substr(used);
  if (unit.empty() || unit == "s") return n;
  if (unit == "ms") return n / 1000.0;
  if (unit == "m") return n * 60.0;
  if (unit == "h") return n * 3600.0;
  return std::nullopt;
}

std::optional<api_error> parse_ollama_request(endpoint kind, std::string_view body, parsed_request& out, ollama_extras& x) {
  json::value v;
  if (auto err = parse_object(body, v)) return err;
  const json::object& in = v.as_object();
  json::object req;
  std::vector<std::string> unknown;
  const json::value* model = in.if_contains("model");
  if (!model || !model->is_string() || model->as_string().empty()) return bad("model is required", "model");
  req["model"] = *model;
  if (auto err = check_field_types(kind, in)) return err;
  const json::value* stream = in.if_contains("stream");
  if (stream && !stream->is_null() && !stream->is_bool()) return bad("stream: must be a boolean", "stream");
  req["stream"] = !stream || stream->is_null() || stream->as_bool();  // Ollama streams by default
  if (auto err = translate_options(in, req, x, unknown)) return err;
  if (auto err = translate_format(in, req)) return err;
  if (auto err = read_keep_alive(in, x.keep_alive_s)) return err;
  if (const json::value* t = in.if_contains("template"); t && t->is_string() && !t->as_string().empty())
    return bad("template: a per-request template is not supported (spate uses the model's or --chat-template)", "template");
  static const std::set<std::string, std::less<>> chat_keys = {"model", "messages", "tools", "tool_choice", "format", "options", "stream",
                                                               "keep_alive", "think", "logprobs", "top_logprobs"};
  static const std::set<std::string, std::less<>> gen_keys = {"model",  "prompt", "suffix",     "images",  "format", "options", "system",
                                                              "template", "stream", "raw", "keep_alive", "context", "think",
                                                              "logprobs", "top_logprobs"};
  if (const json::value* think = in.if_contains("think"); think && !think->is_null()) {
    const bool level = think->is_string() && (think->as_string() == "low" || think->as_string() == "medium" || think->as_string() == "high");
    if (!think->is_bool() && !level) return bad("think: must be a boolean or \"low\", \"medium\", \"high\"", "think");
    req["chat_template_kwargs"] = json::object{{"enable_thinking", !think->is_bool() || think->as_bool()}};
    if (level) req["reasoning_effort"] = *think;  // gpt-oss's levels, as Ollama maps them
  }
  std::optional<int32_t> n_top_logprobs;  // set when logprobs is true
  if (auto err = read_logprobs(in, n_top_logprobs)) return err;
  if (kind == endpoint::ollama_chat) {
    json::array msgs;
    const json::value* m = in.if_contains("messages");
    if (!m || m->is_null()) return bad("messages is required", "messages");
    if (auto err = translate_messages(*m, msgs)) return err;
    if (msgs.empty()) {
      x.empty_prompt = true;  // Ollama loads the model and answers done
      msgs.push_back(json::object{{"role", "user"}, {"content", ""}});
    }
    req["messages"] = std::move(msgs);
    if (const json::value* tools = in.if_contains("tools"); tools && !tools->is_null()) req["tools"] = *tools;
    // spate's extension (Ollama has none): OpenAI's tool_choice, to force a call.
    if (const json::value* tc = in.if_contains("tool_choice"); tc && !tc->is_null()) req["tool_choice"] = *tc;
    if (auto err = parse_request(endpoint::chat_completions, json::serialize(req), out)) return err;
    for (const auto& kv : in)
      if (!chat_keys.count(kv.key())) unknown.emplace_back(kv.key());
  } else {
    if (const json::value* s = in.if_contains("suffix"); s && s->is_string() && !s->as_string().empty())
      return bad("suffix: fill-in-the-middle is not supported", "suffix");
    if (const json::value* im = in.if_contains("images"); im && im->is_array() && !im->as_array().empty())
      return bad("images: images are not supported by this server", "images");
    if (const json::value* c = in.if_contains("context"); c && c->is_array() && !c->as_array().empty())
      return bad("context: the deprecated context array is not supported; send the conversation to /api/chat", "context");
    const json::value* p = in.if_contains("prompt");
    if (p && !p->is_null() && !p->is_string()) return bad("prompt: must be a string", "prompt");
    const std::string prompt = p && p->is_string() ? std::string(p->as_string()) : "";
    const json::value* raw = in.if_contains("raw");
    const bool is_raw = raw && raw->is_bool() && raw->as_bool();
    x.empty_prompt = prompt.empty();
    std::optional<api_error> err;
    if (is_raw) {
      req["prompt"] = prompt.empty() ? " " : prompt;
      err = parse_request(endpoint::completions, json::serialize(req), out);
    } else {
      json::array msgs;
      if (const json::value* sys = in.if_contains("system"); sys && sys->is_string() && !sys->as_string().empty())
        msgs.push_back(json::object{{"role", "system"}, {"content", sys->as_string()}});
      msgs.push_back(json::object{{"role", "user"}, {"content", prompt}});
      req["messages"] = std::move(msgs);
      err = parse_request(endpoint::chat_completions, json::serialize(req), out);
    }
    if (err) return err;
    for (const auto& kv : in)
      if (!gen_keys.count(kv.key())) unknown.emplace_back(kv.key());
  }
  out.unknown_fields = std::move(unknown);
  out.ollama_kind = kind;
  if (n_top_logprobs) out.params.logprobs = n_top_logprobs;
  return std::nullopt;
}

std::optional<api_error> parse_ollama_embed(std::string_view body, bool legacy, std::string& model, std::vector<std::string>& texts) {
  json::value v;
  if (auto err = parse_object(body, v)) return err;
  const json::object& in = v.as_object();
  const json::value* m = in.if_contains("model");
  if (!m || !m->is_string() || m->as_string().empty()) return bad("model is required", "model");
  model = std::string(m->as_string());
  if (auto err = check_type(in, "truncate", json::kind::bool_, "a boolean")) return err;
  if (auto err = check_type(in, "options", json::kind::object, "an object")) return err;
  if (const json::value* d = in.if_contains("dimensions"); d && !d->is_null() && !d->is_int64() && !d->is_uint64())
    return bad("dimensions: must be an integer", "dimensions");
  std::optional<double> keep_alive_s;  // checked as /api/chat's; the embedding routes do not change the model's keep_alive
  if (auto err = read_keep_alive(in, keep_alive_s)) return err;
  texts.clear();
  const char* field = legacy ? "prompt" : "input";
  const json::value* input = in.if_contains(field);
  if (!input || input->is_null()) return bad(std::string(field) + " is required", field);
  if (input->is_string()) {
    texts.emplace_back(input->as_string());
  } else if (!legacy && input->is_array()) {
    for (const json::value& s : input->as_array()) {
      if (!s.is_string()) return bad("input: must be a string or an array of strings", "input");
      texts.emplace_back(s.as_string());
    }
  } else {
    return bad(std::string(field) + ": must be a string" + (legacy ? "" : " or an array of strings"), field);
  }
  if (texts.empty()) return bad("input: at least one text is required", "input");
  for (const auto& t : texts)
    if (t.empty()) return bad(std::string(field) + ": an empty text has no embedding", field);
  return std::nullopt;
}

std::string ollama_error_body(std::string_view message) { return json::serialize(json::object{{"error", message}}); }

}  // namespace spate::api
