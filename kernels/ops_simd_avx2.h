// Helpers of the ops kernels shared by ops_avx2.cpp and ops_avx512.cpp: paged
// KV walks and head tiling, the AVX2 exp, the softmax passes and the attention
// driver.
// Internal, header-only, under the same contracts as simd_avx2.h: include only
// from *_avx2.cpp / *_avx512.cpp; everything is in an unnamed namespace.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>

#include "kernels/ops.h"
#include "kernels/ops_internal.h"
#include "kernels/simd_avx2.h"

namespace spate::kernels::detail {
namespace {

// ---------------------------------------------------------------- paged KV walks, head tiles
// (scalar code, but kept here with internal linkage like everything in this
// header, so no AVX-compiled copy is shared across files)

// Calls f(p, at) for the positions p = 0 .. n_ctx-1 of kv head kv_head in
// order, at = element offset of dim d0 of position p's V row.
template <class F>
inline void for_each_kv_pos(const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table, int32_t n_ctx,
                            int32_t d0, F&& f) {
  const int32_t n_blocks = (n_ctx + kv.block_size - 1) / kv.block_size;
  int32_t p = 0;
  for (int32_t b = 0; p < n_ctx; ++b) {
    if (b + k_attention_prefetch_blocks < n_blocks) prefetch_head_block<3>(kv.v, kv, block_table[b + k_attention_prefetch_blocks], kv_head);
    int64_t at = kv_v_row_index(kv, block_table[b], kv_head, 0) + d0;
    const int32_t end = std::min(n_ctx, p + kv.block_size);
    for (; p < end; ++p, at += kv.head_dim) f(p, at);
  }
}

// Splits heads [0, n_group) into tiles of MaxHT (3 or 4) and one last tile of
// fewer, and calls f.template operator()<HT>(g) for each tile [g, g + HT), in
// order. A head's result never depends on its tile (per-head accumulators).
template <int MaxHT, class F>
inline void for_head_tiles(int32_t n_group, F&& f) {
  static_assert(MaxHT == 3 || MaxHT == 4);
  int32_t g = 0;
  for (; g + MaxHT <= n_group; g += MaxHT) f.template operator()<MaxHT>(g);
  const int32_t rest = n_group - g;
  if constexpr (MaxHT == 4) {
    if (rest == 3) f.template operator()<3>(g);
  }
  if (rest == 2) {
    f.template operator()<2>(g);
  } else if (rest == 1) {
    f.template operator()<1>(g);
  }
}

// n floats of per-head scratch: on the stack up to 64 heads, on the heap beyond.
class head_floats {
 public:
  explicit head_floats(int32_t n) {
    if (n > 64) {
      heap_.reset(new float[n]);
      data_ = heap_.get();
    }
  }
  head_floats(const head_floats&) = delete;
  head_floats& operator=(const head_floats&) = delete;
  float* data() { return data_; }

 private:
  float stack_[64];
  std::unique_ptr<float[]> heap_;
  float* data_ = stack_;
};

// ---------------------------------------------------------------- exp and softmax passes

// 8 float lanes (AVX2+FMA+F16C): the lane type of the avx2 kernel (its V pass
// loads through it too), and of the avx512 one for blocks with 8..15 slots left over.
struct lanes8 {
  using reg = __m256;
  static constexpr int L = 8;
  static constexpr int max_ht = 3;  // heads per tile: 16 registers
  // Chunks per tile of HT heads: HT*NC accumulators, enough independent FMA
  // chains to cover the FMA latency, within the 16 registers.
  template <int HT>
  static constexpr int nc = HT == 1 ? 8 : 4;
  static reg zero() { return _mm256_setzero_ps(); }
  static reg bcast(const float* x) { return _mm256_broadcast_ss(x); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  // The rest of exp_lanes' operations.
  using ireg = __m256i;
  static reg set1(float x) { return _mm256_set1_ps(x); }
  static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
  static reg min(reg a, reg b) { return _mm256_min_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg div(reg a, reg b) { return _mm256_div_ps(a, b); }
  static reg fnma(reg a, reg b, reg c) { return _mm256_fnmadd_ps(a, b, c); }
  static reg round(reg a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static ireg to_int(reg a) { return _mm256_cvtps_epi32(a); }
  static ireg half(ireg k) { return _mm256_srai_epi32(k, 1); }
  static ireg sub(ireg a, ireg b) { return _mm256_sub_epi32(a, b); }
  static reg pow2(ireg k) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23)); }
  // Elements [at, at + 8) of a KV pool of dtype DT (f16, f32 or fp8_e5m2) as floats.
  template <kv_dtype DT>
  static reg load(const void* pool, int64_t at) {
    if constexpr (DT == kv_dtype::f16) {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(pool) + at)));
    } else if constexpr (DT == kv_dtype::fp8_e5m2) {
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(pool) + at));
      return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(b), 8));
    } else {
      static_assert(DT == kv_dtype::f32);
      return _mm256_loadu_ps(static_cast<const float*>(pool) + at);
    }
  }
  // 8 int8 at p as floats (exact).
  static reg load_i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  // 8 f16 halves at p (any alignment) as floats.
  static reg load_h(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  // out[0..n) = lanes [0, n) of v * scale.
  static void store(float* out, reg v, float scale, int32_t n) {
    v = _mm256_mul_ps(v, _mm256_set1_ps(scale));
    if (n == L) {
      _mm256_storeu_ps(out, v);
    } else if (n > 0) {
      _mm256_maskstore_ps(out, tail_mask(n), v);
    }
  }
};

