// Dispatch for the non-matmul ops and ISA-independent helpers.
#include "kernels/ops.h"

#include <cmath>

#include "kernels/ops_internal.h"

namespace spate::kernels {

int64_t attention_scratch_floats(int32_t n_group, int32_t n_ctx) {
  if (n_group <= 0 || n_ctx <= 0) return 8;
  return static_cast<int64_t>(n_group) * detail::attention_scores_stride(n_ctx) + 8;
}

const ops_table& ops_for(isa_level level) {
  switch (level) {
    case isa_level::avx512: return detail::ops_avx512_table();  // avx2 ops + AVX-512 attention
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
