// AVX-512 attention (kernels/ops.h `attention`) and gated activations (swiglu,
// geglu, swiglu_oai: the avx2 bits on 16 lanes) for the avx512 ISA level; the other ops of
// that level are the avx2 ones. Compiled with -mavx512f (and the
// avx2 flags); only called when cpu_supports(isa_level::avx512).
//
// Same three passes as the avx2 kernel (no online rescaling, so a result is a
// fixed function of q and the logical K/V contents), with 16-float vectors:
//
//   1. scores[g][p] = scale * q_g . k_p over the transposed K
//      (scores_transposed of ops_simd_avx2.h): 16 slots per vector, one FMA
//      chain per score over the dims in order, no horizontal sums; each K
//      vector is loaded/converted once per tile of <= 4 heads. Blocks whose
//      size is not a multiple of 16 use 8-lane chunks and single slots for
//      the rest, which compute the same chain, so scores are bitwise those of
//      the avx2 kernel.
//   2. per head: max, w = exp(s - max) in place, sum: softmax_heads16
//      below, exp_lanes (ops_simd_avx2.h) on 16 lanes (same w bits as the
//      avx2 kernel, sums in another order); the head's sink, if any, joins
//      the max and the sum as at the avx2 level.
//   3. out_g = (sum_p w[g][p] v_p) / sum_g: per tile of <= 4 heads and <= 64
//      dims, one FMA chain per (head, 16 dims) over p in order.
//
// Whatever the tiling (how many heads share a call, n_ctx % 8, the block
// size), a score and an output element are computed by the same arithmetic,
// so results do not depend on the batch (batch invariance). Outputs differ
// from the avx2 kernel only by float rounding in pass 3 (16- vs 8-lane
// softmax sums); tests bound both against a double reference.
// head_dim % 16 != 0 is delegated to the avx2 kernel.
// GCC 12's avx512fintrin.h builds undefined vectors with a self-initialisation
// that -Wmaybe-uninitialized (or -Wuninitialized) reports once inlined (GCC PR 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "kernels/ops.h"
#include "kernels/ops_internal.h"
#include "kernels/ops_simd_avx2.h"
#include "kernels/ops_kvq_simd.h"
#include "kernels/simd_avx2.h"

namespace spate::kernels::detail {
namespace {

// Elements [at, at + 16) of a KV pool of dtype DT (f16, f32 or fp8_e5m2) as floats.
template <kv_dtype DT>
inline __m512 load16(const void* pool, int64_t at) {
  if constexpr (DT == kv_dtype::f16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(pool) + at)));
  } else if constexpr (DT == kv_dtype::fp8_e5m2) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(pool) + at));
    return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8));
  } else {
    static_assert(DT == kv_dtype::f32);
    return _mm512_loadu_ps(static_cast<const float*>(pool) + at);
  }
}

// 16 float lanes: the wide lane type of the score pass (see lanes8).
struct lanes16 {
  using reg = __m512;
  static constexpr int L = 16;
  static constexpr int max_ht = 4;  // 4 heads x 4 chunks: 16 of the 32 registers accumulate
  template <int HT>
  static constexpr int nc = HT == 1 ? 8 : 4;  // 4 or 8 measured alike for HT > 1
  static reg zero() { return _mm512_setzero_ps(); }
  static reg bcast(const float* x) { return _mm512_set1_ps(*x); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  using ireg = __m512i;  // exp_lanes' operations, as lanes8's
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
  static reg min(reg a, reg b) { return _mm512_min_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg div(reg a, reg b) { return _mm512_div_ps(a, b); }
  static reg fnma(reg a, reg b, reg c) { return _mm512_fnmadd_ps(a, b, c); }
  static reg round(reg a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static ireg to_int(reg a) { return _mm512_cvtps_epi32(a); }
  static ireg half(ireg k) { return _mm512_srai_epi32(k, 1); }
  static ireg sub(ireg a, ireg b) { return _mm512_sub_epi32(a, b); }
  static reg pow2(ireg k) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23)); }
  template <kv_dtype DT>
  static reg load(const void* pool, int64_t at) {
    return load16<DT>(pool, at);
  }
  // 16 int8 at p as floats (exact); 16 f16 halves at p as floats (q8_0, ops_kvq_simd.h).
  static reg load_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static reg load_h(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  // out[0..n) = lanes [0, n) of v * scale.
  static void store(float* out, reg v, float scale, int32_t n) {
    v = _mm512_mul_ps(v, _mm512_set1_ps(scale));
    if (n == L) {
      _mm512_storeu_ps(out, v);
    } else if (n > 0) {
      _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << n) - 1), v);
    }
  }
};