// exp(x) for all floats: Cody-Waite reduction x = n*ln2 + r, |r| <= ln2/2,
// degree-7 Taylor polynomial for exp(r) (truncation error < 0.1 ulp), then
// scaling by 2^n in two steps so that subnormal results round once.
// exp(-inf) = 0, exp(+inf) = inf, NaN propagates. Max error ~1 ulp.
// One instruction sequence per lane for every width V (lanes8 here, lanes16
// in ops_avx512.cpp), so each lane's value is the same bits at any width.
template <class V>
inline typename V::reg exp_lanes(typename V::reg x) {
  using reg = typename V::reg;
  // min/max keep the second operand when one is NaN, so NaN passes through.
  x = V::max(V::set1(-104.0f), V::min(V::set1(89.0f), x));
  const reg n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  reg r = V::fnma(n, V::set1(0.693359375f), x);  // ln2 high part, exact product
  r = V::fnma(n, V::set1(-2.12194440e-4f), r);     // ln2 - 0.693359375
  constexpr float k_taylor[] = {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f};
  reg p = V::set1(1.0f / 5040.0f);
  #pragma GCC unroll 8
  for (float c : k_taylor) p = V::fma(p, r, V::set1(c));
  // n in [-150, 128]: split into two halves, each a normal power of two.
  const typename V::ireg ni = V::to_int(n);
  const typename V::ireg n1 = V::half(ni);
  return V::mul(V::mul(p, V::pow2(n1)), V::pow2(V::sub(ni, n1)));
}

inline __m256 exp_ps(__m256 x) { return exp_lanes<lanes8>(x); }

// ops_table::swiglu_oai on the lanes of V (lanes8, or lanes16 in ops_avx512.cpp): the
// reference's operations in its order, exp by exp_lanes and a true division, so each
// lane is the same bits at every width. min(a, b) / max(a, b) return b when either is
// NaN: min(lim, g) is std::min(g, lim) and min(lim, max(-lim, u)) std::clamp(u, -lim, lim),
// a NaN included. exp's argument -alpha * x is the same product as alpha * -x.
template <class V>
inline typename V::reg swiglu_oai_lanes(typename V::reg g, typename V::reg u, float alpha, float limit) {
  using reg = typename V::reg;
  const reg lim = V::set1(limit), one = V::set1(1.0f);
  const reg x = V::min(lim, g);
  const reg y = V::min(lim, V::max(V::set1(-limit), u));
  const reg e = exp_lanes<V>(V::mul(V::set1(-alpha), x));
  return V::mul(V::div(x, V::add(one, e)), V::add(y, one));
}

// Max of x[0..n), n >= 1.
inline float max_of(const float* x, int64_t n) {
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 m0 = ninf, m1 = ninf;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    m1 = _mm256_max_ps(m1, _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m)));
  }
  return hmax(_mm256_max_ps(m0, m1));
}

