// AVX2+FMA versions of the Gated DeltaNet kernels (kernels/gdn.h): gdn_simd.h on 8 lanes.
// Compiled with -mavx2 -mfma -mf16c; only called when cpu_supports(isa_level::avx2).
#include <immintrin.h>

#include "kernels/gdn.h"
#include "kernels/gdn_internal.h"
#include "kernels/gdn_simd.h"
#include "kernels/ops_simd_avx2.h"
#include "kernels/simd_avx2.h"

namespace spate::kernels::detail {
namespace {

// lanes8 (ops_simd_avx2.h, exp_lanes' operations) with the float loads and stores of gdn_simd.h.
struct gdn_lanes8 : lanes8 {
  using lanes8::sub;
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static reg load_n(const float* p, int n) { return _mm256_maskload_ps(p, tail_mask(n)); }
  static void store(float* p, reg x) { _mm256_storeu_ps(p, x); }
  static void store_n(float* p, reg x, int n) { _mm256_maskstore_ps(p, tail_mask(n), x); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg gather(const float* p, int32_t stride, int n) {
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), p, idx, _mm256_castsi256_ps(tail_mask(n)), 4);
  }
};

void short_conv_avx2(const float* x, int64_t ld_x, const float* w, int32_t kernel, float* state, float* y,
                     int64_t ld_y, int32_t n_tokens, int64_t n_ch, bool silu) {
  short_conv_simd<gdn_lanes8>(x, ld_x, w, kernel, state, y, ld_y, n_tokens, n_ch, silu);
}

void delta_rule_avx2(const delta_rule_args& a) { delta_rule_simd<gdn_lanes8>(a); }

void delta_rule_chunked_avx2(const delta_rule_args& a, float* scratch) {
  delta_rule_chunked_simd<gdn_lanes8>(a, scratch);
}

}  // namespace

const gdn_table& gdn_avx2_table() {
  static const gdn_table table{short_conv_avx2, delta_rule_avx2, delta_rule_chunked_avx2};
  return table;
}

}  // namespace spate::kernels::detail
