#include "server/sampling_json.h"

#include <array>
#include <cmath>
#include <limits>

namespace spate {
namespace {

namespace json = boost::json;

constexpr std::array<std::string_view, 17> k_fields = {
    "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
    "repetition_penalty", "presence_penalty", "frequency_penalty", "seed", "stop", "stop_token_ids",
    "ignore_eos", "min_tokens", "logit_bias", "logprobs", "top_logprobs"};

bool get_number(const json::value& v, double& out) {
  if (v.is_double()) out = v.as_double();
  else if (v.is_int64()) out = static_cast<double>(v.as_int64());
  else if (v.is_uint64()) out = static_cast<double>(v.as_uint64());
  else return false;
  return std::isfinite(out);
}

// Integers, also accepting floats with an integral value (2.0), as Python clients send them.
bool get_integer(const json::value& v, int64_t& out) {
  if (v.is_int64()) { out = v.as_int64(); return true; }
  if (v.is_uint64()) {
    if (v.as_uint64() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    out = static_cast<int64_t>(v.as_uint64());
    return true;
  }
  if (v.is_double()) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9.0e15) return false;
    out = static_cast<int64_t>(d);
    return true;
  }
  return false;
}

std::string type_err(std::string_view key, const char* want) {
  return "'" + std::string(key) + "' must be " + want;
}

int32_t clamp_i32(int64_t v) {
  if (v > std::numeric_limits<int32_t>::max()) return std::numeric_limits<int32_t>::max();
  if (v < std::numeric_limits<int32_t>::min()) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(v);
}

}  // namespace

bool is_sampling_field(std::string_view key) {
  for (auto f : k_fields) if (f == key) return true;
  return false;
}

std::string parse_sampling_json(const json::object& o, sampling_params& p) {
  for (const auto& kv : o) {
    const std::string_view key = kv.key();
    const json::value& v = kv.value();
    if (!is_sampling_field(key)) continue;
    if (v.is_null()) continue;  // explicit null means "default", as the OpenAI SDK sends it
    double d = 0;
    int64_t i = 0;
    if (key == "max_tokens" || key == "max_completion_tokens") {
      if (!get_integer(v, i)) return type_err(key, "an integer");
      p.max_tokens = clamp_i32(i);
    } else if (key == "temperature") {
      if (!get_number(v, d)) return type_err(key, "a number");
      p.temperature = static_cast<float>(d);
    } else if (key == "top_p") {
      if (!get_number(v, d)) return type_err(key, "a number");
      p.top_p = static_cast<float>(d);
    } else if (key == "top_k") {
      if (!get_integer(v, i)) return type_err(key, "an integer");
      p.top_k = clamp_i32(i);
    } else if (key == "min_p") {
      if (!get_number(v, d)) return type_err(key, "a number");
      p.min_p = static_cast<float>(d);
    } else if (key == "repetition_penalty") {
      if (!get_number(v, d)) return type_err(key, "a number");
      p.repetition_penalty = static_cast<float>(d);
    } else if (key == "presence_penalty") {
      if (!get_number(v, d)) return type_err(key, "a number");
      p.presence_penalty = static_cast<float>(d);
    } else if (key == "frequency_penalty") {
      if (!get_number(v, d)) return type_err(key, "a number");
      p.frequency_penalty = static_cast<float>(d);
    } else if (key == "seed") {
      if (!get_integer(v, i)) return type_err(key, "an integer");
      p.seed = static_cast<uint64_t>(i);
    } else if (key == "stop") {
      p.stop.clear();
      if (v.is_string()) {
        p.stop.emplace_back(v.as_string());
      } else if (v.is_array()) {
        for (const auto& e : v.as_array()) {
          if (!e.is_string()) return type_err(key, "a string or a list of strings");
          p.stop.emplace_back(e.as_string());
        }
      } else {
        return type_err(key, "a string or a list of strings");
      }
      for (const auto& s : p.stop) if (s.empty()) return "'stop' must not contain empty strings";
    } else if (key == "stop_token_ids") {
      if (!v.is_array()) return type_err(key, "a list of integers");
      p.stop_token_ids.clear();
      for (const auto& e : v.as_array()) {
        if (!get_integer(e, i)) return type_err(key, "a list of integers");
        p.stop_token_ids.push_back(clamp_i32(i));
      }
    } else if (key == "ignore_eos") {
      if (!v.is_bool()) return type_err(key, "a boolean");
      p.ignore_eos = v.as_bool();
    } else if (key == "min_tokens") {
      if (!get_integer(v, i)) return type_err(key, "an integer");
      p.min_tokens = clamp_i32(i);
    } else if (key == "logit_bias") {
      if (!v.is_object()) return type_err(key, "an object mapping token ids to biases");
      p.logit_bias.clear();
      for (const auto& b : v.as_object()) {
        const std::string k(b.key());
        char* end = nullptr;
        const long long id = std::strtoll(k.c_str(), &end, 10);
        if (k.empty() || *end != '\0') return "'logit_bias' keys must be token ids, got '" + k + "'";
        if (!get_number(b.value(), d)) return "'logit_bias' values must be numbers";
        p.logit_bias.emplace_back(clamp_i32(id), static_cast<float>(d));
      }
    } else if (key == "logprobs") {
      // Completions: an integer count; chat: a boolean (the count is top_logprobs).
      if (v.is_bool()) {
        if (v.as_bool() && !p.logprobs) p.logprobs = 0;
        if (!v.as_bool()) p.logprobs.reset();
      } else if (get_integer(v, i)) {
        p.logprobs = clamp_i32(i);
      } else {
        return type_err(key, "a boolean or an integer");
      }
    } else if (key == "top_logprobs") {
      if (!get_integer(v, i)) return type_err(key, "an integer");
      p.logprobs = clamp_i32(i);
    }
  }
  return "";
}

}  // namespace spate