// x[i] = exp(x[i] - mx) for i < n; returns the sum (fixed order). When
// pad_to_8 is set, the lanes of the last partial vector past n are written
// as 0 (caller guarantees room up to round_up(n, 8)).
inline float exp_shift_sum(float* x, int64_t n, float mx, bool pad_to_8) {
  const __m256 mv = _mm256_set1_ps(mx);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 e0 = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
    const __m256 e1 = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv));
    _mm256_storeu_ps(x + i, e0);
    _mm256_storeu_ps(x + i + 8, e1);
    s0 = _mm256_add_ps(s0, e0);
    s1 = _mm256_add_ps(s1, e1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 e0 = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
    _mm256_storeu_ps(x + i, e0);
    s0 = _mm256_add_ps(s0, e0);
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), mv)), _mm256_castsi256_ps(m));
    if (pad_to_8) {
      _mm256_storeu_ps(x + i, e);
    } else {
      _mm256_maskstore_ps(x + i, m, e);
    }
    s1 = _mm256_add_ps(s1, e);
  }
  return hsum(_mm256_add_ps(s0, s1));
}

// exp(x) of one float by exp_lanes: the same bits as any lane of exp_ps / exp_lanes<lanes16>.
inline float exp1(float x) { return _mm_cvtss_f32(_mm256_castps256_ps128(exp_ps(_mm256_set1_ps(x)))); }

// Attention sinks (ops_table::attention) in the softmax passes: head g's max
// becomes max(mx, sink) and its sum gains exp(sink - max), added last. Without
// sinks (nullptr) both return their argument unchanged, so those bits are the
// same as without this step.
inline float max_with_sink(const float* sinks, int32_t g, float mx) { return sinks ? std::fmax(mx, sinks[g]) : mx; }
inline float sum_with_sink(const float* sinks, int32_t g, float mx, float sum) {
  return sinks ? sum + exp1(sinks[g] - mx) : sum;
}

// Pass 2 of the attention kernels: for each head g < n_group, the n_ctx scores
// at scores + g * stride become w = exp(s - max) (zeroed up to round_up(n_ctx, 8),
// which stride must cover) and inv[g] = 1 / sum(w), max and sum including head
// g's sink when sinks is not null (max_with_sink, sum_with_sink). n_ctx >= 1.
inline void softmax_heads(float* scores, int64_t stride, int32_t n_group, int32_t n_ctx, const float* sinks, float* inv) {
  for (int32_t g = 0; g < n_group; ++g) {
    float* sg = scores + g * stride;
    const float mx = max_with_sink(sinks, g, max_of(sg, n_ctx));
    inv[g] = 1.0f / sum_with_sink(sinks, g, mx, exp_shift_sum(sg, n_ctx, mx, true));
  }
}

// ---------------------------------------------------------------- pass 1: scores over the transposed K
//
// Every score is one fixed sequence at every ISA level, lane width and tiling:
//   acc = 0;  for d = 0 .. head_dim-1: acc = fma(q[d], k[d], acc);  score = acc * scale
// K is dim-major within a block (paged_kv_view), so L consecutive slots of a
// block are one vector per dim: lane i accumulates slot i's score and lanes
// never mix. A 16-lane chunk, an 8-lane chunk and the scalar loop therefore
// give the same bits, whatever the block size or the heads sharing a call.

// L consecutive slots of one block (L = the lane type's width).
struct k_chunk {
  int64_t at;  // element offset of (dim 0, first slot)
  int32_t p;   // position of the first slot (offset into a head's scores)
  int32_t n;   // lanes stored, 0..L (0: a padding chunk, computed and dropped)
};

// Scores of HT heads (q rows q + h*hd) for the slots of NC chunks, written to
// out[h*stride + chunk.p + i] for i < chunk.n. k_step = block_size (elements
// between a slot's consecutive dims). Reads L slots per chunk from ch[c].at.
template <class V, int HT, int NC, kv_dtype DT>
inline void score_chunks(const float* q, int32_t hd, int64_t k_step, const void* kpool, const k_chunk* ch, float scale,
                         float* out, int64_t stride) {
  typename V::reg acc[HT][NC];
  #pragma GCC unroll 32
  for (int h = 0; h < HT; ++h)
    #pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) acc[h][c] = V::zero();
  int64_t at[NC];
  #pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) at[c] = ch[c].at;
  for (int32_t d = 0; d < hd; ++d) {
    typename V::reg qv[HT];
    #pragma GCC unroll 4
    for (int h = 0; h < HT; ++h) qv[h] = V::bcast(q + static_cast<int64_t>(h) * hd + d);
    #pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      const typename V::reg k = V::template load<DT>(kpool, at[c]);
      at[c] += k_step;
      #pragma GCC unroll 4
      for (int h = 0; h < HT; ++h) acc[h][c] = V::fma(qv[h], k, acc[h][c]);
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < HT; ++h)
    #pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) V::store(out + h * stride + ch[c].p, acc[h][c], scale, ch[c].n);
}

