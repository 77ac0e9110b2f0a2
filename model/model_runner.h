// Runs one batched forward pass of a llama, qwen2, qwen3 or gemma3 decoder
// over the paged KV cache on the thread-pool executor.
//
// Per layer (gemma3's extra steps in brackets; qk-norm also qwen3):
//   x += [post_attn_norm] Wo . attention(rope([qk_norm] Wq/Wk/Wv . attn_norm(x)))
//   x += [post_ffn_norm] W_down . (act(W_gate . ffn_norm(x)) * W_up . ffn_norm(x))
// act is SiLU, or GELU-tanh for gemma3; a sliding layer attends to the last
// n_swa positions only and uses its own RoPE base.
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
#include <initializer_list>
#include <vector>

#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/thread_pool.h"

namespace spate {

// Per-row work fused into the runner's quantize loops (norms, residual adds,
// the FFN activation): fn(ctx, r0, r1) runs on rows [r0, r1) right before the
// task quantizes them, so those ops cost no parallel loop of their own. It must
// only read and write rows [r0, r1) of the step's row-major buffers.
struct row_prologue {
  void (*fn)(void* ctx, int64_t r0, int64_t r1) = nullptr;
  void* ctx = nullptr;
};

class model_runner {
 public:
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

 private:
  struct token_ref {
    int32_t seq;
    int32_t pos;
  };
  void validate(const forward_batch& batch) const;
  // y[T x n_out] = act x W^T for several weights sharing one activation buffer.
  struct mm_job {
    const kernels::packed_weight* w;
    float* y;
    int64_t ldy;
  };
  template <class F>
  static row_prologue prologue_of(F& f) {
    return {[](void* c, int64_t r0, int64_t r1) { (*static_cast<F*>(c))(r0, r1); }, &f};
  }
  void quantize(const kernels::packed_weight& w, const float* x, int64_t ldx, int64_t n_rows, row_prologue pro = {});
  void matmuls(const mm_job* jobs, int n_jobs, int64_t n_rows);
  // Tasks of one matmul loop, a multiple of the thread count. Steps of at most
  // k_stream_max_rows rows stream the weights from memory: every task start
  // costs a claim and a cold prefetch stream, so a task reads at least
  // k_min_stream_task_bytes of weights (SmolLM2 tg128 on Zen 4, interleaved
  // runs: 16 tasks per matmul 271 tok/s, 4 per thread 295, 2 per thread 314).
  // That holds up to 32 rows (Zen 5, spate_bench bd16, 6 alternating rounds:
  // SmolLM2 2009-2404 -> 2298-2724 tok/s with 8 rows as the bound; Gemma 3
  // 270M 1171-1389 -> 1318-1413; the 1B shape, whose matmuls give 8 tasks per
  // thread either way, unchanged). Wider steps are compute-bound and get 8
  // tasks per thread for balance.
  // Chunking never changes an output's value (a column's dot product is whole).
  int64_t target_matmul_tasks(const mm_job* jobs, int n_jobs, int64_t n_rows) const;
  static constexpr int64_t k_stream_max_rows = 32;
  static constexpr int64_t k_min_stream_task_bytes = 256 * 1024;
  // Runs pro (if any) on every row, quantizes x once per activation format
  // and runs the jobs (at most 4).
  void project(const float* x, int64_t ldx, int64_t n_rows, std::initializer_list<mm_job> jobs, row_prologue pro = {});

  const model_config& cfg_;
  const model_weights& w_;
  kv_cache& kv_;
  thread_pool& pool_;

  // Workspaces, [T x dim] row-major.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, tmp_, gate_, up_;
  std::vector<float> rope_;         // per token: n_rot floats of rotary cos | sin (kernels::rope_angles)
  std::vector<float> rope_swa_;     // the same for the sliding layers' RoPE base, when it differs
  bool separate_swa_rope() const { return cfg_.n_swa > 0 && cfg_.rope_freq_base_swa != cfg_.rope_freq_base; }
  std::vector<float> scratch_;      // attention scratch, per thread
  int64_t scratch_per_thread_ = 0;
  std::vector<uint8_t> act_;        // quantized activations
  std::vector<token_ref> tokens_;   // flattened token -> (seq, pos)
  std::vector<int64_t> logit_rows_; // flattened token indices whose logits are returned
  std::vector<int64_t> hidden_rows_; // flattened token indices whose hidden states are returned
  int64_t cap_tokens_ = 0;
  int32_t cap_ctx_ = 0;
};

}  // namespace spate