inline __mmask16 first_lanes(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }  // 0 <= n <= 16

// Pass 2 on 16 lanes (the contract of softmax_heads in ops_simd_avx2.h): per
// head, max, w = exp(s - max) in place (zeros up to round_up(n_ctx, 8)) and
// inv = 1 / sum(w), the sum in a fixed order (two 16-lane accumulators, then
// _mm512_reduce_add_ps, then the sink's term if any).
inline void softmax_heads16(float* scores, int64_t stride, int32_t n_group, int32_t n_ctx, const float* sinks,
                            float* inv) {
  const int64_t n = n_ctx;
  const int64_t padded = attention_scores_stride(n_ctx);  // round_up(n_ctx, 8) <= stride
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int32_t g = 0; g < n_group; ++g) {
    float* x = scores + g * stride;
    __m512 m0 = ninf, m1 = ninf;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
      m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
    }
    for (; i + 16 <= n; i += 16) m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    if (i < n) m1 = _mm512_max_ps(m1, _mm512_mask_loadu_ps(ninf, first_lanes(n - i), x + i));
    const float mx = max_with_sink(sinks, g, _mm512_reduce_max_ps(_mm512_max_ps(m0, m1)));
    const __m512 mv = _mm512_set1_ps(mx);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    i = 0;
    for (; i + 32 <= n; i += 32) {
      const __m512 e0 = exp_lanes<lanes16>(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));
      const __m512 e1 = exp_lanes<lanes16>(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), mv));
      _mm512_storeu_ps(x + i, e0);
      _mm512_storeu_ps(x + i + 16, e1);
      s0 = _mm512_add_ps(s0, e0);
      s1 = _mm512_add_ps(s1, e1);
    }
    for (; i + 16 <= n; i += 16) {
      const __m512 e0 = exp_lanes<lanes16>(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));
      _mm512_storeu_ps(x + i, e0);
      s0 = _mm512_add_ps(s0, e0);
    }
    if (i < n) {
      const __mmask16 m = first_lanes(n - i);
      const __m512 e = _mm512_maskz_mov_ps(m, exp_lanes<lanes16>(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mv)));
      _mm512_mask_storeu_ps(x + i, first_lanes(std::min<int64_t>(16, padded - i)), e);
      s1 = _mm512_add_ps(s1, e);
    }
    inv[g] = 1.0f / sum_with_sink(sinks, g, mx, _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
  }
}

// Passes 1 and 3 for attention_passes (ops_simd_avx2.h).
struct avx512_attention {
  // Heads per tile of the V pass: 4 x 4 accumulators of 16 dims (a GQA group
  // of 4, as Gemma 3 270M and the 1B shape have, converts each V vector once).
  static constexpr int max_ht = lanes16::max_ht;
  static void softmax_heads(float* scores, int64_t stride, int32_t n_group, int32_t n_ctx, const float* sinks,
                            float* inv) {
    softmax_heads16(scores, stride, n_group, n_ctx, sinks, inv);
  }

  // Pass 1: scores_transposed (ops_simd_avx2.h), 16-lane chunks, then 8.
  template <kv_dtype DT>
  static void scores(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                     const int32_t* block_table, int32_t n_ctx, float scale, float* dst, int64_t stride) {
    if constexpr (DT == kv_dtype::q8_0) {
      q8_scores<lanes16, lanes8>(q, n_group, kv, kv_head, block_table, n_ctx, scale, dst, stride);  // ops_kvq_simd.h
    } else {
      scores_transposed<lanes16, lanes8, DT>(q, n_group, kv, kv_head, block_table, n_ctx, scale, dst, stride);
    }
  }