// Up to 8 chunks of one lane type, scored for all heads when full or flushed.
template <class V, kv_dtype DT>
class chunk_batch {
 public:
  static constexpr int k_max = 8;
  chunk_batch(const float* q, int32_t n_group, int32_t hd, int64_t k_step, const void* kpool, float scale, float* out,
              int64_t stride)
      : q_(q), n_group_(n_group), hd_(hd), k_step_(k_step), kpool_(kpool), scale_(scale), out_(out), stride_(stride) {}

  void push(const k_chunk& c) {
    ch_[n_++] = c;
    if (n_ == k_max) flush();
  }

  // Scores the pending chunks: full tiles of nc<HT> chunks, then the rest in
  // one tile of 1, 2, 4 or 8 chunks, padded with chunks that store nothing.
  void flush() {
    if (n_ == 0) return;
    for_head_tiles<V::max_ht>(n_group_, [&]<int HT>(int32_t g) {
      constexpr int NC = V::template nc<HT>;
      const float* qg = q_ + static_cast<int64_t>(g) * hd_;
      float* og = out_ + g * stride_;
      int i = 0;
      for (; i + NC <= n_; i += NC) score_chunks<V, HT, NC, DT>(qg, hd_, k_step_, kpool_, ch_ + i, scale_, og, stride_);
      const int rem = n_ - i;
      if (rem == 0) return;
      for (int j = n_; j < k_max; ++j) ch_[j] = {ch_[0].at, 0, 0};
      if (rem == 1) {
        score_chunks<V, HT, 1, DT>(qg, hd_, k_step_, kpool_, ch_ + i, scale_, og, stride_);
      } else if (rem == 2) {
        score_chunks<V, HT, 2, DT>(qg, hd_, k_step_, kpool_, ch_ + i, scale_, og, stride_);
      } else if (rem <= 4) {
        score_chunks<V, HT, 4, DT>(qg, hd_, k_step_, kpool_, ch_ + i, scale_, og, stride_);
      } else {
        score_chunks<V, HT, 8, DT>(qg, hd_, k_step_, kpool_, ch_ + i, scale_, og, stride_);
      }
    });
    n_ = 0;
  }

 private:
  const float* q_;
  int32_t n_group_, hd_;
  int64_t k_step_;
  const void* kpool_;
  float scale_;
  float* out_;
  int64_t stride_;
  k_chunk ch_[k_max];
  int n_ = 0;
};

// Element at of a KV pool of dtype DT (f16, f32 or fp8_e5m2) as a float.
template <kv_dtype DT>
inline float load_kv1(const void* pool, int64_t at) {
  if constexpr (DT == kv_dtype::f16) {
    return _cvtsh_ss(static_cast<const uint16_t*>(pool)[at]);
  } else if constexpr (DT == kv_dtype::fp8_e5m2) {
    return _cvtsh_ss(static_cast<uint16_t>(static_cast<const uint8_t*>(pool)[at] << 8));
  } else {
    return static_cast<const float*>(pool)[at];
  }
}

