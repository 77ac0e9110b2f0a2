#include "protocol/sampling_json.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

namespace spate {
namespace {

namespace json = boost::json;

constexpr std::array<std::string_view, 18> k_fields = {
    "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
    "repetition_penalty", "presence_penalty", "frequency_penalty", "seed", "stop", "stop_token_ids",
    "ignore_eos", "min_tokens", "logit_bias", "logprobs", "top_logprobs", "speculative_decoding"};

constexpr int64_t k_i32_min = std::numeric_limits<int32_t>::min();
constexpr int64_t k_i32_max = std::numeric_limits<int32_t>::max();

// Collects the first error; later fields are not looked at once one is set.
struct reader {
  std::string message;
  std::string field;

  bool failed() const { return !message.empty(); }
  void fail(std::string_view f, std::string msg) {
    field = std::string(f);
    message = std::move(msg);
  }
  void type_error(std::string_view key, const char* want, const json::value& got) {
    fail(key, "'" + std::string(key) + "' must be " + want + ", got " + describe_json(got));
  }

  // An int32 field: type errors and values beyond int32 are reported.
  std::optional<int32_t> i32(std::string_view key, const json::value& v) {
    int64_t i = 0;
    switch (json_get_int(v, k_i32_min, k_i32_max, i)) {
      case json_int_status::ok: return static_cast<int32_t>(i);
      case json_int_status::out_of_range:
        fail(key, "'" + std::string(key) + "' must be a 32-bit integer, got " + describe_json(v));
        return std::nullopt;
      case json_int_status::not_integer: break;
    }
    type_error(key, "an integer", v);
    return std::nullopt;
  }

  std::optional<float> number(std::string_view key, const json::value& v) {
    double d = 0;
    if (!json_get_number(v, d)) {
      type_error(key, "a number", v);
      return std::nullopt;
    }
    return static_cast<float>(d);
  }
};

// Parses a logit_bias key: an optional '-' and decimal digits, within int32.
std::optional<int32_t> parse_token_key(std::string_view k) {
  size_t i = (!k.empty() && k[0] == '-') ? 1 : 0;
  if (i == k.size() || k.size() - i > 10) return std::nullopt;
  int64_t v = 0;
  for (; i < k.size(); ++i) {
    if (k[i] < '0' || k[i] > '9') return std::nullopt;
    v = v * 10 + (k[i] - '0');
  }
  if (k[0] == '-') v = -v;
  if (v < k_i32_min || v > k_i32_max) return std::nullopt;
  return static_cast<int32_t>(v);
}

std::string format_double(double d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  // Prefer the shortest form that reads back the same (1.5 rather than 1.5000000000000000).
  for (int prec = 1; prec <= 17; ++prec) {
    char shorter[64];
    std::snprintf(shorter, sizeof shorter, "%.*g", prec, d);
    if (std::strtod(shorter, nullptr) == d) return shorter;
  }
  return buf;
}

}  // namespace

std::string describe_json(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::bool_: return "boolean";
    case json::kind::int64: return std::to_string(v.get_int64());
    case json::kind::uint64: return std::to_string(v.get_uint64());
    case json::kind::double_:
      if (std::isinf(v.get_double())) return v.get_double() > 0 ? "infinity" : "-infinity";
      return format_double(v.get_double());
    case json::kind::string: return "string";
    case json::kind::array: return "array";
    case json::kind::object: return "object";
  }
  return "unknown";
}

json_int_status json_get_int(const json::value& v, int64_t lo, int64_t hi, int64_t& out) {
  if (v.is_int64()) {
    out = v.get_int64();
    return out >= lo && out <= hi ? json_int_status::ok : json_int_status::out_of_range;
  }
  if (v.is_uint64()) {  // Boost.JSON uses uint64 only above INT64_MAX
    const uint64_t u = v.get_uint64();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return json_int_status::out_of_range;
    out = static_cast<int64_t>(u);
    return out >= lo && out <= hi ? json_int_status::ok : json_int_status::out_of_range;
  }
  if (v.is_double()) {
    const double d = v.get_double();
    if (!std::isfinite(d) || std::floor(d) != d) return json_int_status::not_integer;
    // Every double in (-2^63, 2^63) with an integral value converts exactly.
    if (d <= -9.2e18 || d >= 9.2e18) return json_int_status::out_of_range;
    out = static_cast<int64_t>(d);
    return out >= lo && out <= hi ? json_int_status::ok : json_int_status::out_of_range;
  }
  return json_int_status::not_integer;
}

