// The real forward executor: a loaded model's runner over a paged KV cache on
// a thread-pool device executor. Sizes the KV cache from a byte budget and
// logs it ("KV cache: ..." and "# CPU blocks: N").
//
// Thread-safety: as forward_executor (one thread at a time).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "kernels/ops.h"
#include "model/device_turns.h"
#include "model/forward_executor.h"
#include "model/kv_cache.h"
#include "model/model_runner.h"
#include "model/thread_pool.h"

namespace spate {

struct loaded_model;

struct executor_config {
  int32_t n_threads = 1;                 // device executor threads
  int32_t block_size = 16;               // tokens per KV block
  uint64_t kv_cache_bytes = 2ull << 30;  // KV budget
  kernels::kv_dtype kv_dtype = kernels::kv_dtype::f16;
};

class model_executor final : public forward_executor {
 public:
  // Throws std::invalid_argument naming the executor_config field when
  // block_size < 1 or kv_cache_bytes is smaller than one block, and naming the
  // model's head_dim and the dtype when kv_dtype cannot hold it (q8_0 needs a
  // multiple of 32). The model must outlive the executor.
  model_executor(const loaded_model& m, const executor_config& cfg);
  // Runs on share_threads_with's thread pool instead of starting its own
  // (cfg.n_threads is ignored): for a draft model driven by the same engine
  // thread as the target, so no second set of workers spins while the other
  // model runs. The two executors must never be used concurrently, and
  // share_threads_with must outlive this one.
  model_executor(const loaded_model& m, const executor_config& cfg, model_executor& share_threads_with);
  // Runs on a device executor shared with other models' engines (cfg.n_threads
  // is ignored): every forward() and run_tasks() takes a turn on `turns`, so
  // the engines alternate fairly. pool and turns must outlive the executor.
  model_executor(const loaded_model& m, const executor_config& cfg, thread_pool& pool, device_turns& turns);

  int32_t n_vocab() const override;
  int32_t n_kv_blocks() const override { return n_blocks_; }
  int32_t block_size() const override { return cfg_.block_size; }
  void reserve(int64_t max_tokens, int64_t max_logit_rows, int32_t max_ctx) override;
  void forward(const forward_batch& batch, float* logits, float* hidden) override;
  int32_t n_embd() const override;
  int32_t kv_window() const override;
  // Puts a LoRA adapter into slot `slot` (null empties it), between forward
  // passes (it waits for the device turn). Requests name the slot
  // (forward_seq::adapter). Any thread.
  void set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter);
  // The KV of one block, layer by layer, K then V (forward_executor).
  size_t kv_block_bytes() const override;
  uint64_t kv_format_id() const override;
  void copy_kv_block_out(int32_t block, std::span<uint8_t> out) const override;
  void copy_kv_block_in(int32_t block, std::span<const uint8_t> in) override;
  // On the thread pool, one task per claim.
  void run_tasks(int64_t n_tasks, const std::function<void(int64_t)>& fn) override;

 private:
  const loaded_model& model_;
  executor_config cfg_;
  int32_t n_blocks_ = 0;
  std::unique_ptr<thread_pool> own_pool_;  // null when sharing another executor's
  thread_pool& pool_;
  device_turns* turns_ = nullptr;          // null: the pool is not shared between engines
  std::mutex forward_mu_;                  // forward() against set_adapter()
  std::unique_ptr<kv_cache> kv_;
  model_runner runner_;
};

}  // namespace spate
