// Runs one batched forward pass of a decoder over the paged KV cache on the
// thread-pool executor: it flattens the batch into rows, sizes the
// workspaces, and calls the architecture's forward (model/arch/, on the
// shared blocks of model/layers.h), which reads as the model's block diagram.
//
// A batch mixes sequences that prefill many tokens with sequences that decode
// one. Every per-row computation (norms, matmuls, RoPE, attention) depends only
// on that row's own data, so a sequence's logits are bitwise identical whatever
// else shares the step.
//
// Thread-safety: not thread-safe; only the engine thread calls forward(). The
// runner writes the KV slots of the positions it processes.
#pragma once

#include <cstdint>
#include <vector>

#include "model/arch/arch.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/layers.h"
#include "model/model_weights.h"
#include "model/projection.h"
#include "model/thread_pool.h"
#include "model/lora.h"

namespace spate {

class model_runner {
 public:
  // Throws std::invalid_argument when c.arch is not a registered architecture.
  model_runner(const model_config& c, const model_weights& w, kv_cache& kv, thread_pool& pool);

  // Grows the workspaces for steps of up to max_tokens tokens, max_logit_rows
  // logit rows and contexts of up to max_ctx positions. Steps within these
  // bounds allocate nothing.
  void reserve(int64_t max_tokens, int64_t max_logit_rows, int32_t max_ctx);

  // Runs the batch. logits receives n_logit_rows() rows of n_vocab floats, in
  // batch order (for each sequence, its last n_logits tokens in order);
  // hidden receives n_hidden_rows() rows of n_embd floats (the final-normed
  // hidden states of the hidden sequences' tokens, in batch order) and may be
  // null when there are none.
  // Throws std::invalid_argument on an out-of-range token, a block table that
  // does not cover the positions, a block id outside the cache, or hidden
  // rows without a hidden buffer.
  void forward(const forward_batch& batch, float* logits, float* hidden = nullptr);

  // Puts adapter into LoRA slot `slot` (null empties it); forward_seq::adapter
  // names a slot. Not during forward().
  void set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter);

 private:
  void validate(const forward_batch& batch) const;
  // Sizes moe_ for steps of max_tokens tokens; returns the activation bytes its projections need.
  size_t reserve_moe(int64_t max_tokens);
  bool separate_swa_rope() const { return cfg_.n_swa > 0 && cfg_.rope_freq_base_swa != cfg_.rope_freq_base; }

  const model_config& cfg_;
  const model_weights& w_;
  kv_cache& kv_;
  thread_pool& pool_;
  const arch_def& arch_;
  projector proj_;  // owns the quantized activations
  lora_runner lora_;
  std::vector<std::shared_ptr<const lora_adapter>> adapters_;  // LoRA slots
  std::vector<int32_t> seq_of_row_;

  // Workspaces, [T x dim] row-major.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, tmp_, gate_, up_;
  std::vector<float> rope_;         // per token: n_rot floats of rotary cos | sin (kernels::rope_angles)
  std::vector<float> rope_swa_;     // the same for the sliding layers' RoPE base, when it differs
  moe_workspace moe_;               // the MoE FFN's buffers (cfg_.is_moe())
  std::vector<float> scratch_;      // attention scratch, per thread
  int64_t scratch_per_thread_ = 0;
  std::vector<token_ref> tokens_;   // flattened token -> (seq, pos)
  std::vector<int64_t> logit_rows_; // flattened token indices whose logits are returned
  std::vector<int64_t> hidden_rows_; // flattened token indices whose hidden states are returned
  int64_t cap_tokens_ = 0;
  int32_t cap_ctx_ = 0;
};

}  // namespace spate
