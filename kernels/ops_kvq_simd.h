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

// L consecutive slots of one block's kv-head part (L = the lane type's width).
struct q8_chunk {
  const uint8_t* kb;  // the kv head's part of the block
  int32_t s;          // first slot in the block (s + L <= block_size)
  int32_t p;          // position of that slot (offset into a head's scores)
  int32_t n;          // lanes stored, 0..L (0: a padding chunk, computed and dropped)
};

// Chunks scored together: NC independent accumulator chains per head hide the
// FMA latency (one chunk alone would leave HT chains). Each chunk needs two
// registers per head (the group's part and the running sum), plus HT query
// broadcasts and one K vector: 2 HT NC + HT + 1 <= the ISA's registers.
template <class V, int HT>
inline constexpr int q8_nc = [] {
  constexpr int regs = V::L == 16 ? 32 : 16;
  int nc = 8;
  while (nc > 1 && 2 * HT * nc + HT + 1 > regs) nc /= 2;
  return nc;
}();

// Scores of HT heads (q rows q + h * hd) for the slots of NC chunks, written to
// out[h * stride + chunk.p + i] for i < chunk.n.
template <class V, int HT, int NC>
inline void q8_score_chunks(const float* q, int32_t hd, int32_t bs, const q8_chunk* ch, float scale, float* out, int64_t stride) {
  using reg = typename V::reg;
  reg acc[HT][NC];
  #pragma GCC unroll 4
  for (int h = 0; h < HT; ++h)
    #pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) acc[h][c] = V::zero();
  const int8_t* kq[NC];
  const uint8_t* ks[NC];
  #pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) {
    kq[c] = reinterpret_cast<const int8_t*>(ch[c].kb) + ch[c].s;
    ks[c] = ch[c].kb + static_cast<int64_t>(bs) * hd + 2 * static_cast<int64_t>(ch[c].s);
  }
  for (int32_t g = 0; g < hd / k_kv_q8_group; ++g) {
    reg part[HT][NC];
    #pragma GCC unroll 4
    for (int h = 0; h < HT; ++h)
      #pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) part[h][c] = V::zero();
    for (int32_t d = g * k_kv_q8_group; d < (g + 1) * k_kv_q8_group; ++d) {
      reg qv[HT];
      #pragma GCC unroll 4
      for (int h = 0; h < HT; ++h) qv[h] = V::bcast(q + static_cast<int64_t>(h) * hd + d);
      #pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) {
        const reg k = V::load_i8(kq[c] + static_cast<int64_t>(d) * bs);
        #pragma GCC unroll 4
        for (int h = 0; h < HT; ++h) part[h][c] = V::fma(qv[h], k, part[h][c]);
      }
    }
    #pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      const reg sc = V::load_h(ks[c] + 2 * static_cast<int64_t>(g) * bs);
      #pragma GCC unroll 4
      for (int h = 0; h < HT; ++h) acc[h][c] = V::fma(sc, part[h][c], acc[h][c]);
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < HT; ++h)
    #pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) V::store(out + h * stride + ch[c].p, acc[h][c], scale, ch[c].n);
}

// Up to 8 chunks of one lane type, scored for all heads when full or flushed
// (ops_simd_avx2.h chunk_batch's scheme: full tiles of q8_nc, then one padded tile).
template <class V>
class q8_chunk_batch {
 public:
  static constexpr int k_max = 8;
  q8_chunk_batch(const float* q, int32_t n_group, int32_t hd, int32_t bs, float scale, float* out, int64_t stride)
      : q_(q), n_group_(n_group), hd_(hd), bs_(bs), scale_(scale), out_(out), stride_(stride) {}

  void push(const q8_chunk& c) {
    ch_[n_++] = c;
    if (n_ == k_max) flush();
  }