  // out[h][d0 .. d0 + 16*DC) = inv[h] * sum_p w[h*stride + p] * v_p[d0 ..] for HT heads.
  template <int HT, int DC, kv_dtype DT>
  static void v_tile(const float* w, int64_t stride, const paged_kv_view& kv, int32_t kv_head,
                     const int32_t* block_table, int32_t n_ctx, int32_t d0, const float* inv, float* out) {
    __m512 acc[HT][DC];
    #pragma GCC unroll 16
    for (int h = 0; h < HT; ++h)
      #pragma GCC unroll 4
      for (int c = 0; c < DC; ++c) acc[h][c] = _mm512_setzero_ps();
    const int32_t hd = kv.head_dim;
    for_each_kv_pos(kv, kv_head, block_table, n_ctx, d0, [&](int32_t p, int64_t at) {
      __m512 wv[HT];
      #pragma GCC unroll 4
      for (int h = 0; h < HT; ++h) wv[h] = _mm512_set1_ps(w[h * stride + p]);
      #pragma GCC unroll 4
      for (int c = 0; c < DC; ++c) {
        const __m512 v = load16<DT>(kv.v, at + 16 * c);
        #pragma GCC unroll 4
        for (int h = 0; h < HT; ++h) acc[h][c] = _mm512_fmadd_ps(wv[h], v, acc[h][c]);
      }
    });
    #pragma GCC unroll 4
    for (int h = 0; h < HT; ++h) {
      const __m512 iv = _mm512_set1_ps(inv[h]);
      #pragma GCC unroll 4
      for (int c = 0; c < DC; ++c)
        _mm512_storeu_ps(out + static_cast<int64_t>(h) * hd + d0 + 16 * c, _mm512_mul_ps(acc[h][c], iv));
    }
  }

  template <int HT, kv_dtype DT>
  static void v_heads(const float* w, int64_t stride, const paged_kv_view& kv, int32_t kv_head,
                      const int32_t* block_table, int32_t n_ctx, const float* inv, float* out) {
    if constexpr (DT == kv_dtype::q8_0) {
      q8_v_heads<lanes16, HT>(w, stride, kv, kv_head, block_table, n_ctx, inv, out);  // ops_kvq_simd.h
    } else {
      const int32_t hd = kv.head_dim;
      int32_t d = 0;
      for (; d + 64 <= hd; d += 64) v_tile<HT, 4, DT>(w, stride, kv, kv_head, block_table, n_ctx, d, inv, out);
      for (; d < hd; d += 16) v_tile<HT, 1, DT>(w, stride, kv, kv_head, block_table, n_ctx, d, inv, out);
    }
  }
};

// ---------------------------------------------------------------- gated activations
// swiglu / geglu of the avx2 level (ops_avx2.cpp silu_mul, gelu_mul) on 16 lanes: the
// same operations lane for lane (exp_lanes, a true division), so the same bits; the
// last n % 16 elements go to the avx2 functions.
inline __m512 silu_mul16(__m512 g, __m512 u) {
  const __m512 e = exp_lanes<lanes16>(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

inline __m512 gelu_mul16(__m512 g, __m512 u) {
  const __m512 g3 = _mm512_mul_ps(_mm512_mul_ps(g, g), g);
  const __m512 inner = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f), _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), g3, g));
  const __m512 e = exp_lanes<lanes16>(_mm512_mul_ps(_mm512_set1_ps(-2.0f), inner));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

template <__m512 (*F)(__m512, __m512)>
void gated16(const float* gate, const float* up, float* out, int64_t n, void (*tail)(const float*, const float*, float*, int64_t)) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, F(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) tail(gate + i, up + i, out + i, n - i);
}

void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n) {
  gated16<silu_mul16>(gate, up, out, n, ops_avx2_table().swiglu);
}

void geglu_avx512(const float* gate, const float* up, float* out, int64_t n) {
  gated16<gelu_mul16>(gate, up, out, n, ops_avx2_table().geglu);
}

// swiglu_oai_lanes (ops_simd_avx2.h) on 16 lanes: the avx2 level's bits.
void swiglu_oai_avx512(const float* gate, const float* up, float* out, int64_t n, float alpha, float limit) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, swiglu_oai_lanes<lanes16>(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i), alpha, limit));
  }
  if (i < n) ops_avx2_table().swiglu_oai(gate + i, up + i, out + i, n - i, alpha, limit);
}

void attention_avx512(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                      const int32_t* block_table, int32_t first, int32_t n_ctx, float scale, const float* sinks,
                      float* out, float* scratch) {
  if (n_ctx <= 0 || kv.head_dim % 16 != 0) {
    ops_avx2_table().attention(q, n_group, kv, kv_head, block_table, first, n_ctx, scale, sinks, out, scratch);
    return;
  }
  attention_passes<avx512_attention>(q, n_group, kv, kv_head, block_table, first, n_ctx, scale, sinks, out, scratch);
}

}  // namespace

const ops_table& ops_avx512_table() {
  static const ops_table table = [] {
    ops_table t = ops_avx2_table();
    t.attention = attention_avx512;
    t.swiglu = swiglu_avx512;
    t.geglu = geglu_avx512;
    t.swiglu_oai = swiglu_oai_avx512;
    return t;
  }();
  return table;
}

}  // namespace spate::kernels::detail
