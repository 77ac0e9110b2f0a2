#include "model/model_executor.h"

#include <algorithm>
#include <spdlog/spdlog.h>
#include <stdexcept>

#include "model/model_loader.h"
#include "util/byte_size.h"

namespace spate {
namespace {

int32_t kv_block_count(const model_config& c, const executor_config& cfg) {
  if (cfg.block_size < 1) throw std::invalid_argument("block_size must be >= 1");
  const size_t per_block = kv_cache::bytes_per_block(c, cfg.block_size, cfg.kv_dtype);
  const auto n_blocks = static_cast<int32_t>(std::min<uint64_t>(cfg.kv_cache_bytes / per_block, 1u << 30));
  spdlog::info("KV cache: {} budget, {} per block of {} tokens ({} per token, {})", format_bytes(cfg.kv_cache_bytes),
               format_bytes(per_block), cfg.block_size, format_bytes(per_block / static_cast<size_t>(cfg.block_size)),
               kernels::kv_dtype_name(cfg.kv_dtype));
  if (n_blocks < 1) throw std::invalid_argument("kv_cache_bytes is smaller than one KV block (" + format_bytes(per_block) + ")");
  spdlog::info("# CPU blocks: {}", n_blocks);
  return n_blocks;
}

}  // namespace

model_executor::model_executor(const loaded_model& m, const executor_config& cfg)
    : model_(m), cfg_(cfg), n_blocks_(kv_block_count(m.config, cfg)), own_pool_(std::make_unique<thread_pool>(cfg.n_threads)),
      pool_(*own_pool_), kv_(std::make_unique<kv_cache>(m.config, n_blocks_, cfg.block_size, cfg.kv_dtype)),
      runner_(m.config, m.weights, *kv_, pool_) {}

model_executor::model_executor(const loaded_model& m, const executor_config& cfg, model_executor& share_threads_with)
    : model_(m), cfg_(cfg), n_blocks_(kv_block_count(m.config, cfg)), pool_(share_threads_with.pool_),
      turns_(share_threads_with.turns_), kv_(std::make_unique<kv_cache>(m.config, n_blocks_, cfg.block_size, cfg.kv_dtype)),
      runner_(m.config, m.weights, *kv_, pool_) {}

model_executor::model_executor(const loaded_model& m, const executor_config& cfg, thread_pool& pool, device_turns& turns)
    : model_(m), cfg_(cfg), n_blocks_(kv_block_count(m.config, cfg)), pool_(pool), turns_(&turns),
      kv_(std::make_unique<kv_cache>(m.config, n_blocks_, cfg.block_size, cfg.kv_dtype)),
      runner_(m.config, m.weights, *kv_, pool_) {}

void model_executor::set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter) {
  std::lock_guard lock(forward_mu_);
  runner_.set_adapter(slot, std::move(adapter));
}

int32_t model_executor::n_vocab() const { return model_.config.n_vocab; }

void model_executor::reserve(int64_t max_tokens, int64_t max_logit_rows, int32_t max_ctx) {
  runner_.reserve(max_tokens, max_logit_rows, max_ctx);
}

void model_executor::forward(const forward_batch& batch, float* logits, float* hidden) {
  device_turns::turn t(turns_);
  std::lock_guard lock(forward_mu_);
  runner_.forward(batch, logits, hidden);
}

int32_t model_executor::n_embd() const { return model_.config.n_embd; }
int32_t model_executor::kv_window() const { return model_.config.kv_window(); }

void model_executor::run_tasks(int64_t n_tasks, const std::function<void(int64_t)>& fn) {
  if (n_tasks <= 1) {  // nothing to share: skip waking the workers
    if (n_tasks == 1) fn(0);
    return;
  }
  device_turns::turn t(turns_);
  pool_.set_trace_label("engine_tasks");
  pool_.parallel_for(n_tasks, [&fn](int64_t task, int) { fn(task); });
}

}  // namespace spate