  void flush() {
    if (n_ == 0) return;
    for_head_tiles<V::max_ht>(n_group_, [&]<int HT>(int32_t g) {
      constexpr int NC = q8_nc<V, HT>;
      const float* qg = q_ + static_cast<int64_t>(g) * hd_;
      float* og = out_ + g * stride_;
      int i = 0;
      for (; i + NC <= n_; i += NC) q8_score_chunks<V, HT, NC>(qg, hd_, bs_, ch_ + i, scale_, og, stride_);
      const int rem = n_ - i;
      if (rem < 0 || rem >= NC) __builtin_unreachable();  // full tiles went above (tells GCC's -Warray-bounds)
      if (rem == 0) return;
      for (int j = n_; j < k_max; ++j) ch_[j] = {ch_[0].kb, ch_[0].s, 0, 0};
      if (rem == 1 || NC == 1) {
        for (; i < n_; ++i) q8_score_chunks<V, HT, 1>(qg, hd_, bs_, ch_ + i, scale_, og, stride_);
      } else if (rem == 2 || NC == 2) {
        q8_score_chunks<V, HT, 2>(qg, hd_, bs_, ch_ + i, scale_, og, stride_);
      } else {
        q8_score_chunks<V, HT, NC>(qg, hd_, bs_, ch_ + i, scale_, og, stride_);
      }
    });
    n_ = 0;
  }

 private:
  const float* q_;
  int32_t n_group_, hd_, bs_;
  float scale_;
  float* out_;
  int64_t stride_;
  q8_chunk ch_[k_max];
  int n_ = 0;
};

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
// chunks of Wide lanes inside each block, then of Narrow lanes (unless void),
// batched across blocks; then single slots.
template <class Wide, class Narrow>
void q8_scores(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table,
               int32_t n_ctx, float scale, float* dst, int64_t stride) {
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  q8_chunk_batch<Wide> wide(q, n_group, hd, bs, scale, dst, stride);
  using narrow_lanes = std::conditional_t<std::is_void_v<Narrow>, Wide, Narrow>;
  q8_chunk_batch<narrow_lanes> narrow(q, n_group, hd, bs, scale, dst, stride);
  const int32_t n_blocks = (n_ctx + bs - 1) / bs;
  int32_t p = 0;
  for (int32_t b = 0; p < n_ctx; ++b) {
    if (b + k_attention_prefetch_blocks < n_blocks) prefetch_head_block<3>(kv.k, kv, block_table[b + k_attention_prefetch_blocks], kv_head);
    const uint8_t* kb = static_cast<const uint8_t*>(kv.k) + kv_head_base_bytes(kv, block_table[b], kv_head);
    const int32_t n = std::min(bs, n_ctx - p);
    int32_t s = 0;
    for (; s < n && s + Wide::L <= bs; s += Wide::L) wide.push({kb, s, p + s, std::min(Wide::L, n - s)});
    if constexpr (!std::is_void_v<Narrow>) {
      for (; s < n && s + Narrow::L <= bs; s += Narrow::L) narrow.push({kb, s, p + s, std::min(Narrow::L, n - s)});
    }
    for (; s < n; ++s) {
      for (int32_t g = 0; g < n_group; ++g) {
        const float* qg = q + static_cast<int64_t>(g) * hd;
        dst[g * stride + p + s] = q8_score1(qg, hd, bs, kb, s) * scale;
      }
    }
    p += n;
  }
  wide.flush();
  narrow.flush();
}

// Pass 3 for q8_0, GP consecutive groups of 32 dims from grp0, for HT heads:
// out[h][the groups' dims] = inv[h] * sum_p (w[h * stride + p] * scale_{p,g}) * v_int8[p][dims].
// More groups per pass give more independent FMA chains per row (AVX-512's
// 16-lane vectors cover a group in 2). The products w * scale of up to
// k_q8_rows rows are formed first, as vectors over rows (the same float
// products, so the same bits), and each row then broadcasts its products from
// memory: the row loop does loads and FMAs only.
inline constexpr int32_t k_q8_rows = 16;

