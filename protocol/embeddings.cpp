#include "protocol/embeddings.h"

#include <boost/json.hpp>
#include <cstring>

#include "protocol/request_errors.h"
#include "protocol/sampling_json.h"

namespace spate::api {
namespace {

namespace json = boost::json;
using error_opt = std::optional<api_error>;

std::string at(std::string_view base, size_t i) { return std::string(base) + "[" + std::to_string(i) + "]"; }

// A list of token ids at param; each in [0, 2^31) (the model's bound is checked later).
error_opt token_list(const json::array& a, const std::string& param, std::vector<int32_t>& out) {
  if (a.empty()) return bad(param, "'" + param + "' must not be empty");
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t id = 0;
    const auto st = json_get_int(a[i], 0, std::numeric_limits<int32_t>::max(), id);
    if (st == json_int_status::not_integer) return type_error(at(param, i), "a token id (an integer)", a[i]);
    if (st != json_int_status::ok) return bad(at(param, i), at(param, i) + " must be a token id >= 0, got " + describe_json(a[i]));
    out.push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

error_opt parse_input(const json::value& in, embeddings_request& out) {
  constexpr std::string_view want = "a string, a list of strings, a list of token ids or a list of such lists";
  if (in.is_string()) {
    if (in.get_string().empty()) return bad("input", "'input' must not be an empty string");
    out.texts.emplace_back(in.get_string());
    return std::nullopt;
  }
  if (!in.is_array()) return type_error("input", want, in);
  const json::array& a = in.get_array();
  if (a.empty()) return bad("input", "'input' must not be an empty list");
  if (a[0].is_number()) return token_list(a, "input", out.token_inputs.emplace_back());
  if (a.size() > k_max_embedding_inputs) {
    return bad("input", "'input' holds " + std::to_string(a.size()) + " inputs; at most " + std::to_string(k_max_embedding_inputs));
  }
  const bool strings = a[0].is_string();
  for (size_t i = 0; i < a.size(); ++i) {
    if (strings) {
      if (!a[i].is_string()) return type_error(at("input", i), "a string (like input[0])", a[i]);
      if (a[i].get_string().empty()) return bad(at("input", i), "'" + at("input", i) + "' must not be an empty string");
      out.texts.emplace_back(a[i].get_string());
    } else {
      if (!a[i].is_array()) return type_error(at("input", i), "a list of token ids (like input[0])", a[i]);
      if (auto e = token_list(a[i].get_array(), at("input", i), out.token_inputs.emplace_back())) return e;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<api_error> parse_embeddings(std::string_view body, embeddings_request& out) {
  out = embeddings_request{};
  json::object o;
  if (auto e = parse_body_object(body, o)) return e;
  for (const auto& kv : o) {
    const std::string_view key = kv.key();
    const json::value& v = kv.value();
    if (key == "user" || (v.is_null() && key != "input")) continue;
    if (key == "model") {
      if (!v.is_string()) return type_error("model", "a string", v);
      out.model = std::string(v.get_string());
    } else if (key == "encoding_format") {
      if (!v.is_string() || (v.get_string() != "float" && v.get_string() != "base64")) {
        return bad("encoding_format", "'encoding_format' must be \"float\" or \"base64\", got " + describe_json(v));
      }
      out.base64 = v.get_string() == "base64";
    } else if (key == "dimensions") {
      int64_t d = 0;
      if (json_get_int(v, 1, 1 << 20, d) != json_int_status::ok) {
        return bad("dimensions", "'dimensions' must be a positive integer, got " + describe_json(v));
      }
      out.dimensions = static_cast<int32_t>(d);
    } else if (key != "input") {
      out.unknown_fields.emplace_back(key);
    }
  }
  const json::value* in = o.if_contains("input");
  if (!in || in->is_null()) return bad("input", "'input' is required");
  return parse_input(*in, out);
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char k_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  const auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int s = 18; s >= 0; s -= 6) out.push_back(k_alphabet[(v >> s) & 63]);
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    const uint32_t v = byte(i) << 16 | (rest == 2 ? byte(i + 1) << 8 : 0);
    out.push_back(k_alphabet[(v >> 18) & 63]);
    out.push_back(k_alphabet[(v >> 12) & 63]);
    out.push_back(rest == 2 ? k_alphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string format_embeddings(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model,
                              int64_t prompt_tokens) {
  json::array data;
  data.reserve(vectors.size());
  for (size_t i = 0; i < vectors.size(); ++i) {
    json::object item;
    item["object"] = "embedding";
    item["index"] = static_cast<int64_t>(i);
    if (base64) {
      // Little-endian float32, as OpenAI's SDK decodes it (numpy.frombuffer(dtype="float32")).
      std::string raw(vectors[i].size() * sizeof(float), '\0');
      std::memcpy(raw.data(), vectors[i].data(), raw.size());
      item["embedding"] = base64_encode(raw);
    } else {
      json::array v;
      v.reserve(vectors[i].size());
      for (float x : vectors[i]) v.push_back(static_cast<double>(x));
      item["embedding"] = std::move(v);
    }
    data.push_back(std::move(item));
  }
  json::object out;
  out["object"] = "list";
  out["data"] = std::move(data);
  out["model"] = model;
  out["usage"] = {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}};
  return json::serialize(out);
}

}  // namespace spate::api
