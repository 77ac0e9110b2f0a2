// Token sampling: logit processing (bias, min_tokens, penalties, temperature, top-k/top-p/min-p)
// and a seeded, platform-independent random draw.
//
// Contract: one sampler per request, used by one thread at a time. Given the same parameters,
// seed, logits and history, sample() returns the same result on every platform: the RNG and the
// draw are our own; every truncation keeps a prefix of one strict total order (processed logit
// descending, then token id ascending), so the kept set does not depend on how std::nth_element
// arranges things; probability masses used for the top-p cut and the draw are exact integer
// sums (probability relative to the best token in units of 2^-42), so they do not depend on
// summation order; and the draw walks the kept tokens in id order. Only libm's expf could differ
// between C libraries, in the last ulp.
//
// Cost per sampled step is O(n_vocab) (a few linear passes; top-k and top-p use selection, never
// a full sort). Tokens whose probability is below 2^-42 of the best token's are never sampled.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/engine_api.h"

namespace spate {

// The model's end-of-generation token ids (EOS, EOT, <|im_end|>, ...) as provided by the
// tokenizer / model metadata. Order does not matter; ids outside the vocabulary are ignored.
struct eos_set {
  std::vector<int32_t> ids;
  bool contains(int32_t id) const;
};

// Small deterministic PRNG: xoshiro256** seeded through splitmix64. Same seed => same stream.
class rng {
 public:
  explicit rng(uint64_t seed);
  uint64_t next_u64();
  // Uniform in [0, 1) with 53 random bits: (next_u64() >> 11) * 2^-53.
  double next_double();

 private:
  uint64_t s_[4];
};

struct sample_result {
  int32_t token = 0;
  // Log-probability of token under the processed, untruncated distribution (see sampler).
  // Computed only when sampling_params::logprobs is set (0 otherwise).
  float logprob = 0.0f;
  // The n = sampling_params::logprobs most likely tokens under the same distribution, best
  // first (ties: lower id first). Empty when logprobs were not requested.
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

// The watermark's green list (Kirchenbauer et al., "A Watermark for Large Language Models", 2023;
// TGI's watermark parameter): whether `token` is green after `prev`, for a green fraction gamma.
// Our own keyed hash, no RNG state: with mix(z) the splitmix64 finalizer
//   mix(z) = z += 0x9e3779b97f4a7c15; z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9;
//            z = (z ^ z >> 27) * 0x94d049bb133111eb; z ^ z >> 31      (64-bit wrap-around),
//   key = mix(uint64(prev) ^ 0x5350415445574d4b), h = mix(key ^ uint64(token)),
// the token is green iff (h >> 11) < uint64(gamma * 2^53). Each token is green independently with
// probability gamma (the list's size is gamma * n_vocab in expectation, not exactly).
// scripts/watermark_detect.py computes the same. prev is the token before: the last generated
// one, or the prompt's last for the first. Pure; any thread.
uint64_t watermark_hash(int32_t prev, int32_t token);
bool watermark_green(int32_t prev, int32_t token, double gamma);

// Threshold below which a temperature counts as greedy (as vLLM's _SAMPLING_EPS).
inline constexpr float greedy_temperature_eps = 1e-5f;

class sampler {
 public:
  // p must have passed validate(). default_seed is used when p.seed is empty (the engine
  // provides a per-request value so concurrent requests do not share a stream).
  sampler(const sampling_params& p, uint64_t default_seed);

  // Picks the next token. logits holds n_vocab floats for this step and is modified in place
  // (the processed logits are left there). prompt / generated are the request's prompt tokens
  // and the tokens generated so far; generated.size() is the count used for min_tokens.
  //
  // Pipeline (vLLM order):
  //  1. NaN logits become -inf;
  //  2. logit_bias added; with watermark, watermark_delta added to the green tokens' logits
  //     (watermark_green with the previous token: generated.back(), else prompt.back());
  //  3. while generated.size() < min_tokens: stop_token_ids and (unless ignore_eos) the eog ids
  //     are set to -inf;
  //  4. repetition_penalty on tokens in prompt or generated (positive logit / penalty, negative
  //     logit * penalty), then frequency_penalty * count and presence_penalty subtracted for
  //     tokens in generated;
  //  5. temperature < greedy_temperature_eps: argmax, ties to the lowest id, no RNG draw;
  //     otherwise logits /= temperature, then top-k, top-p (smallest prefix of the top-k set,
  //     in the total order, holding >= top_p of its mass), typical-p (tokens ordered by
  //     |-log p - H| ascending, H the entropy, ties to the lower id: the smallest prefix holding
  //     >= typical_p of the whole mass), min-p (keep exp(l - l_max) >= min_p,
  //     i.e. relative to the most likely token, so its order against top-k/top-p does not
  //     matter), and one 64-bit draw from the request's RNG over the kept tokens, which are
  //     walked in id order.
  //
  // Logprobs are the log-softmax of the logits after step 4 and (when sampling) temperature
  // scaling, before top-k/top-p/min-p truncation: the distribution the model "offered", not
  // the truncated one. In greedy mode no temperature is applied (as with temperature 1).
  // If every logit is -inf the lowest id is returned with logprob -inf.
  sample_result sample(std::span<float> logits, std::span<const int32_t> prompt,
                       std::span<const int32_t> generated, const eos_set& eog);

  // Index of the first maximum; 0 when all are -inf. Precondition: no NaN.
  // Vectorized; any thread.
  static int32_t argmax(std::span<const float> logits);

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt,
                       std::span<const int32_t> generated);
  // log(sum(exp(logits))) computed stably; -inf when all are -inf.
  static double log_sum_exp(std::span<const float> logits, float max);
  void fill_top_logprobs(std::span<const float> logits, double lse, sample_result& out) const;
  // Last kept token (in the total order) after top-k and then top-p: the k-th best token, or
  // the last of the smallest prefix of the top-k set holding top_p of its probability mass.
  int32_t truncation_cut(std::span<const float> logits, float max);
  // Finds, among order_[0, n), the token at which the running weight (in total order) first
  // reaches need; requires 1 <= need <= total weight of order_[0, n).
  int32_t weighted_select(std::span<const float> logits, size_t n, uint64_t need);
  // Marks typical_keep_ for typical_p, from probs_ (relative to the best token, summing to mass).
  void mark_typical(double mass);

  sampling_params params_;
  rng rng_;
  // Scratch reused across steps (sized to n_vocab on first use; seen_/counts_ are all zero
  // between calls). probs_ holds exp(logit - max) of the current step.
  std::vector<float> probs_;
  std::vector<int32_t> order_;
  std::vector<uint8_t> bucket_;
  std::vector<uint8_t> seen_;
  std::vector<int32_t> counts_;
  std::vector<int32_t> touched_;
  std::vector<uint8_t> typical_keep_;
};

}  // namespace spate
