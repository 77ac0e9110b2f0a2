// The q8_0 KV cache (kernels/ops.h kv_dtype) in the SIMD attention kernels:
// its score pass and V pass on the lanes of V (lanes8 of ops_simd_avx2.h, or
// lanes16 of ops_avx512.cpp), reading the int8 values and f16 scales in place.
// Internal, header-only, under the contracts of ops_simd_avx2.h: include only
// from *_avx2.cpp / *_avx512.cpp, after ops_simd_avx2.h; unnamed namespace.
//
// Every result is one fixed sequence per score or output element, whatever
// the lane width, chunking, head tiling or batch (the reference's, in
// ops_kvq_ref.cpp):
//   score(slot) = scale * sum over groups g in order of fma(scale_{g,slot}, part_g, acc),
//                 part_g = fma chain of q[d] * k_int8[d][slot] over the group's dims in order;
//   out[d]      = inv * (fma chain over p in order of (w_p * scale_{p,g(d)}) * v_int8[p][d]).
// K is dim-major within a block, so L consecutive slots are one vector per
// dim, and their scales of one group are L consecutive halves (group-major).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/ops.h"
#include "kernels/ops_internal.h"
#include "kernels/ops_simd_avx2.h"

namespace spate::kernels::detail {
namespace {

inline float q8_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Scores of HT heads (q rows q + h * hd) for the V::L slots [s, s + L) of one
// block whose kv-head part starts at kb, s + L <= block_size. Writes lanes
// [0, n) to out[h * stride + i] (the slots at or past n are computed and dropped).
template <class V, int HT>
inline void q8_score_chunk(const float* q, int32_t hd, int32_t bs, const uint8_t* kb, int32_t s, float scale, float* out,
                           int64_t stride, int32_t n) {
  using reg = typename V::reg;
  reg acc[HT];
  #pragma GCC unroll 4
  for (int h = 0; h < HT; ++h) acc[h] = V::zero();
  const int8_t* kq = reinterpret_cast<const int8_t*>(kb) + s;
  const uint8_t* ks = kb + static_cast<int64_t>(bs) * hd + 2 * static_cast<int64_t>(s);
  for (int32_t g = 0; g < hd / k_kv_q8_group; ++g) {
    reg part[HT];
    #pragma GCC unroll 4
    for (int h = 0; h < HT; ++h) part[h] = V::zero();
    for (int32_t d = g * k_kv_q8_group; d < (g + 1) * k_kv_q8_group; ++d) {
      const reg k = V::load_i8(kq + static_cast<int64_t>(d) * bs);
      #pragma GCC unroll 4
      for (int h = 0; h < HT; ++h) part[h] = V::fma(V::bcast(q + static_cast<int64_t>(h) * hd + d), k, part[h]);
    }
    const reg sc = V::load_h(ks + 2 * static_cast<int64_t>(g) * bs);
    #pragma GCC unroll 4
    for (int h = 0; h < HT; ++h) acc[h] = V::fma(sc, part[h], acc[h]);
  }
  #pragma GCC unroll 4
  for (int h = 0; h < HT; ++h) V::store(out + h * stride, acc[h], scale, n);
}

// The same chain for one slot, scalar (block sizes that are not a multiple of the lanes).
inline float q8_score1(const float* qg, int32_t hd, int32_t bs, const uint8_t* kb, int32_t s) {
  const int8_t* kq = reinterpret_cast<const int8_t*>(kb) + s;
  const uint8_t* ks = kb + static_cast<int64_t>(bs) * hd + 2 * static_cast<int64_t>(s);
  float acc = 0.0f;
  for (int32_t g = 0; g < hd / k_kv_q8_group; ++g) {
    float part = 0.0f;
    for (int32_t d = g * k_kv_q8_group; d < (g + 1) * k_kv_q8_group; ++d) {
      part = std::fma(qg[d], static_cast<float>(kq[static_cast<int64_t>(d) * bs]), part);
    }
    acc = std::fma(q8_half(ks + 2 * static_cast<int64_t>(g) * bs), part, acc);
  }
  return acc;
}

// Pass 1 of attention_passes for q8_0 (the contract of scores_transposed):
// per block and head tile, chunks of Wide lanes inside the block, then of
// Narrow lanes (unless void), then single slots.
template <class Wide, class Narrow>
void q8_scores(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table,
               int32_t n_ctx, float scale, float* dst, int64_t stride) {
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  int32_t p = 0;
  for (int32_t b = 0; p < n_ctx; ++b) {
    const uint8_t* kb = static_cast<const uint8_t*>(kv.k) + kv_head_base_bytes(kv, block_table[b], kv_head);
    const int32_t n = std::min(bs, n_ctx - p);
    for_head_tiles<Wide::max_ht>(n_group, [&]<int HT>(int32_t g) {
      const float* qg = q + static_cast<int64_t>(g) * hd;
      float* og = dst + g * stride + p;
      int32_t s = 0;
      for (; s < n && s + Wide::L <= bs; s += Wide::L) {
        q8_score_chunk<Wide, HT>(qg, hd, bs, kb, s, scale, og + s, stride, std::min(Wide::L, n - s));
      }
      if constexpr (!std::is_void_v<Narrow>) {
        for (; s < n && s + Narrow::L <= bs; s += Narrow::L) {
          q8_score_chunk<Narrow, HT>(qg, hd, bs, kb, s, scale, og + s, stride, std::min(Narrow::L, n - s));
        }
      }
      for (; s < n; ++s) {
        for (int h = 0; h < HT; ++h) og[h * stride + s] = q8_score1(qg + static_cast<int64_t>(h) * hd, hd, bs, kb, s) * scale;
      }
    });
    p += n;
  }
}

// Pass 3 for q8_0, one group of 32 dims (grp) for HT heads: out[h][grp's dims] =
// inv[h] * sum_p (w[h * stride + p] * scale_{p,grp}) * v_int8[p][grp's dims].
template <class V, int HT>
void q8_v_group(const float* w, int64_t stride, const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table,
                int32_t n_ctx, int32_t grp, const float* inv, float* out) {
  using reg = typename V::reg;
  constexpr int DC = k_kv_q8_group / V::L;
  const int32_t hd = kv.head_dim;
  const int64_t scale_step = 2 * static_cast<int64_t>(hd / k_kv_q8_group);  // bytes between slots' scales
  reg acc[HT][DC];
  #pragma GCC unroll 4
  for (int h = 0; h < HT; ++h)
    #pragma GCC unroll 4
    for (int c = 0; c < DC; ++c) acc[h][c] = V::zero();
  int32_t p = 0;
  for (int32_t b = 0; p < n_ctx; ++b) {
    const uint8_t* vb = static_cast<const uint8_t*>(kv.v) + kv_head_base_bytes(kv, block_table[b], kv_head);
    const int8_t* row = reinterpret_cast<const int8_t*>(vb) + grp * k_kv_q8_group;
    const uint8_t* sc = vb + kv_q8_v_scale_offset(kv, 0, grp);
    const int32_t end = std::min(n_ctx, p + kv.block_size);
    for (; p < end; ++p, row += hd, sc += scale_step) {
      const float s = q8_half(sc);
      reg cw[HT];
      #pragma GCC unroll 4
      for (int h = 0; h < HT; ++h) cw[h] = V::set1(w[h * stride + p] * s);
      #pragma GCC unroll 4
      for (int c = 0; c < DC; ++c) {
        const reg v = V::load_i8(row + c * V::L);
        #pragma GCC unroll 4
        for (int h = 0; h < HT; ++h) acc[h][c] = V::fma(cw[h], v, acc[h][c]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < HT; ++h)
    #pragma GCC unroll 4
    for (int c = 0; c < DC; ++c)
      V::store(out + static_cast<int64_t>(h) * hd + grp * k_kv_q8_group + c * V::L, acc[h][c], inv[h], V::L);
}

template <class V, int HT>
void q8_v_heads(const float* w, int64_t stride, const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table,
                int32_t n_ctx, const float* inv, float* out) {
  for (int32_t grp = 0; grp < kv.head_dim / k_kv_q8_group; ++grp) {
    q8_v_group<V, HT>(w, stride, kv, kv_head, block_table, n_ctx, grp, inv, out);
  }
}

}  // namespace
}  // namespace spate::kernels::detail
