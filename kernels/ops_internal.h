// Internals shared by the ops implementations (ops_ref.cpp, ops_avx2.cpp,
// ops_avx512.cpp, ops.cpp) and their tests. Not part of the forward-pass
// interface. ISA-independent: safe to include from baseline files.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace spate::kernels::detail {

const ops_table& ops_ref_table();
const ops_table& ops_avx2_table();  // only call when cpu_supports(isa_level::avx2)
// The avx2 table with the AVX-512 attention and gated activations (ops_avx512.cpp); only call when
// cpu_supports(isa_level::avx512).
const ops_table& ops_avx512_table();

// Scores stride (floats per query head) inside the attention scratch.
inline int64_t attention_scores_stride(int32_t n_ctx) { return (static_cast<int64_t>(n_ctx) + 7) & ~int64_t{7}; }

// Element offsets in the paged layout (see paged_kv_view).
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

// AVX2 functions exposed for tests (defined in ops_avx2.cpp; require avx2).
// F16C conversions of n values (round-to-nearest-even on narrowing).
void f16c_to_f32(const uint16_t* h, float* f, int64_t n);
void f16c_from_f32(const float* f, uint16_t* h, int64_t n);
// Vectorised exp used by swiglu/softmax/attention: y[i] = exp(x[i]).
void exp_avx2(const float* x, float* y, int64_t n);

}  // namespace spate::kernels::detail