template <class V, int HT, int GP>
void q8_v_groups(const float* w, int64_t stride, const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table,
                 int32_t n_ctx, int32_t grp0, const float* inv, float* out) {
  using reg = typename V::reg;
  constexpr int DC = k_kv_q8_group / V::L;
  const int32_t hd = kv.head_dim;
  const int64_t scale_step = 2 * static_cast<int64_t>(hd / k_kv_q8_group);  // bytes between slots' scales
  reg acc[HT][GP * DC];
  #pragma GCC unroll 4
  for (int h = 0; h < HT; ++h)
    #pragma GCC unroll 8
    for (int c = 0; c < GP * DC; ++c) acc[h][c] = V::zero();
  alignas(64) float sc_rows[GP][k_q8_rows];      // the rows' scales of each group
  alignas(64) float cw[GP][HT][k_q8_rows];       // w * scale per group, head and row
  const int32_t n_blocks = (n_ctx + kv.block_size - 1) / kv.block_size;
  int32_t p = 0;
  for (int32_t b = 0; p < n_ctx; ++b) {
    if (b + k_attention_prefetch_blocks < n_blocks) prefetch_head_block<3>(kv.v, kv, block_table[b + k_attention_prefetch_blocks], kv_head);
    const uint8_t* vb = static_cast<const uint8_t*>(kv.v) + kv_head_base_bytes(kv, block_table[b], kv_head);
    const int8_t* row = reinterpret_cast<const int8_t*>(vb) + grp0 * k_kv_q8_group;
    const uint8_t* sc = vb + kv_q8_v_scale_offset(kv, 0, grp0);
    const int32_t end = std::min(n_ctx, p + kv.block_size);
    while (p < end) {
      const int32_t n = std::min(k_q8_rows, end - p);
      for (int32_t r = 0; r < n; ++r)
        #pragma GCC unroll 2
        for (int gi = 0; gi < GP; ++gi) sc_rows[gi][r] = q8_half(sc + r * scale_step + 2 * gi);
      #pragma GCC unroll 2
      for (int gi = 0; gi < GP; ++gi)
        #pragma GCC unroll 4
        for (int h = 0; h < HT; ++h) {
          const float* wh = w + h * stride + p;
          for (int32_t r = 0; r < n; ++r) cw[gi][h][r] = wh[r] * sc_rows[gi][r];
        }
      for (int32_t r = 0; r < n; ++r, row += hd) {
        // One flat loop over the GP * DC vectors of the row (group j / DC), so
        // the accumulators stay in registers.
        reg cwr[GP][HT];
        #pragma GCC unroll 2
        for (int gi = 0; gi < GP; ++gi)
          #pragma GCC unroll 4
          for (int h = 0; h < HT; ++h) cwr[gi][h] = V::bcast(&cw[gi][h][r]);
        #pragma GCC unroll 8
        for (int j = 0; j < GP * DC; ++j) {
          const reg v = V::load_i8(row + j * V::L);
          #pragma GCC unroll 4
          for (int h = 0; h < HT; ++h) acc[h][j] = V::fma(cwr[j / DC][h], v, acc[h][j]);
        }
      }
      sc += n * scale_step;
      p += n;
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < HT; ++h)
    #pragma GCC unroll 8
    for (int c = 0; c < GP * DC; ++c)
      V::store(out + static_cast<int64_t>(h) * hd + grp0 * k_kv_q8_group + c * V::L, acc[h][c], inv[h], V::L);
}

template <class V, int HT>
void q8_v_heads(const float* w, int64_t stride, const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table,
                int32_t n_ctx, const float* inv, float* out) {
  const int32_t n_groups = kv.head_dim / k_kv_q8_group;
  int32_t grp = 0;
  if constexpr (V::L == 16) {
    for (; grp + 2 <= n_groups; grp += 2) q8_v_groups<V, HT, 2>(w, stride, kv, kv_head, block_table, n_ctx, grp, inv, out);
  }
  for (; grp < n_groups; ++grp) q8_v_groups<V, HT, 1>(w, stride, kv, kv_head, block_table, n_ctx, grp, inv, out);
}

}  // namespace
}  // namespace spate::kernels::detail
