// The SIMD Gated DeltaNet kernels (kernels/gdn.h), written once over a lane type V and instantiated by
// gdn_avx2.cpp (8 lanes) and gdn_avx512.cpp (16 lanes). Channels / value dims go in the lanes, so every
// output is computed by the operations gdn_ref.cpp applies to it, in the same order (one FMA chain per
// output, no horizontal sums): each lane has the reference's bits at every width.
// Internal, header-only: include only from *_avx2.cpp / *_avx512.cpp; everything is in an unnamed
// namespace (no SIMD code leaves the including file, scripts/check_isa_objects.py).
//
// V provides: reg, L (lanes), set1, zero, load / store (L floats), load_n / store_n (the first n < L
// lanes; the others read as 0, not written), gather(p, stride, n) (lane l < n: p[l * stride], others 0), fma(a, b, c) = a*b + c, fnma(a, b, c) = c - a*b, mul, sub,
// add, div, and the operations of exp_lanes (ops_simd_avx2.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/gdn.h"
#include "kernels/gdn_internal.h"
#include "kernels/ops_simd_avx2.h"

namespace spate::kernels::detail {
namespace {

// Vectors of columns per tile: 4 chains of FMAs in flight; a tile's columns of a 128-dim state fit L1.
inline constexpr int k_gdn_nj = 4;

// L floats at p, or the first n of them (lanes past n read as 0).
template <class V>
inline typename V::reg ld(const float* p, int n) {
  return n == V::L ? V::load(p) : V::load_n(p, n);
}
template <class V>
inline void st(float* p, typename V::reg x, int n) {
  if (n == V::L) {
    V::store(p, x);
  } else {
    V::store_n(p, x, n);
  }
}

// ---------------------------------------------------------------- short_conv
// Tokens per pass over the channels: the weights are gathered once per tile, and a tile's rows are
// walked along their length (a channel-major walk would touch a new page per row).
inline constexpr int32_t k_conv_token_tile = 16;

template <class V>
void short_conv_simd(const float* x, int64_t ld_x, const float* w, int32_t kernel, float* state, float* y,
                     int64_t ld_y, int32_t n_tokens, int64_t n_ch, bool silu) {
  using reg = typename V::reg;
  if (n_tokens <= 0) return;
  const int32_t n_state = kernel - 1;
  // Row r of x_ext (the state's rows, then x's), from channel c0.
  auto ext = [&](int64_t r, int64_t c0) { return r < n_state ? state + r * n_ch + c0 : x + (r - n_state) * ld_x + c0; };
  for (int32_t tb = 0; tb < n_tokens; tb += k_conv_token_tile) {
    const int32_t te = std::min(n_tokens, tb + k_conv_token_tile);
    for (int64_t c0 = 0; c0 < n_ch; c0 += V::L) {
      const int n = static_cast<int>(std::min<int64_t>(V::L, n_ch - c0));
      reg wv[k_short_conv_max_kernel];
      for (int32_t j = 0; j < kernel; ++j) wv[j] = V::gather(w + c0 * kernel + j, kernel, n);
      for (int32_t t = tb; t < te; ++t) {
        reg acc = V::zero();
        for (int32_t j = 0; j < kernel; ++j) acc = V::fma(wv[j], ld<V>(ext(t + j, c0), n), acc);
        if (silu) acc = V::div(acc, V::add(V::set1(1.0f), exp_lanes<V>(V::sub(V::zero(), acc))));
        st<V>(y + t * ld_y + c0, acc, n);
      }
    }
  }
  // The state is read above (rows t + j < n_state) and replaced only now. Ascending r reads each old
  // row before overwriting it (as the reference).
  for (int32_t r = 0; r < n_state; ++r) {
    for (int64_t c0 = 0; c0 < n_ch; c0 += V::L) {
      const int n = static_cast<int>(std::min<int64_t>(V::L, n_ch - c0));
      st<V>(state + r * n_ch + c0, ld<V>(ext(n_tokens + r, c0), n), n);
    }
  }
}

// ---------------------------------------------------------------- delta_rule
// Columns [j0, j0 + (NJ-1)*L + tail) of delta_rule over all the call's tokens (tail in 1..L lanes in
// the last vector). A column's arithmetic never depends on its tile.
template <class V, int NJ>
void delta_rule_tile(const delta_rule_args& a, int32_t j0, int tail) {
  using reg = typename V::reg;
  const int32_t dk = a.dk;
  const int64_t dv = a.dv;
  float* const cols = a.state + j0;
  for (int32_t t = 0; t < a.n_tokens; ++t) {
    const float* q = a.q + t * a.ld_q;
    const float* k = a.k + t * a.ld_k;
    const float* v = a.v + t * a.ld_v + j0;
    const reg decay = V::set1(std::exp(a.g[t * a.ld_g]));  // libm expf, as the reference
    reg acc[NJ], delta[NJ];
    #pragma GCC unroll 4
    for (int c = 0; c < NJ; ++c) acc[c] = V::zero();
    for (int32_t i = 0; i < dk; ++i) {
      const reg kb = V::set1(k[i]);
      const float* row = cols + i * dv;
      #pragma GCC unroll 4
      for (int c = 0; c < NJ; ++c) acc[c] = V::fma(kb, V::mul(decay, ld<V>(row + c * V::L, c == NJ - 1 ? tail : V::L)), acc[c]);
    }
    const reg beta = V::set1(a.beta[t * a.ld_beta]);
    #pragma GCC unroll 4
    for (int c = 0; c < NJ; ++c) {
      delta[c] = V::mul(V::sub(ld<V>(v + c * V::L, c == NJ - 1 ? tail : V::L), acc[c]), beta);
      acc[c] = V::zero();
    }
    for (int32_t i = 0; i < dk; ++i) {
      const reg kb = V::set1(k[i]), qb = V::set1(q[i]);
      float* row = cols + i * dv;
      #pragma GCC unroll 4
      for (int c = 0; c < NJ; ++c) {
        const int n = c == NJ - 1 ? tail : V::L;
        const reg s = V::fma(kb, delta[c], V::mul(decay, ld<V>(row + c * V::L, n)));
        st<V>(row + c * V::L, s, n);
        acc[c] = V::fma(qb, s, acc[c]);
      }
    }
    const reg scale = V::set1(a.scale);
    float* out = a.out + t * a.ld_out + j0;
    #pragma GCC unroll 4
    for (int c = 0; c < NJ; ++c) st<V>(out + c * V::L, V::mul(acc[c], scale), c == NJ - 1 ? tail : V::L);
  }
}

// Calls tile.template operator()<NJ>(j0, tail) over the dv columns: tiles of k_gdn_nj vectors, then
// single vectors, the last one partial.
template <class V, class F>
inline void for_column_tiles(int32_t dv, F&& tile) {
  int32_t j = 0;
  for (; j + k_gdn_nj * V::L <= dv; j += k_gdn_nj * V::L) tile.template operator()<k_gdn_nj>(j, V::L);
  for (; j + V::L <= dv; j += V::L) tile.template operator()<1>(j, V::L);
  if (j < dv) tile.template operator()<1>(j, dv - j);
}

template <class V>
void delta_rule_simd(const delta_rule_args& a) {
  for_column_tiles<V>(a.dv, [&]<int NJ>(int32_t j0, int tail) { delta_rule_tile<V, NJ>(a, j0, tail); });
}

// ---------------------------------------------------------------- delta_rule_chunked
// The dots of one chunk: s.a[t*C + u] = k_t . k_u (u < t), s.w[t*C + u] = q_t . k_u (u <= t), each one
// FMA chain over i from +0 (the reference's), with the keys u in the lanes (s.kt), 4 tokens at a time.
template <class V>
void chunk_dots(const delta_rule_args& a, int32_t t0, int32_t m, const chunk_scratch& s) {
  using reg = typename V::reg;
  constexpr int64_t c = k_delta_rule_chunk;
  static_assert(c % V::L == 0);
  for (int32_t tb = 0; tb < m; tb += 4) {
    const float* k[4];
    const float* q[4];
    for (int r = 0; r < 4; ++r) {
      const int32_t t = std::min(tb + r, m - 1);  // rows past m repeat the last one, not stored
      k[r] = a.k + (t0 + t) * a.ld_k;
      q[r] = a.q + (t0 + t) * a.ld_q;
    }
    const int32_t t_hi = std::min(tb + 3, m - 1);
    for (int32_t u0 = 0; u0 <= t_hi; u0 += V::L) {
      reg kk[4], qk[4];
      #pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) kk[r] = qk[r] = V::zero();
      for (int32_t i = 0; i < a.dk; ++i) {
        const reg kv = V::load(s.kt + i * c + u0);
        #pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          kk[r] = V::fma(V::set1(k[r][i]), kv, kk[r]);
          qk[r] = V::fma(V::set1(q[r][i]), kv, qk[r]);
        }
      }
      for (int r = 0; r < 4 && tb + r < m; ++r) {
        V::store(s.a + (tb + r) * c + u0, kk[r]);
        V::store(s.w + (tb + r) * c + u0, qk[r]);
      }
    }
  }
}

// Columns [j0, ...) of one prepared chunk [t0, t0 + m) (the reference's chunk_columns_ref, NJ vectors
// of columns at once). s.sk, s.sq, s.d hold the tile's rows at stride k_gdn_tile_cols.
template <class V, int NJ>
void chunk_tile(const delta_rule_args& a, int32_t t0, int32_t m, const chunk_scratch& s, int32_t j0, int tail) {
  using reg = typename V::reg;
  constexpr int64_t c = k_delta_rule_chunk, tc = k_gdn_tile_cols;
  static_assert(NJ * V::L <= tc);
  const int32_t dk = a.dk;
  const int64_t dv = a.dv;
  float* const cols = a.state + j0;
  auto n_of = [&](int cv) { return cv == NJ - 1 ? tail : V::L; };
  for (int32_t t = 0; t < m; ++t) {  // S0 k_t, S0 q_t
    const float* q = a.q + (t0 + t) * a.ld_q;
    const float* k = a.k + (t0 + t) * a.ld_k;
    reg ak[NJ], aq[NJ];
    #pragma GCC unroll 4
    for (int cv = 0; cv < NJ; ++cv) ak[cv] = aq[cv] = V::zero();
    for (int32_t i = 0; i < dk; ++i) {
      const reg kb = V::set1(k[i]), qb = V::set1(q[i]);
      #pragma GCC unroll 4
      for (int cv = 0; cv < NJ; ++cv) {
        const reg sv = ld<V>(cols + i * dv + cv * V::L, n_of(cv));
        ak[cv] = V::fma(kb, sv, ak[cv]);
        aq[cv] = V::fma(qb, sv, aq[cv]);
      }
    }
    #pragma GCC unroll 4
    for (int cv = 0; cv < NJ; ++cv) {
      V::store(s.sk + t * tc + cv * V::L, ak[cv]);
      V::store(s.sq + t * tc + cv * V::L, aq[cv]);
    }
  }
  for (int32_t t = 0; t < m; ++t) {  // delta_t by forward substitution
    const float* v = a.v + (t0 + t) * a.ld_v + j0;
    const reg eg = V::set1(s.eg[t]), beta = V::set1(s.beta[t]);
    reg acc[NJ];
    #pragma GCC unroll 4
    for (int cv = 0; cv < NJ; ++cv) {
      acc[cv] = V::mul(beta, V::fnma(eg, V::load(s.sk + t * tc + cv * V::L), ld<V>(v + cv * V::L, n_of(cv))));
    }
    for (int32_t u = 0; u < t; ++u) {
      const reg au = V::set1(s.a[t * c + u]);
      #pragma GCC unroll 4
      for (int cv = 0; cv < NJ; ++cv) acc[cv] = V::fnma(au, V::load(s.d + u * tc + cv * V::L), acc[cv]);
    }
    #pragma GCC unroll 4
    for (int cv = 0; cv < NJ; ++cv) V::store(s.d + t * tc + cv * V::L, acc[cv]);
  }
  const reg scale = V::set1(a.scale);
  for (int32_t t = 0; t < m; ++t) {  // outputs
    const reg eg = V::set1(s.eg[t]);
    reg acc[NJ];
    #pragma GCC unroll 4
    for (int cv = 0; cv < NJ; ++cv) acc[cv] = V::mul(eg, V::load(s.sq + t * tc + cv * V::L));
    for (int32_t u = 0; u <= t; ++u) {
      const reg wu = V::set1(s.w[t * c + u]);
      #pragma GCC unroll 4
      for (int cv = 0; cv < NJ; ++cv) acc[cv] = V::fma(wu, V::load(s.d + u * tc + cv * V::L), acc[cv]);
    }
    float* out = a.out + (t0 + t) * a.ld_out + j0;
    #pragma GCC unroll 4
    for (int cv = 0; cv < NJ; ++cv) st<V>(out + cv * V::L, V::mul(acc[cv], scale), n_of(cv));
  }
  const reg eg_last = V::set1(s.eg[m - 1]);
  for (int32_t i = 0; i < dk; ++i) {  // the state after the chunk
    float* row = cols + i * dv;
    reg acc[NJ];
    #pragma GCC unroll 4
    for (int cv = 0; cv < NJ; ++cv) acc[cv] = V::mul(eg_last, ld<V>(row + cv * V::L, n_of(cv)));
    for (int32_t u = 0; u < m; ++u) {
      const reg ku = V::set1(s.ku[u * dk + i]);
      #pragma GCC unroll 4
      for (int cv = 0; cv < NJ; ++cv) acc[cv] = V::fma(ku, V::load(s.d + u * tc + cv * V::L), acc[cv]);
    }
    #pragma GCC unroll 4
    for (int cv = 0; cv < NJ; ++cv) st<V>(row + cv * V::L, acc[cv], n_of(cv));
  }
}

template <class V>
void delta_rule_chunked_simd(const delta_rule_args& a, float* scratch) {
  const chunk_scratch s = chunk_scratch_at(scratch, a.dk);
  for_each_chunk(a, [&](int32_t t0, int32_t m) {
    chunk_prepare(a, t0, m, s);
    chunk_dots<V>(a, t0, m, s);
    chunk_scale_aw(m, s);
    for_column_tiles<V>(a.dv, [&]<int NJ>(int32_t j0, int tail) { chunk_tile<V, NJ>(a, t0, m, s, j0, tail); });
  });
}

}  // namespace
}  // namespace spate::kernels::detail
