#include "model/model_executor.h"

#include <algorithm>
#include <cstring>
#include <spdlog/spdlog.h>
#include <stdexcept>

#include "kernels/isa.h"
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

// FNV-1a over raw bytes, folded into h (the KV format id).
uint64_t fold(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

template <typename T>
uint64_t fold_value(uint64_t h, const T& v) {
  return fold(h, &v, sizeof v);
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

size_t model_executor::kv_block_bytes() const {
  return 2 * static_cast<size_t>(kv_->n_layer()) * kv_->layer_block_bytes();
}

uint64_t model_executor::kv_format_id() const {
  const model_config& c = model_.config;
  uint64_t h = 1469598103934665603ull;
  h = fold(h, c.arch.data(), c.arch.size());
  for (int32_t v : {c.n_layer, c.n_head_kv, c.head_dim, c.n_rot, c.n_swa, c.n_ctx_orig, cfg_.block_size,
                    static_cast<int32_t>(cfg_.kv_dtype), static_cast<int32_t>(c.rope), static_cast<int32_t>(c.qk_norm),
                    static_cast<int32_t>(kernels::active_isa())}) {
    h = fold_value(h, v);
  }
  for (float v : {c.rope_freq_base, c.rope_freq_base_swa, c.rope_attn_factor, c.rope_yarn_factor, c.rope_yarn_beta_fast,
                  c.rope_yarn_beta_slow}) {
    h = fold_value(h, v);
  }
  h = fold(h, c.layer_swa.data(), c.layer_swa.size());
  h = fold(h, model_.weights.rope_freqs.data(), model_.weights.rope_freqs.size() * sizeof(float));
  return fold_value(h, kv_block_bytes());
}

// Layer by layer, K then V: 2 * n_layer ranges of layer_block_bytes().
void model_executor::copy_kv_block_out(int32_t block, std::span<uint8_t> out) const {
  if (out.size() != kv_block_bytes()) throw std::invalid_argument("copy_kv_block_out: wrong buffer size");
  uint8_t* dst = out.data();
  for (int32_t l = 0; l < kv_->n_layer(); ++l) {
    for (bool v : {false, true}) {
      const std::span<uint8_t> src = kv_->block_bytes(l, v, block);
      std::memcpy(dst, src.data(), src.size());
      dst += src.size();
    }
  }
}

void model_executor::copy_kv_block_in(int32_t block, std::span<const uint8_t> in) {
  if (in.size() != kv_block_bytes()) throw std::invalid_argument("copy_kv_block_in: wrong buffer size");
  const uint8_t* src = in.data();
  for (int32_t l = 0; l < kv_->n_layer(); ++l) {
    for (bool v : {false, true}) {
      const std::span<uint8_t> dst = kv_->block_bytes(l, v, block);
      std::memcpy(dst.data(), src, dst.size());
      src += dst.size();
    }
  }
}

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
