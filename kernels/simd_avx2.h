// AVX2+FMA+F16C helpers shared by the SIMD kernel files (matmul_avx2.cpp,
// matmul_avx512.cpp, ops_avx2.cpp, ops_avx512.cpp; the ops-only ones are in
// ops_simd_avx2.h). Internal, header-only.
//
// Contracts:
//  * Include ONLY from *_avx2.cpp and *_avx512.cpp: these are the only files
//    compiled with the AVX flags (spate_isa_flags in the top CMakeLists.txt)
//    and only called after a cpu_supports() check. A baseline .cpp calling
//    these helpers fails to compile (target option mismatch), and forcing it
//    to compile would put AVX instructions on the path of any CPU.
//  * Everything here is in an unnamed namespace, so every including file gets
//    its own copy compiled with its own flags. (With external linkage the
//    linker could keep one copy, e.g. the AVX-512-compiled one, and run it on
//    an AVX2-only CPU from the avx2 kernels.)
//  * Every helper is a fixed instruction sequence: callers in different files
//    get bitwise identical results from equal inputs (the avx512 matmul relies
//    on this for its bitwise equality with the avx2 one).
//  * Every helper is always_inline: they sit in the innermost loops of the
//    matmul micro-kernels, where an out-of-line call costs a fifth of decode
//    speed (spate_bench tg128 on SmolLM2 Q4_1: ~145 tok/s with plain `inline`,
//    which GCC did not always honour here, vs ~182 always inlined).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/ggml_type.h"
#include "kernels/quant_blocks.h"

namespace spate::kernels::detail {
namespace {

// ---------------------------------------------------------------- loads

// The 4 bytes p[0..3] broadcast to every 32-bit lane.
__attribute__((always_inline)) inline __m256i bcast32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
// 8 fp16 values at p (unaligned) as floats.
__attribute__((always_inline)) inline __m256 load_f16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// 32 bytes at p (unaligned: the inline records place entries at any offset).
__attribute__((always_inline)) inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// ---------------------------------------------------------------- packed weight quants
// (vector layout of matmul_internal.h: packed qs vector J % 4, low nibbles for J < 4, high for J >= 4)

// Bit J of each byte of h moved to bit To (other bits cleared).
template <int To, int J>
__attribute__((always_inline)) inline __m256i hbit_to(__m256i h) {
  const __m256i hb = _mm256_and_si256(h, _mm256_set1_epi8(static_cast<char>(1 << J)));
  if constexpr (J < To) return _mm256_slli_epi16(hb, To - J);
  else if constexpr (J == To) return hb;
  else return _mm256_srli_epi16(hb, J - To);
}

// Q5 high bits: bit J of each byte of h moved to bit 4.
template <int J>
__attribute__((always_inline)) inline __m256i q5_hbit(__m256i h) { return hbit_to<4, J>(h); }

// Low 4 bits of the quants of weight vector J (0..7) of the block whose packed qs start at qs.
template <int J>
__attribute__((always_inline)) inline __m256i nibble_vec(const uint8_t* qs) {
  const __m256i v = load256(qs + 32 * (J % 4));
  if constexpr (J < 4) return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
  else return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f));
}

// Q6_K high bits: bits 2T..2T+1 of each byte of h moved to bits 4..5 (other bits cleared).
template <int T>
__attribute__((always_inline)) inline __m256i q6_hbits(__m256i h) {
  const __m256i m = _mm256_set1_epi8(0x30);
  if constexpr (T == 0) return _mm256_and_si256(_mm256_slli_epi16(h, 4), m);
  else if constexpr (T == 1) return _mm256_and_si256(_mm256_slli_epi16(h, 2), m);
  else if constexpr (T == 2) return _mm256_and_si256(h, m);
  else return _mm256_and_si256(_mm256_srli_epi16(h, 2), m);
}

// Unsigned quants (0..15 or 0..31) of weight vector J of a 4-bit (Bits = 4) or
// 5-bit block whose packed qs start at g + qs and its 32 qh bytes at g + qh
// (qh is used only when Bits == 5).
template <int Bits, int J>
__attribute__((always_inline)) inline __m256i quant_vec(const uint8_t* g, int64_t qs, int64_t qh) {
  __m256i w = nibble_vec<J>(g + qs);
  if constexpr (Bits == 5) w = _mm256_or_si256(w, q5_hbit<J>(load256(g + qh)));
  return w;
}

// The 16-entry int8 code book of a 4-bit lookup-table type T (IQ4_NL: iq4nl_values;
// MXFP4: mxfp4_values), indexed by the 4-bit quant.
template <ggml_type T>
inline constexpr const int8_t* code_book = T == ggml_type::mxfp4 ? mxfp4_values : iq4nl_values;

