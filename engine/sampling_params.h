// Per-request sampling parameters (the OpenAI / vLLM field set) and their validation.
//
// Contract: the server fills a sampling_params from the request (absent fields keep the
// defaults below) and calls validate() with the model's vocabulary size before the request
// is admitted; the sampler and stop matcher assume a validated struct.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spate {

struct sampling_params {
  // Softmax temperature, [0, 2]. 0 (or anything below 1e-5, as in vLLM) means greedy argmax.
  float temperature = 1.0f;
  // Keep only the k most likely tokens. -1 and 0 both disable it.
  int32_t top_k = -1;
  // Nucleus sampling: keep the smallest most-likely set with cumulative probability >= top_p. (0, 1].
  float top_p = 1.0f;
  // Drop tokens whose probability is below min_p * (probability of the most likely token). [0, 1].
  float min_p = 0.0f;
  // Applied to tokens seen in prompt or output: positive logits divided, negative multiplied. (0, 2].
  float repetition_penalty = 1.0f;
  // Subtracted once from the logit of every token that occurs in the generated output. [-2, 2].
  float presence_penalty = 0.0f;
  // Subtracted per occurrence in the generated output. [-2, 2].
  float frequency_penalty = 0.0f;
  // RNG seed; when empty the engine supplies a per-request seed.
  std::optional<uint64_t> seed;
  // Maximum number of generated tokens (>= 1); empty means "until the context is full".
  std::optional<int32_t> max_tokens;
  // End-of-generation tokens and stop_token_ids are masked until this many tokens were generated.
  int32_t min_tokens = 0;
  // Stop strings: generation ends when the output text contains one; the stop string itself and
  // everything after it are not returned. Must be non-empty strings.
  std::vector<std::string> stop;
  // Additional token ids that end generation (the token itself is not part of the text).
  std::vector<int32_t> stop_token_ids;
  // Keep generating past the model's end-of-generation tokens (stop/stop_token_ids still apply).
  bool ignore_eos = false;
  // Added to the raw logits of the given token ids, each value in [-100, 100]. Duplicate ids add up.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Number of top alternatives to return with each token, [0, 20]; empty means no logprobs at all.
  std::optional<int32_t> logprobs;
};

// Upper bound on sampling_params::logprobs (OpenAI's limit).
inline constexpr int32_t max_top_logprobs = 20;

// Returns "" when p is acceptable for a model with n_vocab tokens, otherwise a message that names
// the first offending field, its allowed range and the value given,
// e.g. "temperature must be in [0, 2], got -1". NaN is rejected for every float field.
std::string validate(const sampling_params& p, int32_t n_vocab);

}  // namespace spate
