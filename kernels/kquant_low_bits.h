// Q2_K / Q3_K helpers shared by the SIMD matmul kernels (matmul_avx2.cpp,
// matmul_avx512.cpp): decoding of their packed quants (the group layout of
// matmul_internal.h: a 64-byte 2-bit qs region per block, plus Q3_K's 32-byte
// qh region), Q2_K's per-16 scales and mins, the per-call tables of
// activation half sums (Q2_K's pairs; the half-bias tables of Q6_K / Q3_K),
// and Q2_K's float step. Internal, header-only.
//
// Contracts as simd_avx2.h's: include ONLY from *_avx2.cpp / *_avx512.cpp (and
// after simd_avx2.h); unnamed namespace; fixed instruction sequences (the
// avx512 kernels' bitwise equality with the avx2 ones relies on it);
// always_inline in the inner loops.
//
// Q2_K's min term: value = sd*(sc_h*q) - dm*mn_h in half h (16 elements) of a
// 32-block, so the dot with activations d_a * a is
//   d_a*sd * isum  -  d_a*dm * msum,
//   isum = sc_0*dot_0 + sc_1*dot_1,   msum = mn_0*s_0 + mn_1*s_1,
// with dot_h the exact dot of half h's quants with a and s_h the exact sum of
// half h's activation quants. msum is ONE madd of the per-column int16 pair
// (mn_0, mn_1) with the row's pair (s_0, s_1) from the table below, so the min
// costs one integer instruction and one FMA per (row, block), shared by both
// ISA levels. Bounds: |s_h| <= 16*127 fits int16; |msum| <= 2*15*2032 and
// |isum| <= 2*15*16*3*127 are exact in f32.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "kernels/matmul_internal.h"
#include "kernels/simd_avx2.h"

namespace spate::kernels::detail {
namespace {

// Bits 0..1 of the quants of weight vector J (0..7) of a block whose 64-byte
// packed qs start at qs (packed vector J/4, bit pair J%4), as bytes 0..3.
template <int J>
__attribute__((always_inline)) inline __m256i k2_low_vec(const uint8_t* qs) {
  const __m256i v = load256(qs + 32 * (J / 4));
  const __m256i m = _mm256_set1_epi8(3);
  if constexpr (J % 4 == 0) return _mm256_and_si256(v, m);
  else return _mm256_and_si256(_mm256_srli_epi16(v, 2 * (J % 4)), m);
}

// Q3_K: bit J of each byte of h moved to bit 2 (other bits cleared).
template <int J>
__attribute__((always_inline)) inline __m256i q3_hbit(__m256i h) { return hbit_to<2, J>(h); }

// Unsigned Q3_K quants (0..7) of weight vector J of block b.
template <int J>
__attribute__((always_inline)) inline __m256i q3_vec(const uint8_t* g, const group_layout& L, int64_t b) {
  const __m256i h = load256(g + L.qh + 32 * b);
  return _mm256_or_si256(k2_low_vec<J>(g + L.qs + 64 * b), q3_hbit<J>(h));
}

// The 8 bytes of half h of block b's sc region, one per column, zero-extended to int32.
__attribute__((always_inline)) inline __m256i half_bytes32(const uint8_t* g, const group_layout& L, int64_t b, int h) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + L.sc + 16 * b + 8 * h)));
}

// Q2_K: int32 4-bit scale per column of half h of block b.
__attribute__((always_inline)) inline __m256i q2_scale32(const uint8_t* g, const group_layout& L, int64_t b, int h) {
  return _mm256_and_si256(half_bytes32(g, L, b, h), _mm256_set1_epi32(15));
}

// Q2_K: per column, the int16 pair (mn_0, mn_1) of block b in its 32-bit lane.
__attribute__((always_inline)) inline __m256i q2_min_pairs(const uint8_t* g, const group_layout& L, int64_t b) {
  const __m256i m0 = _mm256_srli_epi32(half_bytes32(g, L, b, 0), 4);
  const __m256i m1 = _mm256_srli_epi32(half_bytes32(g, L, b, 1), 4);
  return _mm256_or_si256(m0, _mm256_slli_epi32(m1, 16));
}

// Q2_K's float step per (row, block), the one sequence of every SIMD level:
//   acc = fma(cvt(isum), vd * d_a, acc);  acc = fma(cvt(msum), vnm * d_a, acc)
// with msum = madd(min pairs, (s_0, s_1)); vnm = -dmin per column.
__attribute__((always_inline)) inline __m256 block_fma_msum(__m256 acc, __m256i isum, __m256i min_pairs,
                                                            int32_t s_pair, __m256 vd, __m256 vnm, float d_a) {
  const __m256i msum = _mm256_madd_epi16(min_pairs, _mm256_set1_epi32(s_pair));
  const __m256 da = _mm256_set1_ps(d_a);
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(vd, da), acc);
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(vnm, da), acc);
}

// Exact sum of the 16 activation quants at q.
__attribute__((always_inline)) inline int32_t sum16(const int8_t* q) {
  // sad over (q XOR 0x80) = sum(q + 128): two u64 partial sums.
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i s = _mm_sad_epu8(_mm_xor_si128(v, _mm_set1_epi8(static_cast<char>(0x80))), _mm_setzero_si128());
  return static_cast<int32_t>(_mm_cvtsi128_si32(_mm_add_epi64(s, _mm_unpackhi_epi64(s, s)))) - 128 * 16;
}