// T's code book plus Bias (0: signed values; 128: the values + 128 as unsigned bytes,
// IQ4_NL 1..241, MXFP4 116..140) in both 128-bit lanes: a vpshufb table.
template <ggml_type T, int Bias>
__attribute__((always_inline)) inline __m256i code_book_lut() {
  const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(code_book<T>)));
  if constexpr (Bias == 0) return t;
  else return _mm256_xor_si256(t, _mm256_set1_epi8(static_cast<char>(0x80)));  // v + 128 for v in [-128, 127]
}

// Weight vector J of a lookup-table block (IQ4_NL, MXFP4) whose packed qs (code book
// indices) start at qs: each index replaced by its byte in lut (code_book_lut).
template <int J>
__attribute__((always_inline)) inline __m256i code_book_vec(const uint8_t* qs, __m256i lut) {
  return _mm256_shuffle_epi8(lut, nibble_vec<J>(qs));
}

// The 8 per-column f32 scales of a 32-block of type T from its d entry at p: 8 fp16
// (Q8_0, IQ4_NL and the legacy types) or 8 bf16 (MXFP4: its E8M0 scales, converted
// exactly at repack). Exact either way.
template <ggml_type T>
__attribute__((always_inline)) inline __m256 load_d8(const uint8_t* p) {
  if constexpr (T == ggml_type::mxfp4) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    return load_f16x8(p);
  }
}

// Per-column scale vd and min vm of a legacy block from its 8 fp16 scales at g + d:
// Min == 0 reads 8 fp16 mins at g + m; otherwise (Q4_0, Q5_0) there is no min term
// (the Min * sum(a) offset is in the block's int32 start value, block_bias_mul):
// vm = 0 and m is not used.
template <int Min>
__attribute__((always_inline)) inline void legacy_scales(const uint8_t* g, int64_t d, int64_t m, __m256& vd, __m256& vm) {
  vd = load_f16x8(g + d);
  if constexpr (Min == 0) vm = load_f16x8(g + m);
  else vm = _mm256_setzero_ps();
}

// Prefetches the lines_per_block cache lines of block b of the record at pf,
// to L1 (Locality = 3, prefetcht0) or L2 (2, prefetcht1); pf == nullptr: none.
template <int Locality = 3>
__attribute__((always_inline)) inline void prefetch_block(const uint8_t* pf, int64_t b, int64_t lines_per_block) {
  if (pf == nullptr) return;
  for (int64_t i = 0; i < lines_per_block; ++i) __builtin_prefetch(pf + (b * lines_per_block + i) * 64, 0, Locality);
}

// Writes the lanes of v that fall in [c_lo, c_hi) (lane 0 is column c0) to yrow.
__attribute__((always_inline)) inline void store_cols(float* yrow, int64_t c0, int64_t c_lo, int64_t c_hi, __m256 v) {
  if (c_lo == c0 && c_hi == c0 + 8) {
    _mm256_storeu_ps(yrow + c0, v);
    return;
  }
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, v);
  for (int64_t c = c_lo; c < c_hi; ++c) yrow[c] = tmp[c - c0];
}

// The float part of one (row, block) of the quantized matmul kernels, the one
// sequence every SIMD level uses (so their results are bitwise equal):
//   acc = fma(cvt(isum), vd * d_a, acc);  acc = fma(vm, s_a, acc) if HasMin.
// isum: exact int32 dots per column; vd/vm: weight scales/mins per column;
// d_a/s_a: the activation block's d and s (matmul_internal.h).
template <bool HasMin>
__attribute__((always_inline)) inline __m256 block_fma(__m256 acc, __m256i isum, __m256 vd, __m256 vm, float d_a, float s_a) {
  const __m256 scale = _mm256_mul_ps(vd, _mm256_set1_ps(d_a));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc);
  if constexpr (HasMin) acc = _mm256_fmadd_ps(vm, _mm256_set1_ps(s_a), acc);
  return acc;
}

// Calls f.template operator()<J>() for each J of the pack, in the pack's order.
template <int... J, class F>
__attribute__((always_inline)) inline void for_each_vec_in(F&& f) {
  (f.template operator()<J>(), ...);
}

// Calls f.template operator()<J>() for the 8 weight vectors J = 0..7 of a block, in order.
template <class F>
__attribute__((always_inline)) inline void for_each_vec(F&& f) {
  for_each_vec_in<0, 1, 2, 3, 4, 5, 6, 7>(f);
}

// ---------------------------------------------------------------- reductions

// Lanes [0, r) set, for masked loads/stores of a tail of r < 8 floats.
__attribute__((always_inline)) inline __m256i tail_mask(int64_t r) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(r)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Horizontal sum, fixed order: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).
__attribute__((always_inline)) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Horizontal max (same lane order as hsum).
__attribute__((always_inline)) inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace spate::kernels::detail
