#include "model/kv_cache.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <sys/mman.h>

namespace spate {

void kv_cache::check_dtype(const model_config& c, kernels::kv_dtype dtype) {
  if (!kernels::kv_dtype_supports_head_dim(dtype, c.head_dim)) {
    throw std::invalid_argument("--kv-cache-dtype " + std::string(kernels::kv_dtype_name(dtype)) +
                                " needs a head_dim that is a multiple of " + std::to_string(kernels::k_kv_q8_group) +
                                "; this model's head_dim is " + std::to_string(c.head_dim) + " (use f16, f32 or fp8_e5m2)");
  }
}

size_t kv_cache::bytes_per_layer_block(const model_config& c, int32_t block_size, kernels::kv_dtype dtype) {
  return static_cast<size_t>(c.n_head_kv) * static_cast<size_t>(kernels::kv_head_block_bytes(dtype, block_size, c.head_dim));
}

size_t kv_cache::bytes_per_block(const model_config& c, int32_t block_size, kernels::kv_dtype dtype) {
  check_dtype(c, dtype);
  return 2ull * static_cast<size_t>(c.n_layer) * bytes_per_layer_block(c, block_size, dtype);
}

kv_cache::kv_cache(const model_config& c, int32_t n_blocks, int32_t block_size, kernels::kv_dtype dtype)
    : n_layer_(c.n_layer), n_blocks_(n_blocks), block_size_(block_size), n_kv_heads_(c.n_head_kv),
      head_dim_(c.head_dim), dtype_(dtype) {
  if (n_blocks <= 0 || block_size <= 0) throw std::invalid_argument("kv_cache needs at least one block of at least one slot");
  check_dtype(c, dtype);
  block_bytes_per_layer_pool_ = bytes_per_layer_block(c, block_size, dtype);
  layer_pool_bytes_ = static_cast<size_t>(n_blocks) * block_bytes_per_layer_pool_;
  layer_pool_bytes_ = (layer_pool_bytes_ + 63) / 64 * 64;
  total_bytes_ = layer_pool_bytes_ * 2 * static_cast<size_t>(n_layer_);
  // Anonymous mapping, 4 KiB aligned, committed up front (MAP_POPULATE): the
  // memory the operator budgeted is taken at start-up, so RSS is flat from
  // the first request on (no growth as new blocks are first touched) and a
  // machine short of memory fails here rather than mid-request.
  void* p = ::mmap(nullptr, total_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  memory_ = p;
}

kv_cache::~kv_cache() {
  if (memory_) ::munmap(memory_, total_bytes_);
}

std::span<uint8_t> kv_cache::block_bytes(int32_t layer, bool v, int32_t block) const {
  auto* pool = static_cast<uint8_t*>(memory_) + (static_cast<size_t>(layer) * 2 + (v ? 1 : 0)) * layer_pool_bytes_;
  return {pool + static_cast<size_t>(block) * block_bytes_per_layer_pool_, block_bytes_per_layer_pool_};
}

kernels::paged_kv_view kv_cache::layer_view(int32_t layer) const {
  kernels::paged_kv_view v;
  auto* base = static_cast<uint8_t*>(memory_) + static_cast<size_t>(layer) * 2 * layer_pool_bytes_;
  v.k = base;
  v.v = base + layer_pool_bytes_;
  v.dtype = dtype_;
  v.block_size = block_size_;
  v.n_kv_heads = n_kv_heads_;
  v.head_dim = head_dim_;
  return v;
}

}  // namespace spate
