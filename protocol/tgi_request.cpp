#include "protocol/tgi_request.h"

#include <set>

#include "protocol/constraint_compiler.h"
#include "protocol/sampling_json.h"

namespace spate::api {

namespace json = boost::json;

namespace {

tgi_error invalid(std::string message) { return tgi_error{422, "Input validation error: " + std::move(message), "validation"}; }

// A body TGI could not deserialize (axum's wording: "Failed to deserialize the JSON body into the target type: ...").
tgi_error undecodable(const std::string& field, const json::value& v, const char* expected) {
  return tgi_error{422, "Failed to deserialize the JSON body into the target type: " + field + ": invalid type: " + describe_json(v) +
                            ", expected " + expected,
                   "validation"};
}

// A parameters field; null counts as absent.
const json::value* field(const json::object& o, std::string_view k) {
  const json::value* v = o.if_contains(k);
  return v && !v->is_null() ? v : nullptr;
}

std::optional<tgi_error> read_bool(const json::object& o, std::string_view k, bool& out) {
  const json::value* v = field(o, k);
  if (!v) return std::nullopt;
  if (!v->is_bool()) return undecodable("parameters." + std::string(k), *v, "a boolean");
  out = v->as_bool();
  return std::nullopt;
}

std::optional<tgi_error> read_number(const json::object& o, std::string_view k, std::optional<double>& out) {
  const json::value* v = field(o, k);
  if (!v) return std::nullopt;
  double d = 0;
  if (!json_get_number(*v, d)) return undecodable("parameters." + std::string(k), *v, "a number");
  out = d;
  return std::nullopt;
}

// A non-negative integer (TGI's u32 / u64 fields) up to hi.
std::optional<tgi_error> read_uint(const json::object& o, std::string_view k, int64_t hi, std::optional<int64_t>& out) {
  const json::value* v = field(o, k);
  if (!v) return std::nullopt;
  if (v->is_uint64()) {
    out = static_cast<int64_t>(std::min<uint64_t>(v->as_uint64(), static_cast<uint64_t>(hi)));
    return std::nullopt;
  }
  int64_t n = 0;
  if (json_get_int(*v, 0, hi, n) != json_int_status::ok) {
    if (json_get_int(*v, INT64_MIN, INT64_MAX, n) == json_int_status::ok && n > hi) {
      out = hi;  // saturated: the range checks below name it
      return std::nullopt;
    }
    return undecodable("parameters." + std::string(k), *v, "a non-negative integer");
  }
  out = n;
  return std::nullopt;
}

std::optional<tgi_error> read_stop(const json::object& o, std::vector<std::string>& stop) {
  const json::value* v = field(o, "stop");
  if (!v) return std::nullopt;
  if (!v->is_array()) return undecodable("parameters.stop", *v, "a sequence of strings");
  for (const json::value& s : v->as_array()) {
    if (!s.is_string()) return undecodable("parameters.stop", s, "a string");
    if (s.as_string().empty()) return invalid("`stop` sequences must not be empty");
    stop.emplace_back(s.as_string());
  }
  if (stop.size() > static_cast<size_t>(k_tgi_max_stop_sequences))
    return invalid("`stop` supports up to " + std::to_string(k_tgi_max_stop_sequences) + " stop sequences. Given: " +
                   std::to_string(stop.size()));
  return std::nullopt;
}

// grammar {"type": "json" | "json_object" | "regex", "value": ...} -> the structured-output constraint.
std::optional<tgi_error> read_grammar(const json::object& o, output_constraint& c) {
  const json::value* g = field(o, "grammar");
  if (!g) return std::nullopt;
  if (!g->is_object()) return undecodable("parameters.grammar", *g, "an object with \"type\" and \"value\"");
  const json::object& go = g->as_object();
  const json::value* type = go.if_contains("type");
  const json::value* value = go.if_contains("value");
  if (!type || !type->is_string()) return invalid("grammar: `type` must be \"json\" or \"regex\"");
  const std::string t(type->as_string());
  if (!value || value->is_null()) return invalid("grammar: `value` is required");
  c.param = "grammar";
  if (t == "json" || t == "json_object") {
    json::value schema = *value;
    if (value->is_string()) {  // TGI takes the schema as its JSON text too
      boost::system::error_code ec;
      json::parse_options po;
      po.max_depth = k_max_json_depth;
      schema = json::parse(value->as_string(), ec, {}, po);
      if (ec) return invalid("grammar: `value` is not valid JSON: " + ec.message());
    }
    if (!schema.is_object()) return invalid("grammar: a json grammar's `value` must be a JSON Schema object");
    c.type = output_constraint::kind::json_schema;
    c.schema = std::move(schema);
  } else if (t == "regex") {
    if (!value->is_string()) return invalid("grammar: a regex grammar's `value` must be a string");
    if (value->as_string().empty()) return invalid("grammar: `value` cannot be empty for `regex` grammar");
    c.type = output_constraint::kind::regex;
    c.text = std::string(value->as_string());
  } else {
    return invalid("grammar: unknown `type` \"" + t + "\" (json, json_object or regex)");
  }
  return std::nullopt;
}

// The sampling fields with TGI's range checks.
std::optional<tgi_error> read_sampling(const json::object& p, tgi_request& out) {
  std::optional<double> temperature, top_p, typical_p, rep, freq;
  std::optional<int64_t> top_k, seed, max_new;
  bool do_sample = false;
  if (auto e = read_number(p, "temperature", temperature)) return e;
  if (auto e = read_number(p, "top_p", top_p)) return e;
  if (auto e = read_number(p, "typical_p", typical_p)) return e;
  if (auto e = read_number(p, "repetition_penalty", rep)) return e;
  if (auto e = read_number(p, "frequency_penalty", freq)) return e;
  if (auto e = read_uint(p, "top_k", INT32_MAX, top_k)) return e;
  if (auto e = read_uint(p, "seed", INT64_MAX, seed)) return e;
  if (const json::value* s = field(p, "seed"); s && s->is_uint64()) seed = static_cast<int64_t>(s->as_uint64() & INT64_MAX);
  if (auto e = read_uint(p, "max_new_tokens", INT32_MAX, max_new)) return e;
  if (auto e = read_bool(p, "do_sample", do_sample)) return e;
  if (temperature && *temperature <= 0) return invalid("`temperature` must be strictly positive");
  if (rep && *rep <= 0) return invalid("`repetition_penalty` must be strictly positive");
  if (freq && !(*freq >= -2.0 && *freq <= 2.0)) return invalid("`frequency_penalty` must be >= -2.0 and <= 2.0");
  if (top_p && !(*top_p > 0 && *top_p < 1)) return invalid("`top_p` must be > 0.0 and < 1.0");
  if (typical_p && !(*typical_p > 0 && *typical_p < 1)) return invalid("`typical_p` must be > 0.0 and < 1.0");
  if (top_k && *top_k <= 0) return invalid("`top_k` must be strictly positive");
  if (max_new && *max_new <= 0) return invalid("`max_new_tokens` must be strictly positive");
  sampling_params& sp = out.params;
  out.sampling = do_sample || (temperature && *temperature != 1.0) || top_k || top_p || typical_p;
  sp.temperature = out.sampling ? static_cast<float>(temperature.value_or(1.0)) : 0.0f;
  if (top_k) sp.top_k = static_cast<int32_t>(*top_k);
  if (top_p) sp.top_p = static_cast<float>(*top_p);
  if (typical_p) sp.typical_p = static_cast<float>(*typical_p);
  if (rep) sp.repetition_penalty = static_cast<float>(*rep);
  if (freq) sp.frequency_penalty = static_cast<float>(*freq);
  if (seed) sp.seed = static_cast<uint64_t>(*seed);
  if (max_new) sp.max_tokens = static_cast<int32_t>(*max_new);
  if (auto e = read_stop(p, sp.stop)) return e;
  // spate's own bounds beyond TGI's (temperature <= 2, repetition_penalty <= 2); the vocabulary is not needed here.
  if (std::string msg = validate(sp, INT32_MAX); !msg.empty()) return invalid(msg);
  return std::nullopt;
}

}  // namespace

std::string tgi_error_body(const tgi_error& e) { return json::serialize(json::object{{"error", e.message}, {"error_type", e.type}}); }

tgi_error tgi_error_of(const api_error& e) {
  if (e.status == 400) return tgi_error{422, "Input validation error: " + e.message, "validation"};
  if (e.status == 429) return tgi_error{429, e.message, "overloaded"};
  if (e.status == 404) return tgi_error{404, e.message, "not_found"};
  if (e.status == 503) return tgi_error{503, e.message, "unhealthy"};
  return tgi_error{e.status, e.message, "generation"};
}

std::optional<tgi_error> parse_tgi_request(std::string_view body, tgi_route route, tgi_request& out) {
  out = tgi_request{};
  boost::system::error_code ec;
  json::parse_options po;
  po.max_depth = k_max_json_depth;
  const json::value v = json::parse(body, ec, {}, po);
  if (ec) return tgi_error{422, "Failed to parse the request body as JSON: " + ec.message(), "validation"};
  if (!v.is_object()) return undecodable("body", v, "an object with \"inputs\"");
  const json::object& in = v.as_object();
  const json::value* inputs = in.if_contains("inputs");
  if (!inputs || inputs->is_null()) return tgi_error{422, "Failed to deserialize the JSON body into the target type: missing field `inputs`", "validation"};
  if (!inputs->is_string()) return undecodable("inputs", *inputs, "a string");
  out.inputs = std::string(inputs->as_string());
  if (out.inputs.empty()) return invalid("`inputs` cannot be empty");
  bool stream = route == tgi_route::generate_stream;
  if (const json::value* s = field(in, "stream")) {
    if (!s->is_bool()) return undecodable("stream", *s, "a boolean");
    if (route == tgi_route::compat) stream = s->as_bool();
  }
  out.stream = stream;
  out.wrap_in_array = route == tgi_route::compat && !stream;
  for (const auto& kv : in)
    if (kv.key() != "inputs" && kv.key() != "parameters" && kv.key() != "stream") out.unknown_fields.emplace_back(kv.key());
  const json::value* pv = field(in, "parameters");
  static const json::object empty;
  if (pv && !pv->is_object()) return undecodable("parameters", *pv, "an object");
  const json::object& p = pv ? pv->as_object() : empty;
  if (auto e = read_sampling(p, out)) return e;
  bool decoder_input_details = false;
  if (auto e = read_bool(p, "details", out.details)) return e;
  if (auto e = read_bool(p, "decoder_input_details", decoder_input_details)) return e;
  if (auto e = read_bool(p, "return_full_text", out.return_full_text)) return e;
  if (auto e = read_bool(p, "watermark", out.params.watermark)) return e;
  if (decoder_input_details)
    return invalid("`decoder_input_details` is not supported: this server computes no log-probabilities of the input tokens");
  std::optional<int64_t> top_n, truncate, best_of;
  if (auto e = read_uint(p, "top_n_tokens", INT32_MAX, top_n)) return e;
  if (top_n && *top_n > k_tgi_max_top_n_tokens)
    return invalid("`top_n_tokens` must be >= 0 and <= " + std::to_string(k_tgi_max_top_n_tokens) + ". Given: " + std::to_string(*top_n));
  out.top_n_tokens = static_cast<int32_t>(top_n.value_or(0));
  if (auto e = read_uint(p, "truncate", INT32_MAX, truncate)) return e;
  if (truncate && *truncate == 0) return invalid("`truncate` must be strictly positive. Given: 0");
  if (truncate) out.truncate = static_cast<int32_t>(*truncate);
  if (auto e = read_uint(p, "best_of", INT32_MAX, best_of)) return e;
  if (best_of && *best_of != 1) return invalid("`best_of` must be > 0 and <= 1. Given: " + std::to_string(*best_of));
  if (const json::value* a = field(p, "adapter_id")) {
    if (!a->is_string()) return undecodable("parameters.adapter_id", *a, "a string");
    out.model = std::string(a->as_string());
  }
  if (auto e = read_grammar(p, out.constraint)) return e;
  // Every token carries its log-probability (details, stream events); top_n_tokens alternatives.
  out.params.logprobs = out.top_n_tokens;
  static const std::set<std::string, std::less<>> known = {
      "max_new_tokens", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "frequency_penalty", "stop", "seed",
      "do_sample", "return_full_text", "details", "decoder_input_details", "top_n_tokens", "truncate", "grammar", "watermark",
      "best_of", "adapter_id"};
  for (const auto& kv : p)
    if (!known.count(kv.key())) out.unknown_fields.emplace_back("parameters." + std::string(kv.key()));
  return std::nullopt;
}

std::optional<tgi_error> prepare_tgi_generation(const served_model& m, const tgi_request& r, const tgi_watermark& wm,
                                                prepared_generation& out) {
  out = prepared_generation{};
  out.prompt_text = r.inputs;
  try {
    out.prompt = encode_prompt(*m.tok, r.inputs);
  } catch (const std::exception& e) {
    return invalid(std::string("`inputs` could not be tokenized: ") + e.what());
  }
  if (r.truncate && out.prompt.size() > static_cast<size_t>(*r.truncate))
    out.prompt.erase(out.prompt.begin(), out.prompt.end() - *r.truncate);
  out.params = r.params;
  out.params.watermark_gamma = wm.gamma;
  out.params.watermark_delta = wm.delta;
  const int32_t n_input = static_cast<int32_t>(out.prompt.size());
  const int32_t max_input = m.max_model_len - 1;
  if (n_input > max_input)
    return invalid("`inputs` tokens + `max_new_tokens` must be <= " + std::to_string(m.max_model_len) + ". Given: " +
                   std::to_string(n_input) + " `inputs` tokens and " + std::to_string(out.params.max_tokens.value_or(1)) +
                   " `max_new_tokens`");
  const generation_check c = check_generation(out.prompt, out.params, k_tgi_default_max_new_tokens, m.n_vocab, m.max_model_len);
  using o = generation_check::outcome;
  switch (c.result) {
    case o::ok: break;
    case o::empty_prompt: return invalid("`inputs` cannot be empty");
    case o::invalid_params: return invalid(c.message);
    case o::token_out_of_range: return invalid("`inputs` has a token id out of range: " + std::to_string(c.bad_token));
    case o::no_room:
    case o::too_long:
      return invalid("`inputs` tokens + `max_new_tokens` must be <= " + std::to_string(m.max_model_len) + ". Given: " +
                     std::to_string(n_input) + " `inputs` tokens and " + std::to_string(c.max_tokens) + " `max_new_tokens`");
  }
  if (!r.constraint.none()) {
    if (!m.constraints) return invalid("grammar is not supported: structured outputs are not enabled on this server");
    std::optional<api_error> err;
    out.params.constraint = m.constraints->compile(r.constraint, err);
    if (err) return invalid(err->message);
  }
  return std::nullopt;
}

}  // namespace spate::api
