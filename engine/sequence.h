// One request's generation state: its tokens, sampler, stop handling and
// streaming detokenizer. Its KV state (block table, cached positions) lives in
// the scheduler's sched_seq. Owned and touched only by the engine thread once
// submitted.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/engine_api.h"
#include "engine/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace spate {

class sequence {
 public:
  // Preconditions: params validated; prompt non-empty; max_tokens >= 1.
  sequence(int64_t id, std::vector<int32_t> prompt, const sampling_params& params, int32_t max_tokens,
           uint64_t default_seed, const tokenizer& tok);

  int64_t id() const { return id_; }
  // All tokens, prompt then generated, in one contiguous vector.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  std::span<const int32_t> prompt() const { return {tokens_.data(), static_cast<size_t>(n_prompt_)}; }
  std::span<const int32_t> generated() const { return std::span<const int32_t>(tokens_).subspan(static_cast<size_t>(n_prompt_)); }
  int32_t n_prompt() const { return n_prompt_; }
  int32_t n_generated() const { return n_tokens() - n_prompt_; }
  const sampling_params& params() const { return params_; }
  int32_t n_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  bool finished() const { return finish_ != finish_reason::none; }
  finish_reason finish() const { return finish_; }
  const std::string& text() const { return text_; }

  // Samples the next token from this step's logits and appends it. Returns the
  // text delta that is now safe to emit (UTF-8 complete, no partial stop string).
  sample_result sample_next(std::span<float> logits, std::string& delta);
  void finish_with(finish_reason r) { finish_ = r; }
  // The stop string (index into params.stop) that ended the output, if one did.
  std::optional<size_t> stop_index() const { return stops_.stop_index(); }

 private:
  // Applies the constraint's mask; end-of-generation stays possible where it can end.
  void constrain(std::span<float> logits);
  // Appends a token and updates finish state and text; returns the emitted delta.
  std::string append(int32_t token);

  int64_t id_;
  std::vector<int32_t> tokens_;
  int32_t n_prompt_;
  sampling_params params_;
  int32_t max_tokens_;
  const tokenizer& tok_;
  sampler sampler_;
  stop_matcher stops_;
  std::unique_ptr<token_constraint> constraint_;  // null when unconstrained
  std::vector<float> eog_logits_;                 // scratch: eog logits across the mask
  incremental_decoder detok_;
  eos_set eog_;
  std::string text_;
  finish_reason finish_ = finish_reason::none;
};

}  // namespace spate
