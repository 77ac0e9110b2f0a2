// Paged KV cache storage: one K pool and one V pool per layer, each a pool of
// n_blocks fixed-size blocks, committed in full at construction. Which block belongs to which sequence is decided
// by the block_pool (allocation) and each sequence's block table; this class
// only owns the memory.
//
// Layout of one layer's K and V pools (kernels/ops.h paged_kv_view states it
// too). Every (block, kv head) part has the same size,
// H = kernels::kv_head_block_bytes(dtype, block_size, head_dim) bytes, so block
// b of a pool is the contiguous byte range [b * n_kv_heads * H, (b + 1) * n_kv_heads * H):
//
//   block 0                                      block 1
//   +--------------------------------------+     +------------------
//   | kv head 0: H bytes                    |     | kv head 0 ...
//   | kv head 1: ...       (n_kv_heads)     |     | ...
//   +--------------------------------------+     +------------------
//
//   one kv head's part of a block, V:         K (transposed):
//     slot 0  [d0 d1 ... d(hd-1)]               dim 0  [s0 s1 ... s(bs-1)]
//     slot 1  [d0 d1 ...        ]               dim 1  [s0 s1 ...        ]
//     ...     (block_size rows)                 ...    (head_dim rows)
//
//   f16 / f32 / fp8_e5m2 (2 / 4 / 1 bytes per element), in elements:
//     base(b, h) = (b * n_kv_heads + h) * block_size * head_dim
//     V element (b, h, s, d) at base + s * head_dim + d
//     K element (b, h, s, d) at base + d * block_size + s
//   q8_0 (head_dim % 32 == 0, G = head_dim / 32 groups of 32 dims), in bytes
//   from base(b, h) = (b * n_kv_heads + h) * H, H = bs * hd + 2 * bs * G:
//     int8 values as above (V at s * head_dim + d, K at d * block_size + s),
//     then the f16 scales: K's group-major (scale (s, g) at bs * hd + 2 * (g * bs + s)),
//     V's slot-major (at bs * hd + 2 * (s * G + g)).
//
// Thread-safety: the memory is written by the forward pass only for slots of
// sequences in the current step (disjoint per task) and read by attention.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/model_config.h"
#include "kernels/ops.h"

namespace spate {

class kv_cache {
 public:
  kv_cache(const model_config& c, int32_t n_blocks, int32_t block_size, kernels::kv_dtype dtype);
  ~kv_cache();
  kv_cache(const kv_cache&) = delete;
  kv_cache& operator=(const kv_cache&) = delete;

  // The pools of one layer (view.k, view.v: each block_bytes_per_layer_pool() * n_blocks() bytes
  // long, plus padding to 64 bytes).
  kernels::paged_kv_view layer_view(int32_t layer) const;
  int32_t n_blocks() const { return n_blocks_; }
  int32_t block_size() const { return block_size_; }

  kernels::kv_dtype dtype() const { return dtype_; }

  // Bytes of one block in ONE layer's K pool, and equally in its V pool, any dtype: block b
  // is the contiguous range [block_offset(b), block_offset(b) + block_bytes_per_layer_pool())
  // of layer_view(l).k and of layer_view(l).v for every layer l (all kv heads, values and scales).
  // Copying those 2 * n_layer ranges copies the block whole. Thread-safe (constant).
  size_t block_bytes_per_layer_pool() const { return block_bytes_per_layer_pool_; }
  size_t block_offset(int32_t block) const { return static_cast<size_t>(block) * block_bytes_per_layer_pool_; }

  // Bytes one block takes across all layers, K and V (2 * n_layer * block_bytes_per_layer_pool()).
  // Throws std::invalid_argument when dtype cannot hold the model's head_dim (q8_0 needs a multiple of 32).
  static size_t bytes_per_block(const model_config& c, int32_t block_size, kernels::kv_dtype dtype);
  // Throws std::invalid_argument naming head_dim and the dtype unless kv_dtype_supports_head_dim.
  static void check_dtype(const model_config& c, kernels::kv_dtype dtype);
  // Bytes one block takes in one layer's K pool (the same in its V pool):
  // bytes_per_block() / (2 * n_layer).
  static size_t bytes_per_layer_block(const model_config& c, int32_t block_size, kernels::kv_dtype dtype);

  // Block `block`'s bytes in layer `layer`'s K pool (v false) or V pool (v
  // true): one contiguous range of bytes_per_layer_block() bytes, for copying
  // a block out and back in (the prefix cache's disk tier). Valid for the
  // cache's life. Precondition: 0 <= layer < n_layer, 0 <= block < n_blocks.
  // Not to be written while a forward pass runs.
  std::span<uint8_t> block_bytes(int32_t layer, bool v, int32_t block) const;
  size_t layer_block_bytes() const { return block_bytes_per_layer_pool_; }  // = block_bytes_per_layer_pool()
  int32_t n_layer() const { return n_layer_; }

 private:
  int32_t n_layer_, n_blocks_, block_size_, n_kv_heads_, head_dim_;
  kernels::kv_dtype dtype_;
  size_t block_bytes_per_layer_pool_ = 0;  // n_kv_heads * kv_head_block_bytes
  size_t layer_pool_bytes_ = 0;  // bytes of one layer's K (or V) pool
  size_t total_bytes_ = 0;       // bytes mapped at memory_ (all layers, K and V)
  void* memory_ = nullptr;       // [layer][K|V][pool]
};

}  // namespace spate
