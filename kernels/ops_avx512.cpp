// AVX-512 attention (kernels/ops.h `attention`) for the avx512 ISA level; the
// other ops of that level are the avx2 ones. Compiled with -mavx512f (and the
// avx2 flags); only called when cpu_supports(isa_level::avx512).
//
// Same three passes as the avx2 kernel (no online rescaling, so a result is a
// fixed function of q and the logical K/V contents), with 16-float vectors:
//
//   1. scores[g][p] = scale * q_g . k_p, positions in tiles of 8 and heads in
//      tiles of <= 3: each K vector (16 dims) is loaded/converted once per
//      tile and feeds every head of it; 3 x 8 accumulators stay in registers.
//      Per score: lane l accumulates dims l, l+16, l+32, ... in order (one
//      FMA chain), then the 16 lanes are folded lo+hi into 8 and summed in
//      the fixed hadd order of hsum8x8 below.
//   2. per head: max, w = exp(s - max) in place, sum (softmax_heads of
//      ops_simd_avx2.h, shared with the avx2 kernel).
//   3. out_g = (sum_p w[g][p] v_p) / sum_g: per tile of <= 3 heads and <= 64
//      dims, one FMA chain per (head, 16 dims) over p in order.
//
// Whatever the tiling (how many heads share a call, n_ctx % 8), a score and an
// output element are computed by the same arithmetic, so results do not depend
// on the batch (batch invariance). They differ from the avx2 kernel only by
// float rounding (different lane grouping); tests bound both against a double
// reference. head_dim % 16 != 0 is delegated to the avx2 kernel.
// GCC 12's avx512fintrin.h builds undefined vectors with a self-initialisation
// that -Wmaybe-uninitialized reports once inlined (GCC PR 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "kernels/ops.h"
#include "kernels/ops_internal.h"
#include "kernels/ops_simd_avx2.h"
#include "kernels/simd_avx2.h"

namespace spate::kernels::detail {
namespace {

template <bool F16>
inline __m512 load16(const void* pool, int64_t at) {
  if constexpr (F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(pool) + at)));
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(pool) + at);
  }
}

// Lane j of the result = sum of the 16 lanes of a[j]: lo256 + hi256, then the
// pairwise hadds of hsum8; the order depends only on j's lane layout, never on the tile.
inline __m256 hsum8x8(const __m512* a) {
  __m256 h[8];
  #pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    h[j] = _mm256_add_ps(_mm512_castps512_ps256(a[j]),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[j]), 1)));
  }
  return hsum8(h);
}

// scores of HT heads (q rows q + h*hd) against the 8 K rows at element offsets
// rows[0..8), written to out[h*stride + 0..8). hd % 16 == 0.
template <int HT, bool F16>
inline void score_tile(const float* q, int32_t hd, const void* kpool, const int64_t* rows, float scale, float* out,
                       int64_t stride) {
  __m512 acc[HT][8];
  #pragma GCC unroll 32
  for (int h = 0; h < HT; ++h)
    #pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) acc[h][j] = _mm512_setzero_ps();
  for (int32_t d = 0; d < hd; d += 16) {
    __m512 qv[HT];
    #pragma GCC unroll 4
    for (int h = 0; h < HT; ++h) qv[h] = _mm512_loadu_ps(q + static_cast<int64_t>(h) * hd + d);
    #pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m512 k = load16<F16>(kpool, rows[j] + d);
      #pragma GCC unroll 4
      for (int h = 0; h < HT; ++h) acc[h][j] = _mm512_fmadd_ps(qv[h], k, acc[h][j]);
    }
  }
  const __m256 sv = _mm256_set1_ps(scale);
  #pragma GCC unroll 4
  for (int h = 0; h < HT; ++h) _mm256_storeu_ps(out + h * stride, _mm256_mul_ps(hsum8x8(acc[h]), sv));
}

// Passes 1 and 3 for attention_passes (ops_simd_avx2.h).
struct avx512_attention {
  // Pass 1 for all n_group heads. Lanes past n_ctx (up to the next multiple of
  // 8, inside the scores stride) hold junk that pass 2 zeroes.
  template <bool F16>
  static void scores(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                     const int32_t* block_table, int32_t n_ctx, float scale, float* dst, int64_t stride) {
    const int32_t hd = kv.head_dim;
    int32_t blk = 0, slot = 0;
    for (int32_t p0 = 0; p0 < n_ctx; p0 += 8) {
      int64_t rows[8];
      next_kv_rows(kv, kv_head, block_table, std::min(8, n_ctx - p0), 8, blk, slot, rows);
      for_head_tiles(n_group, [&]<int HT>(int32_t g) {
        score_tile<HT, F16>(q + static_cast<int64_t>(g) * hd, hd, kv.k, rows, scale, dst + g * stride + p0, stride);
      });
    }
  }

  // out[h][d0 .. d0 + 16*DC) = inv[h] * sum_p w[h*stride + p] * v_p[d0 ..] for HT heads.
  template <int HT, int DC, bool F16>
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
        const __m512 v = load16<F16>(kv.v, at + 16 * c);
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

  template <int HT, bool F16>
  static void v_heads(const float* w, int64_t stride, const paged_kv_view& kv, int32_t kv_head,
                      const int32_t* block_table, int32_t n_ctx, const float* inv, float* out) {
    const int32_t hd = kv.head_dim;
    int32_t d = 0;
    for (; d + 64 <= hd; d += 64) v_tile<HT, 4, F16>(w, stride, kv, kv_head, block_table, n_ctx, d, inv, out);
    for (; d < hd; d += 16) v_tile<HT, 1, F16>(w, stride, kv, kv_head, block_table, n_ctx, d, inv, out);
  }
};

void attention_avx512(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                      const int32_t* block_table, int32_t first, int32_t n_ctx, float scale, float* out, float* scratch) {
  if (n_ctx <= 0 || kv.head_dim % 16 != 0) {
    ops_avx2_table().attention(q, n_group, kv, kv_head, block_table, first, n_ctx, scale, out, scratch);
    return;
  }
  attention_passes<avx512_attention>(q, n_group, kv, kv_head, block_table, first, n_ctx, scale, out, scratch);
}

}  // namespace

const ops_table& ops_avx512_table() {
  static const ops_table table = [] {
    ops_table t = ops_avx2_table();
    t.attention = attention_avx512;
    return t;
  }();
  return table;
}

}  // namespace spate::kernels::detail