bool json_get_number(const json::value& v, double& out) {
  if (v.is_double()) out = v.get_double();
  else if (v.is_int64()) out = static_cast<double>(v.get_int64());
  else if (v.is_uint64()) out = static_cast<double>(v.get_uint64());
  else return false;
  return std::isfinite(out);
}

bool is_sampling_field(std::string_view key) {
  for (auto f : k_fields) if (f == key) return true;
  return false;
}

namespace {

// Fields whose meaning depends on another one, resolved after all are read.
struct dependent_fields {
  std::optional<int32_t> max_tokens, max_completion_tokens, top_logprobs;
  const json::value* logprobs = nullptr;  // validated: a bool or an int32
};

void read_seed(reader& r, std::string_view key, const json::value& v, sampling_params& p) {
  // Any 64-bit value: negative seeds are taken modulo 2^64, as their bit pattern.
  int64_t i = 0;
  const auto st = v.is_uint64() ? json_int_status::ok
                                : json_get_int(v, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), i);
  if (st == json_int_status::not_integer) r.type_error(key, "an integer", v);
  else if (st == json_int_status::out_of_range) r.fail(key, "'seed' must be a 64-bit integer, got " + describe_json(v));
  else p.seed = v.is_uint64() ? v.get_uint64() : static_cast<uint64_t>(i);
}

void read_stop(reader& r, std::string_view key, const json::value& v, sampling_params& p) {
  p.stop.clear();
  if (v.is_string()) {
    p.stop.emplace_back(v.get_string());
  } else if (v.is_array()) {
    const auto& a = v.get_array();
    for (size_t j = 0; j < a.size() && !r.failed(); ++j) {
      if (!a[j].is_string()) {
        r.fail("stop[" + std::to_string(j) + "]", "'stop' must be a string or a list of strings, got " + describe_json(a[j]) +
                                                      " at stop[" + std::to_string(j) + "]");
      } else {
        p.stop.emplace_back(a[j].get_string());
      }
    }
  } else {
    r.type_error(key, "a string or a list of strings", v);
  }
  for (const auto& s : p.stop)
    if (!r.failed() && s.empty()) r.fail(key, "'stop' must not contain empty strings");
}

void read_stop_token_ids(reader& r, std::string_view key, const json::value& v, sampling_params& p) {
  if (!v.is_array()) {
    r.type_error(key, "a list of integers", v);
    return;
  }
  p.stop_token_ids.clear();
  const auto& a = v.get_array();
  for (size_t j = 0; j < a.size() && !r.failed(); ++j) {
    int64_t i = 0;
    if (json_get_int(a[j], k_i32_min, k_i32_max, i) != json_int_status::ok) {
      r.fail("stop_token_ids[" + std::to_string(j) + "]", "'stop_token_ids' must be a list of integers, got " + describe_json(a[j]) +
                                                              " at stop_token_ids[" + std::to_string(j) + "]");
    } else {
      p.stop_token_ids.push_back(static_cast<int32_t>(i));
    }
  }
}

void read_logit_bias(reader& r, std::string_view key, const json::value& v, sampling_params& p) {
  if (!v.is_object()) {
    r.type_error(key, "an object mapping token ids to biases", v);
    return;
  }
  p.logit_bias.clear();
  for (const auto& b : v.get_object()) {
    const std::string k(b.key());
    const auto id = parse_token_key(k);
    if (!id) {
      r.fail(key, "'logit_bias' keys must be token ids, got '" + k + "'");
      return;
    }
    double d = 0;
    if (!json_get_number(b.value(), d)) {
      r.fail(key, "'logit_bias' values must be numbers, got " + describe_json(b.value()) + " for token " + k);
      return;
    }
    p.logit_bias.emplace_back(*id, static_cast<float>(d));
  }
}

