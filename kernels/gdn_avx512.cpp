// AVX-512 versions of the Gated DeltaNet kernels (kernels/gdn.h): gdn_simd.h on 16 lanes, the same
// operations per lane as the avx2 level and the reference, so the same bits.
// Compiled with -mavx512f (and the avx2 flags); only called when cpu_supports(isa_level::avx512).
// GCC 12's avx512fintrin.h builds undefined vectors with a self-initialisation that
// -Wmaybe-uninitialized (or -Wuninitialized) reports once inlined (GCC PR 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "kernels/gdn.h"
#include "kernels/gdn_internal.h"
#include "kernels/gdn_simd.h"

namespace spate::kernels::detail {
namespace {

// 16 float lanes: exp_lanes' operations (as ops_avx512.cpp's lanes16) and gdn_simd.h's loads and stores.
struct gdn_lanes16 {
  using reg = __m512;
  using ireg = __m512i;
  static constexpr int L = 16;
  static reg zero() { return _mm512_setzero_ps(); }
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static reg load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store(float* p, reg x) { _mm512_storeu_ps(p, x); }
  static void store_n(float* p, reg x, int n) { _mm512_mask_storeu_ps(p, mask(n), x); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg fnma(reg a, reg b, reg c) { return _mm512_fnmadd_ps(a, b, c); }
  static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
  static reg min(reg a, reg b) { return _mm512_min_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg div(reg a, reg b) { return _mm512_div_ps(a, b); }
  static reg round(reg a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static ireg to_int(reg a) { return _mm512_cvtps_epi32(a); }
  static ireg half(ireg k) { return _mm512_srai_epi32(k, 1); }
  static ireg sub(ireg a, ireg b) { return _mm512_sub_epi32(a, b); }
  static reg pow2(ireg k) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23)); }
  static reg gather(const float* p, int32_t stride, int n) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(stride));
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), n == L ? __mmask16{0xffff} : mask(n), idx, p, 4);
  }
  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1); }  // 0 <= n < 16
};

void short_conv_avx512(const float* x, int64_t ld_x, const float* w, int32_t kernel, float* state, float* y,
                       int64_t ld_y, int32_t n_tokens, int64_t n_ch, bool silu) {
  short_conv_simd<gdn_lanes16>(x, ld_x, w, kernel, state, y, ld_y, n_tokens, n_ch, silu);
}

void delta_rule_avx512(const delta_rule_args& a) { delta_rule_simd<gdn_lanes16>(a); }

void delta_rule_chunked_avx512(const delta_rule_args& a, float* scratch) {
  delta_rule_chunked_simd<gdn_lanes16>(a, scratch);
}

}  // namespace

const gdn_table& gdn_avx512_table() {
  static const gdn_table table{short_conv_avx512, delta_rule_avx512, delta_rule_chunked_avx512};
  return table;
}

}  // namespace spate::kernels::detail