// Half-bias table of Q6_K / Q3_K for rows [r0, r1): entry (r - r0) * 2nb + 2b + h =
// mul * s_h, s_h = sum of activation quants 16h .. 16h+15 of block b of row r. Exact.
inline void fill_half_bias_table(const void* act, int64_t n_in, int64_t r0, int64_t r1, int mul, int32_t* out) {
  const int64_t nb = n_in / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const q8_act_row a = q8_act_at(act, n_in, r);
    for (int64_t b = 0; b < 2 * nb; ++b) out[(r - r0) * 2 * nb + b] = mul * sum16(a.qs + 16 * b);
  }
}

// Split half-bias table of the avx2 Q6_K kernel for rows [r0, r1): entry (r - r0) * 2nb + 2b + h
// = (lo & 0xffff) | hi << 16, lo = mul * (sum of activation quants k = 16h + 4j and 16h + 4j + 1,
// j = 0..3, of block b of row r) and hi = mul * (the same at 16h + 4j + 2 and + 3): the two int16
// lanes of a column's pair in vpmaddubsw's output over the half's 4 weight vectors (vector J
// holds k = 4J .. 4J+3), so that adding the entry to every pair gives each lane its own share of
// mul * s_h. |mul| <= 32: |lo|, |hi| <= 32 * 8 * 127 < 2^15. Exact.
inline void fill_half_bias_split_table(const void* act, int64_t n_in, int64_t r0, int64_t r1, int mul,
                                       int32_t* out) {
  const int64_t nb = n_in / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const int8_t* q = q8_act_at(act, n_in, r).qs;
    for (int64_t hb = 0; hb < 2 * nb; ++hb, q += 16) {
      int32_t lo = 0, hi = 0;
      for (int j = 0; j < 4; ++j) {
        lo += q[4 * j] + q[4 * j + 1];
        hi += q[4 * j + 2] + q[4 * j + 3];
      }
      out[(r - r0) * 2 * nb + hb] = static_cast<int32_t>((uint32_t(mul * lo) & 0xffff) | uint32_t(mul * hi) << 16);
    }
  }
}

// Block-bias table for rows [r0, r1): entry (r - r0) * nb + b = mul * s, s = sum of the
// 32 activation quants of block b of row r. Exact (|entry| <= 128 * 32 * 127). The start
// value of a block's int32 sum when the weights are fed with an offset: Q8_0, IQ4_NL and MXFP4
// as w + 128 (mul = -128), Q4_0 and Q5_0 as their unsigned quants q (mul = -8, -16).
inline void fill_block_bias_table(const void* act, int64_t n_in, int64_t r0, int64_t r1, int mul, int32_t* out) {
  const int64_t nb = n_in / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const q8_act_row a = q8_act_at(act, n_in, r);
    for (int64_t b = 0; b < nb; ++b) out[(r - r0) * nb + b] = mul * (sum16(a.qs + 32 * b) + sum16(a.qs + 32 * b + 16));
  }
}

// Q2_K's half-sum table for rows [r0, r1): entry (r - r0) * nb + b =
// (s_0 & 0xffff) | s_1 << 16, s_h = sum of activation quants 16h .. 16h+15 of block b of row r.
inline void fill_half_sum_pairs(const void* act, int64_t n_in, int64_t r0, int64_t r1, int32_t* out) {
  const int64_t nb = n_in / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const q8_act_row a = q8_act_at(act, n_in, r);
    for (int64_t b = 0; b < nb; ++b) {
      const uint32_t s0 = uint32_t(sum16(a.qs + 32 * b)) & 0xffff, s1 = uint32_t(sum16(a.qs + 32 * b + 16));
      out[(r - r0) * nb + b] = static_cast<int32_t>(s0 | s1 << 16);
    }
  }
}

// True for decoders whose min is per 16-element half (Q2_K: they declare half_mins = true).
template <class Dec>
inline constexpr bool half_mins_of = requires { requires Dec::half_mins; };
// True for decoders fed unsigned quants whose offset comes from a half-bias
// table (they declare bias_mul: Q6_K -32, Q3_K -4).
template <class Dec>
inline constexpr bool half_bias_of = requires { Dec::bias_mul; };
// True for half-bias decoders whose table is the split one (fill_half_bias_split_table; the
// avx2 Q6_K declares bias_split = true): the entry goes to both int16 lanes of every pair.
template <class Dec>
inline constexpr bool half_bias_split_of = requires { requires Dec::bias_split; };
// The block-bias multiplier of decoders whose block sums start at mul * sum(a)
// (they declare block_bias_mul: Q4_0 -8, Q5_0 -16; avx512 Q8_0 / IQ4_NL / MXFP4 -128); 0: none.
template <class Dec>
constexpr int block_bias_mul_of() {
  if constexpr (requires { Dec::block_bias_mul; }) return Dec::block_bias_mul;
  else return 0;
}
template <class Dec>
inline constexpr bool block_bias_of = block_bias_mul_of<Dec>() != 0;

// Per-thread scratch for per-call tables (grown, never shrunk; one per thread
// and per including file, so concurrent matmul calls never share it).
inline int32_t* table_buffer(size_t n) {
  thread_local std::vector<int32_t> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace
}  // namespace spate::kernels::detail