// Completions: an integer count; chat: a boolean (the count is top_logprobs).
void read_logprobs(reader& r, std::string_view key, const json::value& v, dependent_fields& d) {
  int64_t i = 0;
  const auto st = v.is_bool() ? json_int_status::ok : json_get_int(v, k_i32_min, k_i32_max, i);
  if (st == json_int_status::not_integer) r.type_error(key, "a boolean or an integer", v);
  else if (st == json_int_status::out_of_range) r.fail(key, "'logprobs' must be a 32-bit integer, got " + describe_json(v));
  else d.logprobs = &v;
}

// One sampling field (not null) into p, or into d when it depends on another.
void read_field(reader& r, std::string_view key, const json::value& v, sampling_params& p, dependent_fields& d) {
  if (key == "max_tokens") d.max_tokens = r.i32(key, v);
  else if (key == "max_completion_tokens") d.max_completion_tokens = r.i32(key, v);
  else if (key == "top_logprobs") d.top_logprobs = r.i32(key, v);
  else if (key == "logprobs") read_logprobs(r, key, v, d);
  else if (key == "seed") read_seed(r, key, v, p);
  else if (key == "stop") read_stop(r, key, v, p);
  else if (key == "stop_token_ids") read_stop_token_ids(r, key, v, p);
  else if (key == "logit_bias") read_logit_bias(r, key, v, p);
  else if (key == "ignore_eos" || key == "speculative_decoding") {
    if (!v.is_bool()) r.type_error(key, "a boolean", v);
    else (key == "ignore_eos" ? p.ignore_eos : p.speculative) = v.get_bool();
  } else if (key == "top_k" || key == "min_tokens") {
    if (auto i = r.i32(key, v)) (key == "top_k" ? p.top_k : p.min_tokens) = *i;
  } else if (auto f = r.number(key, v)) {
    // The float fields: temperature, top_p, min_p and the three penalties.
    if (key == "temperature") p.temperature = *f;
    else if (key == "top_p") p.top_p = *f;
    else if (key == "min_p") p.min_p = *f;
    else if (key == "repetition_penalty") p.repetition_penalty = *f;
    else if (key == "presence_penalty") p.presence_penalty = *f;
    else if (key == "frequency_penalty") p.frequency_penalty = *f;
  }
}

// max_completion_tokens over max_tokens; logprobs / top_logprobs combinations.
void resolve_dependent(reader& r, const dependent_fields& d, sampling_params& p) {
  if (d.max_completion_tokens) p.max_tokens = d.max_completion_tokens;
  else if (d.max_tokens) p.max_tokens = d.max_tokens;
  if (d.logprobs && d.logprobs->is_bool()) {
    if (d.logprobs->get_bool()) {
      p.logprobs = d.top_logprobs.value_or(0);
    } else if (d.top_logprobs && *d.top_logprobs > 0) {
      r.fail("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
    } else {
      p.logprobs.reset();
    }
  } else if (d.logprobs) {
    if (d.top_logprobs) {
      r.fail("top_logprobs", "'top_logprobs' cannot be combined with an integer 'logprobs'");
    } else {
      int64_t i = 0;
      json_get_int(*d.logprobs, k_i32_min, k_i32_max, i);
      p.logprobs = static_cast<int32_t>(i);
    }
  } else if (d.top_logprobs) {
    p.logprobs = d.top_logprobs;
  }
}

}  // namespace

std::string parse_sampling_json(const json::object& o, sampling_params& p, std::string* bad_field) {
  reader r;
  dependent_fields d;
  for (const auto& kv : o) {
    if (r.failed()) break;
    const std::string_view key = kv.key();
    if (!is_sampling_field(key)) continue;
    if (kv.value().is_null()) continue;  // explicit null means "default", as the OpenAI SDK sends it
    read_field(r, key, kv.value(), p, d);
  }
  if (!r.failed()) resolve_dependent(r, d, p);
  if (bad_field) *bad_field = r.field;
  return r.message;
}

}  // namespace spate
