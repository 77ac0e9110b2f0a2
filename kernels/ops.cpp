// Dispatch for the non-matmul ops and ISA-independent helpers.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops_internal.h"

namespace spate::kernels {

int64_t attention_scratch_floats(int32_t n_group, int32_t n_ctx) {
  if (n_group <= 0 || n_ctx <= 0) return 8;
  return static_cast<int64_t>(n_group) * detail::attention_scores_stride(n_ctx) + 8;
}

void prefetch_kv(const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table, int32_t first, int32_t n_ctx) {
  if (n_ctx <= first || kv.block_size <= 0) return;
  const int64_t elem = kv.dtype == kv_dtype::f16 ? 2 : 4;
  const int64_t bytes = static_cast<int64_t>(kv.block_size) * kv.head_dim * elem;  // one head's part of a block (K or V)
  const int32_t b0 = first / kv.block_size;
  const int32_t b1 = std::min((n_ctx - 1) / kv.block_size + 1, b0 + k_prefetch_kv_blocks);
  for (int32_t b = b0; b < b1; ++b) {
    const int64_t at = detail::kv_block_base(kv, block_table[b], kv_head) * elem;
    const char* k = static_cast<const char*>(kv.k) + at;
    const char* v = static_cast<const char*>(kv.v) + at;
    for (int64_t o = 0; o < bytes; o += 64) {
      __builtin_prefetch(k + o, 0, 3);
      __builtin_prefetch(v + o, 0, 2);
    }
  }
}

const ops_table& ops_for(isa_level level) {
  switch (level) {
    case isa_level::avx512: return detail::ops_avx512_table();  // avx2 ops + AVX-512 attention, gated activations
    case isa_level::avx2: return detail::ops_avx2_table();
    case isa_level::scalar: break;
  }
  return detail::ops_ref_table();
}

const ops_table& ops() { return ops_for(active_isa()); }

void rope_angles(int32_t n_rot, int32_t pos, float freq_base, const float* freq_factors, float* cos_sin) {
  const int32_t half = n_rot / 2;
  const double base = static_cast<double>(freq_base);
  for (int32_t i = 0; i < half; ++i) {
    double theta = static_cast<double>(pos) * std::pow(base, -2.0 * i / n_rot);
    if (freq_factors) theta /= static_cast<double>(freq_factors[i]);
    cos_sin[i] = static_cast<float>(std::cos(theta));
    cos_sin[half + i] = static_cast<float>(std::sin(theta));
  }
}
}  // namespace spate::kernels