// Pass 1 of attention_passes: dst[g * stride + p] = score of head g at
// position p < n_ctx (nothing is written past n_ctx). Slots go to chunks of
// Wide lanes where a whole chunk lies inside its block, then (when Narrow is
// not void) to chunks of Narrow lanes, and the rest one by one (block sizes
// that are not a multiple of the lane count).
template <class Wide, class Narrow, kv_dtype DT>
void scores_transposed(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                       const int32_t* block_table, int32_t n_ctx, float scale, float* dst, int64_t stride) {
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  chunk_batch<Wide, DT> wide(q, n_group, hd, bs, kv.k, scale, dst, stride);
  using narrow_lanes = std::conditional_t<std::is_void_v<Narrow>, Wide, Narrow>;
  chunk_batch<narrow_lanes, DT> narrow(q, n_group, hd, bs, kv.k, scale, dst, stride);
  const int32_t n_blocks = (n_ctx + bs - 1) / bs;
  int32_t p = 0;
  for (int32_t b = 0; p < n_ctx; ++b) {
    if (b + k_attention_prefetch_blocks < n_blocks) prefetch_head_block<3>(kv.k, kv, block_table[b + k_attention_prefetch_blocks], kv_head);
    const int64_t base = kv_k_index(kv, block_table[b], kv_head, 0, 0);
    const int32_t n = std::min(bs, n_ctx - p);
    int32_t s = 0;
    for (; s < n && s + Wide::L <= bs; s += Wide::L) wide.push({base + s, p + s, std::min(Wide::L, n - s)});
    if constexpr (!std::is_void_v<Narrow>) {
      for (; s < n && s + Narrow::L <= bs; s += Narrow::L) narrow.push({base + s, p + s, std::min(Narrow::L, n - s)});
    }
    for (; s < n; ++s) {
      for (int32_t g = 0; g < n_group; ++g) {
        const float* qg = q + static_cast<int64_t>(g) * hd;
        float acc = 0.0f;
        for (int32_t d = 0; d < hd; ++d) acc = std::fma(qg[d], load_kv1<DT>(kv.k, base + s + static_cast<int64_t>(d) * bs), acc);
        dst[g * stride + p + s] = acc * scale;
      }
    }
    p += n;
  }
  wide.flush();
  narrow.flush();
}

// The attention kernels' structure (three passes, no online rescaling, so the
// result is a fixed function of q and the logical K/V contents):
//   1. K::scores<DT>(q, n_group, kv, kv_head, block_table, n_ctx, scale, scratch, stride)
//      writes the scaled scores of head g at scratch + g * stride (junk allowed
//      past n_ctx up to round_up(n_ctx, 8)): scores_transposed above;
//   2. K::softmax_heads(scratch, stride, n_group, n_ctx, sinks, inv) turns them
//      into weights w and inv = 1 / sum(w), with the heads' sinks if not null
//      (softmax_heads above, or a wider one);
//   3. K::v_heads<HT, DT>(w, stride, kv, kv_head, block_table, n_ctx, inv, out)
//      writes out = (sum_p w[p] v_p) * inv for each head tile of
//      for_head_tiles<K::max_ht>.
// DT: the pools' dtype, f16, f32, fp8_e5m2 or q8_0 (K's functions branch to
// their q8_0 versions, ops_kvq_simd.h). n_ctx >= 1; the arguments are those of
// ops_table::attention.
template <class K>
void attention_passes(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                      const int32_t* block_table, int32_t first, int32_t n_ctx, float scale, const float* sinks, float* out,
                      float* scratch) {
  // A window [first, n_ctx): start at first's block; the positions of that
  // block before first get a score of -inf, hence a weight of exactly 0.
  const int32_t first_block = first / kv.block_size;
  const int32_t n_masked = first % kv.block_size;
  block_table += first_block;
  n_ctx -= first_block * kv.block_size;
  const int64_t stride = attention_scores_stride(n_ctx);
  const int32_t hd = kv.head_dim;
  auto passes = [&]<kv_dtype DT>() {
    K::template scores<DT>(q, n_group, kv, kv_head, block_table, n_ctx, scale, scratch, stride);
    for (int32_t g = 0; g < n_group; ++g) {
      for (int32_t p = 0; p < n_masked; ++p) scratch[g * stride + p] = -std::numeric_limits<float>::infinity();
    }
    head_floats inv(n_group);
    K::softmax_heads(scratch, stride, n_group, n_ctx, sinks, inv.data());
    for_head_tiles<K::max_ht>(n_group, [&]<int HT>(int32_t g) {
      K::template v_heads<HT, DT>(scratch + g * stride, stride, kv, kv_head, block_table, n_ctx, inv.data() + g,
                                   out + static_cast<int64_t>(g) * hd);
    });
  };
  switch (kv.dtype) {
    case kv_dtype::f16: passes.template operator()<kv_dtype::f16>(); break;
    case kv_dtype::f32: passes.template operator()<kv_dtype::f32>(); break;
    case kv_dtype::q8_0: passes.template operator()<kv_dtype::q8_0>(); break;
    case kv_dtype::fp8_e5m2: passes.template operator()<kv_dtype::fp8_e5m2>(); break;
  }
}

}  // namespace
}  // namespace spate::kernels::detail
