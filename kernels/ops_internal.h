// Internals shared by the ops implementations (ops_ref.cpp, ops_avx2.cpp,
// ops_avx512.cpp, ops.cpp) and their tests. Not part of the forward-pass
// interface. ISA-independent: safe to include from baseline files.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/ops.h"

namespace spate::kernels::detail {

const ops_table& ops_ref_table();
const ops_table& ops_avx2_table();  // only call when cpu_supports(isa_level::avx2)
// The avx2 table with the AVX-512 attention and gated activations (ops_avx512.cpp); only call when
// cpu_supports(isa_level::avx512).
const ops_table& ops_avx512_table();

// Scores stride (floats per query head) inside the attention scratch.
inline int64_t attention_scores_stride(int32_t n_ctx) { return (static_cast<int64_t>(n_ctx) + 7) & ~int64_t{7}; }

// Element offsets in the paged layout (see paged_kv_view) of f16, f32 and fp8_e5m2 (one-byte elements).
// Where kv head kv_head's block_size * head_dim elements of block `block` start, in K and V alike.
inline int64_t kv_block_base(const paged_kv_view& kv, int32_t block, int32_t kv_head) {
  return (static_cast<int64_t>(block) * kv.n_kv_heads + kv_head) * kv.block_size * kv.head_dim;
}
// K is stored transposed within a block: dim d of slot s at base + d * block_size + s.
inline int64_t kv_k_index(const paged_kv_view& kv, int32_t block, int32_t kv_head, int32_t slot, int32_t d) {
  return kv_block_base(kv, block, kv_head) + static_cast<int64_t>(d) * kv.block_size + slot;
}
// V rows are contiguous: dim d of slot s at kv_v_row_index(...) + d.
inline int64_t kv_v_row_index(const paged_kv_view& kv, int32_t block, int32_t kv_head, int32_t slot) {
  return kv_block_base(kv, block, kv_head) + static_cast<int64_t>(slot) * kv.head_dim;
}

// The quantized dtypes (kv_dtype q8_0 and fp8_e5m2; ops_kvq_ref.cpp).
// Byte offset of kv head kv_head's part of block `block` in either pool, any dtype.
inline int64_t kv_head_base_bytes(const paged_kv_view& kv, int32_t block, int32_t kv_head) {
  return (static_cast<int64_t>(block) * kv.n_kv_heads + kv_head) * kv_head_block_bytes(kv.dtype, kv.block_size, kv.head_dim);
}
// Software prefetch (no effect on results) of kv head kv_head's part of block
// `block` in one pool (kv.k or kv.v), values and scales, into L1 (locality 3) or L2 (2).
// The attention passes call it a few blocks ahead of the one they read: blocks
// are scattered over the pool, and the hardware prefetcher only finds each one
// once it is being read.
template <int Locality>
[[gnu::always_inline]] inline void prefetch_head_block(const void* pool, const paged_kv_view& kv, int32_t block, int32_t kv_head) {
  const int64_t bytes = kv_head_block_bytes(kv.dtype, kv.block_size, kv.head_dim);
  const char* at = static_cast<const char*>(pool) + kv_head_base_bytes(kv, block, kv_head);
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(at + o, 0, Locality);
}
// Blocks ahead that the attention passes prefetch.
inline constexpr int32_t k_attention_prefetch_blocks = 4;
// q8_0, in bytes from kv_head_base_bytes: K int8 (s, d) at d * block_size + s, V int8 at s * head_dim + d
// (kv_k_index / kv_v_row_index minus kv_block_base, as for one-byte elements), and the f16 scales after
// the block_size * head_dim values:
inline int64_t kv_q8_k_scale_offset(const paged_kv_view& kv, int32_t slot, int32_t group) {
  return static_cast<int64_t>(kv.block_size) * kv.head_dim + 2 * (static_cast<int64_t>(group) * kv.block_size + slot);
}
inline int64_t kv_q8_v_scale_offset(const paged_kv_view& kv, int32_t slot, int32_t group) {
  return static_cast<int64_t>(kv.block_size) * kv.head_dim +
         2 * (static_cast<int64_t>(slot) * (kv.head_dim / k_kv_q8_group) + group);
}
// One q8_0 group as llama.cpp's quantize_row_q8_0_ref: 32 floats x into q[i * q_step] (int8) and the
// f16 scale, returned.
uint16_t quantize_q8_group(const float* x, int8_t* q, int64_t q_step);
// fp8_e5m2 (see kv_dtype): the byte of a float, and the float of a byte.
uint8_t f32_to_e5m2(float x);
float e5m2_to_f32(uint8_t b);
// kv_store for q8_0 and fp8_e5m2, shared by every ISA level (identical bytes).
void kv_store_quantized(const paged_kv_view& kv, int32_t block, int32_t slot, int32_t kv_head, const float* k,
                        const float* v);
// The scalar reference attention for q8_0 and fp8_e5m2 (ops_table::attention's contract).
// The reference attention's softmax over one head's scores sc[first, n_ctx) (n_ctx > first), in place:
// with mx the max of the scores and of *sink (sink may be null), sc[p] = exp(sc[p] - mx) in order; returns
// their sum, in order, plus exp(*sink - mx). Shared by attention_ref and attention_quantized_ref.
inline float softmax_scores_ref(float* sc, int32_t first, int32_t n_ctx, const float* sink) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int32_t p = first; p < n_ctx; ++p) mx = std::fmax(mx, sc[p]);
  if (sink) mx = std::fmax(mx, *sink);  // the sink joins the max and the sum, not the values
  float sum = 0.0f;
  for (int32_t p = first; p < n_ctx; ++p) {
    sc[p] = std::exp(sc[p] - mx);
    sum += sc[p];
  }
  if (sink) sum += std::exp(*sink - mx);
  return sum;
}

void attention_quantized_ref(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                             const int32_t* block_table, int32_t first, int32_t n_ctx, float scale, const float* sinks,
                             float* out, float* scratch);

// AVX2 functions exposed for tests (defined in ops_avx2.cpp; require avx2).
// F16C conversions of n values (round-to-nearest-even on narrowing).
void f16c_to_f32(const uint16_t* h, float* f, int64_t n);
void f16c_from_f32(const float* f, uint16_t* h, int64_t n);
// Vectorised exp used by swiglu/softmax/attention: y[i] = exp(x[i]).
void exp_avx2(const float* x, float* y, int64_t n);

}  // namespace spate::kernels::detail
