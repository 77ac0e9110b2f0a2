#include "engine/engine_api.h"

#include <cstdio>

namespace spate {

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string num(int64_t v) { return std::to_string(v); }

// True when lo <= v <= hi (false for NaN).
bool in_closed(double v, double lo, double hi) { return v >= lo && v <= hi; }

}  // namespace

std::string validate(const sampling_params& p, int32_t n_vocab) {
  if (!in_closed(p.temperature, 0.0, 2.0)) return "temperature must be in [0, 2], got " + num(double(p.temperature));
  if (p.top_k < -1)
    return "top_k must be -1 or 0 (disabled) or at least 1, got " + num(int64_t(p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return "top_p must be in (0, 1], got " + num(double(p.top_p));
  if (!in_closed(p.min_p, 0.0, 1.0)) return "min_p must be in [0, 1], got " + num(double(p.min_p));
  if (!(p.repetition_penalty > 0.0f && p.repetition_penalty <= 2.0f))
    return "repetition_penalty must be in (0, 2], got " + num(double(p.repetition_penalty));
  if (!in_closed(p.presence_penalty, -2.0, 2.0))
    return "presence_penalty must be in [-2, 2], got " + num(double(p.presence_penalty));
  if (!in_closed(p.frequency_penalty, -2.0, 2.0))
    return "frequency_penalty must be in [-2, 2], got " + num(double(p.frequency_penalty));
  if (p.max_tokens && *p.max_tokens < 1) return "max_tokens must be at least 1, got " + num(int64_t(*p.max_tokens));
  if (p.min_tokens < 0) return "min_tokens must be at least 0, got " + num(int64_t(p.min_tokens));
  if (p.max_tokens && p.min_tokens > *p.max_tokens)
    return "min_tokens must be at most max_tokens (" + num(int64_t(*p.max_tokens)) + "), got " +
           num(int64_t(p.min_tokens));
  for (size_t i = 0; i < p.stop.size(); ++i)
    if (p.stop[i].empty()) return "stop must not contain an empty string (stop[" + num(int64_t(i)) + "])";
  for (int32_t id : p.stop_token_ids)
    if (id < 0 || id >= n_vocab)
      return "stop_token_ids entries must be in [0, " + num(int64_t(n_vocab) - 1) + "], got " + num(int64_t(id));
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= n_vocab)
      return "logit_bias token ids must be in [0, " + num(int64_t(n_vocab) - 1) + "], got " + num(int64_t(id));
    if (!in_closed(bias, -100.0, 100.0))
      return "logit_bias values must be in [-100, 100], got " + num(double(bias)) + " for token " + num(int64_t(id));
  }
  if (!(p.typical_p > 0.0f && p.typical_p <= 1.0f)) return "typical_p must be in (0, 1], got " + num(double(p.typical_p));
  if (p.watermark && !(p.watermark_gamma > 0.0 && p.watermark_gamma < 1.0))
    return "watermark_gamma must be in (0, 1), got " + num(p.watermark_gamma);
  if (p.watermark && !in_closed(p.watermark_delta, 0.0, 100.0))
    return "watermark_delta must be in [0, 100], got " + num(double(p.watermark_delta));
  if (p.logprobs && (*p.logprobs < 0 || *p.logprobs > max_top_logprobs))
    return "logprobs must be in [0, " + num(int64_t(max_top_logprobs)) + "], got " + num(int64_t(*p.logprobs));
  return "";
}

}  // namespace spate
