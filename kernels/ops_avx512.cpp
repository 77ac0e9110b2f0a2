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
//   2. per head: max, w = exp(s - max) in place, sum (the avx2 helpers).
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
#include <cstring>
#include <memory>

#include "kernels/ops.h"
#include "kernels/ops_internal.h"

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

// Lane j of the result = sum of the 16 lanes of a[j]: lo256 + hi256, then
// pairwise hadds; the order depends only on j's lane layout, never on the tile.
inline __m256 hsum8x8(const __m512* a) {
  __m256 h[8];
  #pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    h[j] = _mm256_add_ps(_mm512_castps512_ps256(a[j]),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[j]), 1)));
  }
  const __m256 t0 = _mm256_hadd_ps(h[0], h[1]), t1 = _mm256_hadd_ps(h[2], h[3]);
  const __m256 t2 = _mm256_hadd_ps(h[4], h[5]), t3 = _mm256_hadd_ps(h[6], h[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  // u0 = [s0lo s1lo s2lo s3lo | s0hi s1hi s2hi s3hi], u1 likewise for 4..7.
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
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

// Pass 1 for all n_group heads. Lanes past n_ctx (up to the next multiple of
// 8, inside the scores stride) hold junk that pass 2 zeroes.
template <bool F16>
void attention_scores(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                      const int32_t* block_table, int32_t n_ctx, float scale, float* scores, int64_t stride) {
  const int32_t hd = kv.head_dim;
  int32_t blk = 0, slot = 0;
  for (int32_t p0 = 0; p0 < n_ctx; p0 += 8) {
    const int32_t r = std::min(8, n_ctx - p0);
    int64_t rows[8];
    for (int32_t j = 0; j < r; ++j) {
      rows[j] = kv_row_index(kv, block_table[blk], kv_head, slot);
      if (++slot == kv.block_size) {
        slot = 0;
        ++blk;
      }
    }
    for (int32_t j = r; j < 8; ++j) rows[j] = rows[0];  // junk lanes past n_ctx
    int32_t g = 0;
    for (; g + 3 <= n_group; g += 3)
      score_tile<3, F16>(q + static_cast<int64_t>(g) * hd, hd, kv.k, rows, scale, scores + g * stride + p0, stride);
    if (n_group - g == 2) {
      score_tile<2, F16>(q + static_cast<int64_t>(g) * hd, hd, kv.k, rows, scale, scores + g * stride + p0, stride);
    } else if (n_group - g == 1) {
      score_tile<1, F16>(q + static_cast<int64_t>(g) * hd, hd, kv.k, rows, scale, scores + g * stride + p0, stride);
    }
  }
}

// out[h][d0 .. d0 + 16*DC) = inv[h] * sum_p w[h*stride + p] * v_p[d0 ..] for HT heads.
template <int HT, int DC, bool F16>
void v_tile(const float* w, int64_t stride, const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table,
            int32_t n_ctx, int32_t d0, const float* inv, float* out) {
  __m512 acc[HT][DC];
  #pragma GCC unroll 16
  for (int h = 0; h < HT; ++h)
    #pragma GCC unroll 4
    for (int c = 0; c < DC; ++c) acc[h][c] = _mm512_setzero_ps();
  const int32_t hd = kv.head_dim;
  int32_t p = 0;
  for (int32_t b = 0; p < n_ctx; ++b) {
    int64_t at = kv_row_index(kv, block_table[b], kv_head, 0) + d0;
    const int32_t end = std::min(n_ctx, p + kv.block_size);
    for (; p < end; ++p, at += hd) {
      __m512 wv[HT];
      #pragma GCC unroll 4
      for (int h = 0; h < HT; ++h) wv[h] = _mm512_set1_ps(w[h * stride + p]);
      #pragma GCC unroll 4
      for (int c = 0; c < DC; ++c) {
        const __m512 v = load16<F16>(kv.v, at + 16 * c);
        #pragma GCC unroll 4
        for (int h = 0; h < HT; ++h) acc[h][c] = _mm512_fmadd_ps(wv[h], v, acc[h][c]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < HT; ++h) {
    const __m512 iv = _mm512_set1_ps(inv[h]);
    #pragma GCC unroll 4
    for (int c = 0; c < DC; ++c)
      _mm512_storeu_ps(out + static_cast<int64_t>(h) * hd + d0 + 16 * c, _mm512_mul_ps(acc[h][c], iv));
  }
}

template <int HT, bool F16>
void v_heads(const float* w, int64_t stride, const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table,
             int32_t n_ctx, const float* inv, float* out) {
  const int32_t hd = kv.head_dim;
  int32_t d = 0;
  for (; d + 64 <= hd; d += 64) v_tile<HT, 4, F16>(w, stride, kv, kv_head, block_table, n_ctx, d, inv, out);
  for (; d < hd; d += 16) v_tile<HT, 1, F16>(w, stride, kv, kv_head, block_table, n_ctx, d, inv, out);
}

template <bool F16>
void attention_impl(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                    const int32_t* block_table, int32_t n_ctx, float scale, float* out, float* scratch) {
  const int64_t stride = attention_scores_stride(n_ctx);
  const int32_t hd = kv.head_dim;
  attention_scores<F16>(q, n_group, kv, kv_head, block_table, n_ctx, scale, scratch, stride);
  float inv_stack[64];
  std::unique_ptr<float[]> inv_heap;
  float* inv = inv_stack;
  if (n_group > 64) {
    inv_heap.reset(new float[n_group]);
    inv = inv_heap.get();
  }
  for (int32_t g = 0; g < n_group; ++g) {
    float* sg = scratch + g * stride;
    inv[g] = 1.0f / exp_shift_sum_avx2(sg, n_ctx, max_of_avx2(sg, n_ctx), true);
  }
  int32_t g = 0;
  for (; g + 3 <= n_group; g += 3)
    v_heads<3, F16>(scratch + g * stride, stride, kv, kv_head, block_table, n_ctx, inv + g, out + static_cast<int64_t>(g) * hd);
  if (n_group - g == 2) {
    v_heads<2, F16>(scratch + g * stride, stride, kv, kv_head, block_table, n_ctx, inv + g, out + static_cast<int64_t>(g) * hd);
  } else if (n_group - g == 1) {
    v_heads<1, F16>(scratch + g * stride, stride, kv, kv_head, block_table, n_ctx, inv + g, out + static_cast<int64_t>(g) * hd);
  }
}

void attention_avx512(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                      const int32_t* block_table, int32_t n_ctx, float scale, float* out, float* scratch) {
  if (n_ctx <= 0 || kv.head_dim % 16 != 0) {
    ops_avx2_table().attention(q, n_group, kv, kv_head, block_table, n_ctx, scale, out, scratch);
    return;
  }
  if (kv.dtype == kv_dtype::f16) {
    attention_impl<true>(q, n_group, kv, kv_head, block_table, n_ctx, scale, out, scratch);
  } else {
    attention_impl<false>(q, n_group, kv, kv_head, block_table, n_ctx, scale, out, scratch);
  }
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
