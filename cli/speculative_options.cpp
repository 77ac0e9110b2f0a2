#include "cli/speculative_options.h"

#include <boost/json.hpp>

namespace spate::cli {

namespace json = boost::json;

namespace {

constexpr const char* k_flag = "--speculative-config";

std::string bad(const std::string& what) { return std::string(k_flag) + ": " + what; }

// Reads an integer key into out (untouched when absent); "" or the error.
std::string read_int(const json::object& o, const char* key, int32_t& out, bool& present) {
  present = false;
  const json::value* v = o.if_contains(key);
  if (!v) return "";
  present = true;
  if (!v->is_int64() && !v->is_uint64()) return bad(std::string("\"") + key + "\" must be an integer");
  const auto n = v->is_int64() ? v->as_int64() : static_cast<int64_t>(std::min<uint64_t>(v->as_uint64(), INT64_MAX));
  if (n < -1000000 || n > 1000000) return bad(std::string("\"") + key + "\" is out of range: " + std::to_string(n));
  out = static_cast<int32_t>(n);
  return "";
}

}  // namespace

std::string parse_speculative_config(const std::string& text, speculative_config& out, std::string& draft_model_path) {
  out = speculative_config{};
  draft_model_path.clear();
  if (text.empty()) return "";
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  if (ec) return bad("not valid JSON (" + ec.message() + ")");
  if (!doc.is_object()) return bad("must be a JSON object");
  const json::object& o = doc.as_object();
  static constexpr const char* k_keys[] = {"method", "model", "num_speculative_tokens", "prompt_lookup_min",
                                           "prompt_lookup_max", "disable_by_batch_size", "adaptive_k"};
  for (const auto& kv : o) {
    bool known = false;
    for (const char* k : k_keys) known = known || kv.key() == k;
    if (!known) return bad("unknown key \"" + std::string(kv.key()) + "\"");
  }
  std::string method;
  if (const json::value* m = o.if_contains("method")) {
    if (!m->is_string()) return bad("\"method\" must be a string");
    method = std::string(m->as_string());
  }
  if (const json::value* m = o.if_contains("model")) {
    if (!m->is_string() || m->as_string().empty()) return bad("\"model\" must be a non-empty path");
    draft_model_path = std::string(m->as_string());
  }
  if (method.empty()) method = draft_model_path.empty() ? "" : "draft_model";
  if (method == "ngram") {
    if (!draft_model_path.empty()) return bad("method \"ngram\" takes no \"model\"");
    out.kind = speculative_config::method::ngram;
  } else if (method == "draft_model") {
    if (draft_model_path.empty()) return bad("method \"draft_model\" needs \"model\": the draft GGUF's path");
    out.kind = speculative_config::method::draft_model;
  } else if (method.empty()) {
    return bad("needs \"method\": \"ngram\", or \"model\": a draft GGUF's path");
  } else {
    return bad("unsupported method \"" + method + "\" (supported: ngram, draft_model)");
  }
  bool has_k = false, has_min = false, has_max = false, has_disable = false;
  for (auto [key, field, present] : {std::tuple{"num_speculative_tokens", &out.num_speculative_tokens, &has_k},
                                     {"prompt_lookup_min", &out.prompt_lookup_min, &has_min},
                                     {"prompt_lookup_max", &out.prompt_lookup_max, &has_max},
                                     {"disable_by_batch_size", &out.disable_by_batch_size, &has_disable}}) {
    if (auto err = read_int(o, key, *field, *present); !err.empty()) return err;
  }
  out.adaptive_k = k_default_adaptive_k;
  if (const json::value* a = o.if_contains("adaptive_k")) {
    if (!a->is_bool()) return bad("\"adaptive_k\" must be true or false");
    out.adaptive_k = a->as_bool();
  }
  if (!has_k) return bad("needs \"num_speculative_tokens\"");
  if (out.num_speculative_tokens < 1 || out.num_speculative_tokens > k_max_speculative_tokens) {
    return bad("\"num_speculative_tokens\" must be in [1, " + std::to_string(k_max_speculative_tokens) + "], got " +
               std::to_string(out.num_speculative_tokens));
  }
  if (out.kind != speculative_config::method::ngram && (has_min || has_max)) {
    return bad("\"prompt_lookup_min\" and \"prompt_lookup_max\" apply to method \"ngram\" only");
  }
  if (has_min && !has_max) out.prompt_lookup_max = out.prompt_lookup_min;
  if (has_max && !has_min) out.prompt_lookup_min = out.prompt_lookup_max;
  if (out.prompt_lookup_min < 1) return bad("\"prompt_lookup_min\" must be >= 1, got " + std::to_string(out.prompt_lookup_min));
  if (out.prompt_lookup_max < out.prompt_lookup_min) {
    return bad("\"prompt_lookup_max\" (" + std::to_string(out.prompt_lookup_max) + ") must be >= \"prompt_lookup_min\" (" +
               std::to_string(out.prompt_lookup_min) + ")");
  }
  if (!has_disable) {
    out.disable_by_batch_size = out.kind == speculative_config::method::ngram ? k_default_disable_by_batch_size_ngram
                                                                              : k_default_disable_by_batch_size_draft;
  }
  if (out.disable_by_batch_size < 0) {
    return bad("\"disable_by_batch_size\" must be >= 0, got " + std::to_string(out.disable_by_batch_size));
  }
  return "";
}

}  // namespace spate::cli
