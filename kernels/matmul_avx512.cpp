// AVX-512 VNNI matmul kernels for the legacy quantized types (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0), IQ4_NL, MXFP4 and the K-quants (Q2_K .. Q6_K) over the 8-column
// groups of matmul_internal.h in their inline records (the same entries
// as the avx2 kernels' records, stored block by block; read through inline_dec).
//
// Micro-kernel: one group of 8 output columns x R activation rows (R = 1..8,
// using the 32 EVEX ymm registers); with several rows, two neighbouring groups
// (16 columns) on zmm registers (pair_dec), so that one activation broadcast
// feeds 16 columns (measured 1.3-1.7x in cache on a Zen 5 EPYC; docs/journal/performance.md,
// "Pairs of groups on 512-bit vectors"). Per 32-block the 8 weight vectors are
// decoded ONCE to unsigned bytes and applied to all R rows with
//   isum[r] = dpbusd(isum[r], w_J, broadcast(a[r].qs[4J .. 4J+3]))
// (u8 x s8, four products summed into each int32 lane, no saturation), so lane
// c of isum[r] is the exact int32 dot of column c with row r. Rows with few
// siblings split their chain over two accumulators (even / odd J) to cover the
// dpbusd latency; integer sums are exact, so the split changes nothing.
// The float part per (row, block) is the avx2 kernel's sequence (block_fma of
// simd_avx2.h, shared by both files):
//   acc = fma(cvt(isum), d_w * d_a, acc)
//   acc = fma(m_w, s_a, acc)                 (types with a min term)
// so results are bitwise equal to matmul_avx2 and independent of the row
// tiling, the column split, the vector width (a pair's lanes run the same
// instructions) and the thread (batch invariance).
//
// Q8_0 (signed weights): dpbusd needs one unsigned operand, so the kernel
// feeds w + 128 (w XOR 0x80) and corrects exactly in int32:
//   sum_k (w+128) * a  =  sum_k w * a  +  128 * sum_k a
// The accumulator of (row, block) starts at -128 * sum_k a, taken from a
// per-call table of activation block sums (fill_block_bias_table). Q4_0 and
// Q5_0 feed their unsigned quants q and start at -8 * sum_k a (-16): the
// block's offset stays in the exact int32 sum, so their float part per
// (row, block) is one multiply and one FMA, as Q8_0's, not two FMAs.
// Bounds: |partial| <= 8 vectors * 4 * 255 * 127 < 2^21: no int32 overflow.
// IQ4_NL and MXFP4 (signed code book values v = iq4nl_values[q], mxfp4_values[q])
// are fed the same way: the vpshufb table holds v + 128, with the same -128 * sum(a) start.
//
// K-quants: a 32-block's integer sum is scaled per column by its sub-block
// scale(s) in int32, exactly as the avx2 kernel's madd by the scales:
//   Q4_K / Q5_K: isum = sc * sum_J dpbusd(q_J, a_J)          (one scale per block)
//   Q6_K       : isum = sum_h sc_h * (sum_{J in half h} dpbusd(q_J, a_J) - 32 * sum_{k in h} a_k)
//   Q3_K       : as Q6_K with q = 0..7 and a -4 * sum_{k in h} a_k start value
//   Q2_K       : isum = sum_h sc_h * sum_{J in half h} dpbusd(q_J, a_J), and the
//                min sum of kquant_low_bits.h (one madd with the half-sum pairs)
// Q6_K's quants are fed unsigned (q = 0..63, not q - 32); the -32 * sum(a)
// start value of each 16-element half comes from a per-call table, like
// Q8_0's (Q3_K: -4 * sum(a)). Integers are exact on both paths, so the results
// stay bitwise equal to matmul_avx2. Bounds: |sc * dot| <= 127 * 16 * 63 * 127 < 2^25.
// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialised variable) as
// the unused merge source of their masked builtins, which -Wmaybe-uninitialized reports
// once they are inlined at -O3; the values are never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/isa.h"
#include "kernels/matmul_internal.h"
#include "kernels/simd_avx2.h"
#include "kernels/kquant_low_bits.h"
#include "kernels/inline_decoder.h"

namespace spate::kernels::detail {
namespace {

// Decoders over one column group g laid out per L:
//   vec<J>(b)       : weight vector J (0..7) of block b as UNSIGNED bytes
//                     (biased by 128 when has_bias).
//   scales(b,vd,vm) : per-column f32 scale and min of block b (as matmul_avx2).
// Legacy 32-blocks: Bits = 4 or 5; Min = 0: min from the m region (Q4_1, Q5_1),
// otherwise the unsigned quants q with a Min * sum(a) start value (Q4_0: -8, Q5_0: -16).
template <int Bits, int Min>
struct dec_legacy {
  static constexpr ggml_type type = Bits == 4 ? (Min == 0 ? ggml_type::q4_1 : ggml_type::q4_0)
                                              : (Min == 0 ? ggml_type::q5_1 : ggml_type::q5_0);
  static constexpr bool has_min = Min == 0;
  static constexpr bool has_bias = Min != 0;
  static constexpr int n_bias = Min != 0 ? 1 : 0;
  static constexpr int block_bias_mul = Min;
  static constexpr int halves = 0;  // not a K-quant
  const uint8_t* g;
  const group_layout* L;
  template <int J>
  __m256i vec(int64_t b) const { return quant_vec<Bits, J>(g, L->qs + 128 * b, L->qh + 32 * b); }
  void scales(int64_t b, __m256& vd, __m256& vm) const {
    legacy_scales<Min>(g, L->d + 16 * b, L->m + 16 * b, vd, vm);
  }
};

// Q8_0, IQ4_NL and MXFP4: signed weights fed as w + 128 with the -128 * sum(a)
// start value, one d per block and column (fp16; MXFP4: bf16), no min.
template <ggml_type T>
struct dec_biased_d {
  static constexpr ggml_type type = T;
  static constexpr bool has_min = false;
  static constexpr bool has_bias = true;
  static constexpr int n_bias = 1;
  static constexpr int block_bias_mul = -128;
  static constexpr int halves = 0;  // not a K-quant
  const uint8_t* g;
  const group_layout* L;
  dec_biased_d(const uint8_t* g_, const group_layout* L_) : g(g_), L(L_) {}
  void scales(int64_t b, __m256& vd, __m256& vm) const {
    vd = load_d8<T>(g + L->d + 16 * b);
    vm = _mm256_setzero_ps();
  }
};

struct dec_q8_0 : dec_biased_d<ggml_type::q8_0> {
  using dec_biased_d::dec_biased_d;
  template <int J>
  __m256i vec(int64_t b) const {
    return _mm256_xor_si256(load256(g + L->qs + 256 * b + 32 * J), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};

template <ggml_type T>
struct dec_code_book : dec_biased_d<T> {  // IQ4_NL, MXFP4: the lookup table holds v + 128
  using dec_biased_d<T>::dec_biased_d;
  template <int J>
  __m256i vec(int64_t b) const { return code_book_vec<J>(this->g + this->L->qs + 128 * b, code_book_lut<T, 128>()); }
};

// K-quant decoders: vec<J> as unsigned bytes, scale32(b, h) the int32
// per-column sub-block scale of half h (halves: 1 = one scale per block).
// superblock(S) converts super-block S's per-column d (and -dmin) once for its
// 8 blocks; scales(b, s, vd, vm) gives block b's vd and vm from it (the same
// values as converting them per block: the loop only stops repeating them).
template <int Bits>
struct dec_k45 {
  static constexpr ggml_type type = Bits == 4 ? ggml_type::q4_k : ggml_type::q5_k;
  static constexpr bool has_min = true;
  static constexpr int n_bias = 0;
  static constexpr int halves = 1;
  const uint8_t* g;
  const group_layout* L;
  template <int J>
  __m256i vec(int64_t b) const { return quant_vec<Bits, J>(g, L->qs + 128 * b, L->qh + 32 * b); }
  __m256i scale32(int64_t b, int) const {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + L->sc + 8 * b)));
  }
  sb_scales superblock(int64_t S) const {
    return {load_f16x8(g + L->sd + 16 * S), _mm256_xor_ps(load_f16x8(g + L->sm + 16 * S), _mm256_set1_ps(-0.0f))};
  }
  void scales(int64_t b, const sb_scales& s, __m256& vd, __m256& vm) const {
    vd = s.d;
    vm = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + L->mn + 8 * b)))),
                       s.m);
  }
};

// Q6_K and Q3_K: an int8 scale per 16-element half, d per super-block, no
// min; unsigned quants with a bias_mul * sum(a) start value per half.
struct dec_half_scaled {
  static constexpr bool has_min = false;
  static constexpr int n_bias = 2;  // bias_mul * sum(a) of each 16-element half
  static constexpr int halves = 2;
  const uint8_t* g;
  const group_layout* L;
  dec_half_scaled(const uint8_t* g_, const group_layout* L_) : g(g_), L(L_) {}
  __m256i scale32(int64_t b, int h) const {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + L->sc + 16 * b + 8 * h)));
  }
  sb_scales superblock(int64_t S) const { return {load_f16x8(g + L->sd + 16 * S), _mm256_setzero_ps()}; }
  void scales(int64_t, const sb_scales& s, __m256& vd, __m256& vm) const {
    vd = s.d;
    vm = s.m;
  }
};

struct dec_q6_k : dec_half_scaled {
  static constexpr ggml_type type = ggml_type::q6_k;
  using dec_half_scaled::dec_half_scaled;
  static constexpr int bias_mul = -32;
  template <int J>
  __m256i vec(int64_t b) const {
    const __m256i lo = nibble_vec<J>(g + L->qs + 128 * b);
    return _mm256_or_si256(lo, q6_hbits<J % 4>(load256(g + L->qh + 64 * b + 32 * (J / 4))));
  }
};

struct dec_q3_k : dec_half_scaled {
  static constexpr ggml_type type = ggml_type::q3_k;
  using dec_half_scaled::dec_half_scaled;
  static constexpr int bias_mul = -4;
  template <int J>
  __m256i vec(int64_t b) const { return q3_vec<J>(g, *L, b); }
};

// Q2_K: the min term is block_fma_msum's (half_mins): scales() gives vm = -dmin.
struct dec_q2_k {
  static constexpr ggml_type type = ggml_type::q2_k;
  static constexpr bool has_min = false;
  static constexpr bool half_mins = true;
  static constexpr int n_bias = 0;
  static constexpr int halves = 2;
  const uint8_t* g;
  const group_layout* L;
  template <int J>
  __m256i vec(int64_t b) const { return k2_low_vec<J>(g + L->qs + 64 * b); }
  __m256i scale32(int64_t b, int h) const { return q2_scale32(g, *L, b, h); }
  __m256i min_pairs(int64_t b) const { return q2_min_pairs(g, *L, b); }
  sb_scales superblock(int64_t S) const {
    return {load_f16x8(g + L->sd + 16 * S), _mm256_xor_ps(load_f16x8(g + L->sm + 16 * S), _mm256_set1_ps(-0.0f))};
  }
  void scales(int64_t, const sb_scales& s, __m256& vd, __m256& vm) const {
    vd = s.d;
    vm = s.m;
  }
};

// int32 entries per block of a decoder's per-call table (0: none).
template <class Dec>
inline constexpr int table_entries = half_mins_of<Dec> ? 1 : Dec::n_bias;

// Software prefetch of the weight stream (single-row decode is bound by it):
// the next group's record, into L2. Measured on Zen 4 with a 1B-shaped Q4_0
// model (perf/scripts/bench_1b.sh, tg64, three interleaved runs per setting): into L1
// 4 groups ahead (the avx2 kernel's setting) 39-44 tok/s; into L2 4 ahead
// 46-64; into L1 1 ahead 45-51; into L2 1 ahead 56-64. With fewer, larger
// tasks per matmul and the first groups of a task prefetched up front
// (2026-11-26, SmolLM2 / Gemma 3 270M / 1B Q4_0 tg128, interleaved runs):
// 1 ahead 246 / 118 / 46 tok/s, 2 ahead 325 / 136 / 46, 3 ahead 331 / 146 /
// 54, 4 ahead 332 / 137 / 52 (2 to 4 within this VM's noise); L1 hint 319 / 119.
inline constexpr int k_prefetch_hint = 2;  // __builtin_prefetch locality 2: prefetcht1 (L2)
inline constexpr int64_t k_prefetch_groups = 3;

// The tiles' vector operations by width: 256 bits (one group, 8 columns) or 512 bits
// (a pair of groups, 16 columns). Lane for lane, both widths run the same instructions,
// so a column's result does not depend on the width it ran at.
template <int Bits>
struct vec_ops;
template <>
struct vec_ops<256> {
  using vi = __m256i;
  using vf = __m256;
  static vi zero() { return _mm256_setzero_si256(); }
  static vi set1(int32_t v) { return _mm256_set1_epi32(v); }
  static vi bcast(const int8_t* p) { return bcast32(p); }
  static vi dpbusd(vi acc, vi w, vi a) { return _mm256_dpbusd_epi32(acc, w, a); }
  static vi add(vi x, vi y) { return _mm256_add_epi32(x, y); }
  static vi mullo(vi x, vi y) { return _mm256_mullo_epi32(x, y); }
  static vf fzero() { return _mm256_setzero_ps(); }
  template <bool HasMin>
  static vf fma_block(vf acc, vi isum, vf vd, vf vm, float d_a, float s_a) {
    return block_fma<HasMin>(acc, isum, vd, vm, d_a, s_a);
  }
};
template <>
struct vec_ops<512> {
  using vi = __m512i;
  using vf = __m512;
  static vi zero() { return _mm512_setzero_si512(); }
  static vi set1(int32_t v) { return _mm512_set1_epi32(v); }
  static vi bcast(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  static vi dpbusd(vi acc, vi w, vi a) { return _mm512_dpbusd_epi32(acc, w, a); }
  static vi add(vi x, vi y) { return _mm512_add_epi32(x, y); }
  static vi mullo(vi x, vi y) { return _mm512_mullo_epi32(x, y); }
  static vf fzero() { return _mm512_setzero_ps(); }
  template <bool HasMin>  // block_fma of simd_avx2.h, 16 lanes
  static vf fma_block(vf acc, vi isum, vf vd, vf vm, float d_a, float s_a) {
    const vf scale = _mm512_mul_ps(vd, _mm512_set1_ps(d_a));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc);
    if constexpr (HasMin) acc = _mm512_fmadd_ps(vm, _mm512_set1_ps(s_a), acc);
    return acc;
  }
};
// The ops of a decoder's vectors.
template <class Dec>
using ops_of = vec_ops<int(sizeof(decltype(std::declval<const Dec&>().template vec<0>(0)))) * 8>;

// Two neighbouring groups (records rec and rec + stride) read as one 16-column decoder:
// lanes 0..7 are the first group's columns, lanes 8..15 the second's, each lane the
// value D gives for its group. D: an inline_dec. Not for Q2_K (its min sums are 256-bit).
template <class D>
struct pair_dec : D {
  D hi;
  pair_dec(const uint8_t* rec, int64_t stride) : D(rec), hi(rec + stride) {}
  static __m512i join(__m256i l, __m256i h) { return _mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1); }
  static __m512 join(__m256 l, __m256 h) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(l)), _mm256_castps_pd(h), 1));
  }
  template <int J>
  __m512i vec(int64_t b) const { return join(D::template vec<J>(b), hi.template vec<J>(b)); }
  __m512i scale32(int64_t b, int h) const { return join(D::scale32(b, h), hi.scale32(b, h)); }
  struct sb_pair {
    sb_scales lo, hi;
  };
  sb_pair superblock(int64_t S) const { return {D::superblock(S), hi.superblock(S)}; }
  void scales(int64_t b, __m512& vd, __m512& vm) const {
    __m256 d0, m0, d1, m1;
    D::scales(b, d0, m0);
    hi.scales(b, d1, m1);
    vd = join(d0, d1);
    vm = join(m0, m1);
  }
  void scales(int64_t b, const sb_pair& s, __m512& vd, __m512& vm) const {
    __m256 d0, m0, d1, m1;
    D::scales(b, s.lo, d0, m0);
    hi.scales(b, s.hi, d1, m1);
    vd = join(d0, d1);
    vm = join(m0, m1);
  }
};

// Calls f.template operator()<J>() for the 8 weight vectors of a block in the order
// 0, 4, 1, 5, 2, 6, 3, 7: for the nibble types vectors J and J + 4 are the low and high
// nibbles of the same 32 bytes, so neighbouring calls share one load (the int32 sums
// are exact, so the order changes no result).
template <class F>
__attribute__((always_inline)) inline void for_each_vec_nibble_pairs(F&& f) {
  for_each_vec_in<0, 4, 1, 5, 2, 6, 3, 7>(f);
}

// Row tiles of the main loop and int32 chains per row. One decoder per tile (a
// group, or a pair of groups on zmm): 8 rows (measured on Zen 4: ~1.5x faster than
// 4 at 16..512 rows). Two pairs per tile (32 columns, NC = 2): 6 rows (12 int32 and
// 12 float accumulators). With NC = 2 each activation broadcast feeds two dpbusd:
// on a Zen 5 the 8 x 1 pair tile is bound by vector loads (two per cycle; ~100 loads
// per 64 dpbusd, where 6 x 2 issues ~100 per 96), measured 1.23-1.27x in cache for
// Q4_1 and Q8_0, 1.05x for Q4_K (docs/journal/performance.md, "Two pairs per tile"). Not for the
// K-quants with two half scales (Q6_K, Q3_K): their half sums need a third set of
// accumulators, and 4, 5 or 6 rows x 2 pairs measured 0.8-1.03x of 8 x 1.
// Two chains when few rows share each weight vector, so enough dpbusd are in
// flight (a second chain at R = 8 measured no different).
inline constexpr int tile_rows = 8;
template <class Dec>
inline constexpr bool two_pairs_per_tile = avx512_two_pairs(Dec::type);
template <class Dec, int NC>
inline constexpr int tile_rows_of = NC == 1 ? tile_rows : 6;
template <int R, int NC>
inline constexpr int chains = R * NC <= 4 ? 2 : 1;

// The register-tiled micro-kernel: NC decoders (each one group, 8 columns, or a pair_dec,
// 16) x R rows, all nb blocks. bias[r] (has_bias only): nb int32 start values of row r's
// block sums. Column c of decoder k gets exactly the arithmetic it gets alone (NC = 1).
template <class Dec, int NC, int R>
__attribute__((always_inline)) inline void tile_quant(const Dec (&dec)[NC], int64_t nb, const q8_act_row* a,
                                                     const int32_t* const* bias,
                                                     typename ops_of<Dec>::vf (*out)[NC], const uint8_t* pf,
                                                     int64_t pf_lines_per_block) {
  using V = ops_of<Dec>;
  constexpr int C = chains<R, NC>;
  typename V::vf acc[R][NC];
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < NC; ++k) acc[r][k] = V::fzero();
  for (int64_t b = 0; b < nb; ++b) {
    // Software prefetch of a later group's record (pf == nullptr: none), spread over the blocks.
    prefetch_block<k_prefetch_hint>(pf, b, pf_lines_per_block);
    typename V::vi is[C][R][NC];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
      for (int k = 0; k < NC; ++k) {
        if constexpr (Dec::has_bias) is[0][r][k] = V::set1(bias[r][b]);
        else is[0][r][k] = V::zero();
        if constexpr (C == 2) is[1][r][k] = V::zero();
      }
    }
    auto step = [&]<int J>() {
      typename V::vi w[NC];
#pragma GCC unroll 2
      for (int k = 0; k < NC; ++k) w[k] = dec[k].template vec<J>(b);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const typename V::vi x = V::bcast(a[r].qs + 32 * b + 4 * J);
#pragma GCC unroll 2
        for (int k = 0; k < NC; ++k) is[J % C][r][k] = V::dpbusd(is[J % C][r][k], w[k], x);
      }
    };
    for_each_vec_nibble_pairs(step);
#pragma GCC unroll 2
    for (int k = 0; k < NC; ++k) {
      typename V::vf vd, vm;
      dec[k].scales(b, vd, vm);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const typename V::vi isum = C == 2 ? V::add(is[0][r][k], is[C - 1][r][k]) : is[0][r][k];
        acc[r][k] = V::template fma_block<Dec::has_min>(acc[r][k], isum, vd, vm, a[r].d[b], a[r].s[b]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < NC; ++k) out[r][k] = acc[r][k];
}

// The K-quant micro-kernel: as tile_quant, plus the int32 scaling of each
// half's sum by its per-column scale. bias[r] (Q6_K, Q3_K): 2 * nb start
// values of row r, half h of block b at 2b + h. pairs[r] (Q2_K): row r's nb
// entries of the half-sum table.
template <class Dec, int NC, int R>
__attribute__((always_inline)) inline void tile_kquant(const Dec (&dec)[NC], int64_t nb, const q8_act_row* a,
                                                      const int32_t* const* bias, const int32_t* const* pairs,
                                                      typename ops_of<Dec>::vf (*out)[NC], const uint8_t* pf,
                                                      int64_t pf_lines_per_block) {
  using V = ops_of<Dec>;
  constexpr int C = chains<R, NC>;
  constexpr int H = Dec::halves;
  typename V::vf acc[R][NC];
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < NC; ++k) acc[r][k] = V::fzero();
  decltype(dec[0].superblock(0)) sbs[NC]{};
  for (int64_t b = 0; b < nb; ++b) {  // nb % 8 == 0: K-quant rows are whole 256-element super-blocks
    prefetch_block<k_prefetch_hint>(pf, b, pf_lines_per_block);
    if (b % 8 == 0) {
      for (int k = 0; k < NC; ++k) sbs[k] = dec[k].superblock(b / 8);
    }
    typename V::vi isum[R][NC];
    auto half = [&]<int Hh>() {
      typename V::vi is[C][R][NC];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
        for (int k = 0; k < NC; ++k) {
          if constexpr (Dec::n_bias > 0) is[0][r][k] = V::set1(bias[r][2 * b + Hh]);
          else is[0][r][k] = V::zero();
          if constexpr (C == 2) is[1][r][k] = V::zero();
        }
      }
      auto step = [&]<int J>() {
        if constexpr (J / (8 / H) == Hh) {  // the vectors of this half
          typename V::vi w[NC];
#pragma GCC unroll 2
          for (int k = 0; k < NC; ++k) w[k] = dec[k].template vec<J>(b);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const typename V::vi x = V::bcast(a[r].qs + 32 * b + 4 * J);
#pragma GCC unroll 2
            for (int k = 0; k < NC; ++k) is[J % C][r][k] = V::dpbusd(is[J % C][r][k], w[k], x);
          }
        }
      };
      if constexpr (H == 1) for_each_vec_nibble_pairs(step);
      else for_each_vec(step);
#pragma GCC unroll 2
      for (int k = 0; k < NC; ++k) {
        const typename V::vi sc = dec[k].scale32(b, Hh);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const typename V::vi t = V::mullo(C == 2 ? V::add(is[0][r][k], is[C - 1][r][k]) : is[0][r][k], sc);
          if constexpr (Hh == 0) isum[r][k] = t;
          else isum[r][k] = V::add(isum[r][k], t);
        }
      }
    };
    half.template operator()<0>();
    if constexpr (H == 2) half.template operator()<1>();
#pragma GCC unroll 2
    for (int k = 0; k < NC; ++k) {
      typename V::vf vd, vm;
      dec[k].scales(b, sbs[k], vd, vm);
      if constexpr (half_mins_of<Dec>) {
        const __m256i mp = dec[k].min_pairs(b);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][k] = block_fma_msum(acc[r][k], isum[r][k], mp, pairs[r][b], vd, vm, a[r].d[b]);
      } else {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          acc[r][k] = V::template fma_block<Dec::has_min>(acc[r][k], isum[r][k], vd, vm, a[r].d[b], a[r].s[b]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < NC; ++k) out[r][k] = acc[r][k];
}

// Rows [r, r+R) x NC decoders (each one group or a pair_dec; columns from c0, 8 or 16 per
// decoder). bias: the per-call table of the row chunk (bias table, or Q2_K's half-sum
// table), row r at bias + (r - r_chunk) * nb * table_entries<Dec>.
template <class Dec, int NC, int R>
__attribute__((noinline)) void rows_quant(const Dec (&dec)[NC], int64_t nb, const void* act, int64_t n_in, int64_t r,
                                          const int32_t* bias, float* y, int64_t ldy, int64_t c0, int64_t c_lo,
                                          int64_t c_hi, const uint8_t* pf, int64_t pf_lines) {
  q8_act_row a[R];
  const int32_t* br[R];
  for (int i = 0; i < R; ++i) {
    a[i] = q8_act_at(act, n_in, r + i);
    br[i] = bias != nullptr ? bias + i * nb * table_entries<Dec> : nullptr;
  }
  using vf = typename ops_of<Dec>::vf;
  vf out[R][NC];
  if constexpr (half_mins_of<Dec>) tile_kquant<Dec, NC, R>(dec, nb, a, nullptr, br, out, pf, pf_lines);
  else if constexpr (Dec::halves > 0) tile_kquant<Dec, NC, R>(dec, nb, a, br, nullptr, out, pf, pf_lines);
  else tile_quant<Dec, NC, R>(dec, nb, a, br, out, pf, pf_lines);
  constexpr int64_t width = sizeof(vf) / sizeof(float);  // columns per decoder
  auto store8 = [&](float* yrow, int64_t c, __m256 v) {
    store_cols(yrow, c, std::max(c_lo, c), std::min(c_hi, c + 8), v);
  };
  for (int i = 0; i < R; ++i) {
    float* yrow = y + (r + i) * ldy;
    for (int k = 0; k < NC; ++k) {
      const int64_t ck = c0 + width * k;
      if constexpr (width == 16) {  // a pair: columns ck .. ck+15
        store8(yrow, ck, _mm512_castps512_ps256(out[i][k]));
        store8(yrow, ck + 8, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(out[i][k]), 1)));
      } else {
        store8(yrow, ck, out[i][k]);
      }
    }
  }
}

// Cache blocking of run_quant (sizes in bytes; Zen 4: 32 KiB L1D, 1 MiB L2):
//   row chunk   : activations of ~256 KiB stay in L2 for the whole column range;
//   group block : ~256 KiB of weight records stay in L2 while the chunk's
//                 sub-chunks pass over them (weights leave DRAM once per chunk);
//   sub-chunk   : activations of ~16 KiB stay in L1 while every group of
//                 the block runs its row tiles over them.
// Row counts are multiples of the row tile. Blocking only changes the order in
// which (row tile, group) pairs run, never the per-output math.
inline constexpr int64_t chunk_bytes = 256 * 1024, group_block_bytes = 256 * 1024, sub_bytes = 16 * 1024;
inline int64_t rows_fitting(int64_t bytes, int64_t act_row_bytes, int64_t tile) {
  return std::max<int64_t>(tile, bytes / std::max<int64_t>(act_row_bytes, 1) / tile * tile);
}

// Fills the per-call table of Dec for rows [r0, r1) (table_entries<Dec> > 0).
template <class Dec>
void fill_table(const void* act, int64_t n_in, int64_t r0, int64_t r1, int32_t* out) {
  if constexpr (half_mins_of<Dec>) fill_half_sum_pairs(act, n_in, r0, r1, out);
  else if constexpr (Dec::n_bias == 1) fill_block_bias_table(act, n_in, r0, r1, block_bias_mul_of<Dec>(), out);
  else fill_half_bias_table(act, n_in, r0, r1, Dec::bias_mul, out);
}

template <class Dec>
void run_quant(const packed_weight& w, const void* act, int64_t n_rows, float* y, int64_t ldy, int64_t col_begin,
               int64_t col_end) {
  const int64_t n_in = w.n_in();
  const group_layout L = layout_of(w.type(), n_in);
  const int64_t arb = q8_act_row_bytes(n_in);
  // Several rows: neighbouring groups run on 512-bit vectors (pair_dec), two pairs per
  // tile where that measured faster (two_pairs_per_tile; a column range's last groups
  // run as a pair or alone), so each activation broadcast feeds 16 or 32 columns. A
  // single row keeps one stream (one group at a time). Q2_K: one group.
  static_assert(two_pairs_per_tile<Dec> == (!half_mins_of<Dec> && Dec::halves != 2),
                "avx512_two_pairs (matmul_internal.h) names the types without a min-pair table or half scales");
  const bool pairs = n_rows > 1 && !half_mins_of<Dec>;
  const bool quads = pairs && two_pairs_per_tile<Dec>;
  using pair_t = pair_dec<inline_dec<Dec>>;
  const int64_t row_tile = quads ? tile_rows_of<pair_t, 2> : tile_rows;
  const int64_t rc = rows_fitting(chunk_bytes, arb, row_tile), rs = rows_fitting(sub_bytes, arb, row_tile);
  const int64_t gblk = std::max<int64_t>(4, group_block_bytes / w.stride() / 4 * 4);
  // Prefetch distance (groups ahead) and lines of the record to prefetch per block. With 16
  // rows and more it keeps the first row tile fed (Gemma 3 270M bd16 ~520 tok/s without, ~670
  // with, Zen 4). A single row: on Zen 4 the hardware prefetchers alone streamed faster (1B
  // Q4_0 tg64 ~45 -> ~50 tok/s without), on Zen 5 software prefetch helps (one thread
  // 34 -> 43 GB/s; prefetch_single_rows, isa.h).
  static const bool single_rows = prefetch_single_rows();
  const bool prefetch = n_rows > 1 || single_rows;
  constexpr int64_t pf_groups = k_prefetch_groups;
  const int64_t pf_lines = (w.stride() / 64 + L.nb - 1) / L.nb;
  const int64_t g_begin = col_begin / 8, g_end = (col_end + 7) / 8;
  // The groups before the first prefetched one: asked for up front, so a
  // task's stream starts with pf_groups records in flight.
  for (int64_t g = g_begin; g < std::min(g_end, g_begin + pf_groups); ++g) {
    const uint8_t* rec = w.data() + g * w.stride();
    for (int64_t off = 0; off < w.stride(); off += 64) __builtin_prefetch(rec + off, 0, k_prefetch_hint);
  }
  for (int64_t r0 = 0; r0 < n_rows; r0 += rc) {
    const int64_t r1 = std::min(n_rows, r0 + rc);
    constexpr int n_table = table_entries<Dec>;
    int32_t* bias = nullptr;
    if constexpr (n_table > 0) {
      bias = table_buffer(size_t((r1 - r0) * L.nb * n_table));
      fill_table<Dec>(act, n_in, r0, r1, bias);
    }
    auto bias_at = [&](int64_t row) { return bias != nullptr ? bias + (row - r0) * L.nb * n_table : nullptr; };
    // Rows [s0, s1) x the NC decoders of dec (columns from c0), in row tiles.
    auto tiles = [&]<class D, int NC>(const D (&dec)[NC], int64_t s0, int64_t s1, int64_t c0, int64_t c_lo,
                                      int64_t c_hi, const uint8_t* pf, int64_t pf_l) {
      constexpr int TR = tile_rows_of<D, NC>;
      // The row tiles share the prefetch of pf_l lines per block: tile t asks
      // for its slice, pf_t lines per block from pf + t * pf_t * nb lines.
      const int64_t n_t = (s1 - s0 + TR - 1) / TR;
      pf_l = (pf_l + n_t - 1) / n_t;
      int64_t r = s0;
      for (; r + TR <= s1; r += TR, pf = pf != nullptr ? pf + pf_l * L.nb * 64 : nullptr)
        rows_quant<D, NC, TR>(dec, L.nb, act, n_in, r, bias_at(r), y, ldy, c0, c_lo, c_hi, pf, pf_l);
#define SPATE_TAIL(N)                                                                                     \
  case N:                                                                                                 \
    if constexpr (N < TR) rows_quant<D, NC, N>(dec, L.nb, act, n_in, r, bias_at(r), y, ldy, c0, c_lo, c_hi, pf, pf_l); \
    break;
      switch (s1 - r) {
        SPATE_TAIL(7) SPATE_TAIL(6) SPATE_TAIL(5) SPATE_TAIL(4) SPATE_TAIL(3) SPATE_TAIL(2) SPATE_TAIL(1)
        default: break;
      }
#undef SPATE_TAIL
    };
    for (int64_t gb = g_begin; gb < g_end; gb += gblk) {
      const int64_t gb_end = std::min(g_end, gb + gblk);
      for (int64_t s0 = r0; s0 < r1; s0 += rs) {
        const int64_t s1 = std::min(r1, s0 + rs);
        for (int64_t g = gb; g < gb_end;) {
          const int64_t n_g = quads && g + 3 < gb_end ? 4 : pairs && g + 1 < gb_end ? 2 : 1;
          const int64_t st = w.stride();
          const uint8_t* rec = w.data() + g * st;
          const int64_t c0 = g * 8, c_lo = std::max(col_begin, c0), c_hi = std::min(col_end, c0 + 8 * n_g);
          // Only the first row tile of the first sub-chunk streams a group from memory; later
          // tiles hit the cache. The first sub-chunk prefetches groups of this block (or of the
          // next one when no other sub-chunk runs in between): with one row tile, the n_g groups
          // pf_groups later; with several, the next n_g groups, a slice per tile, so the stream
          // spreads over all the tiles' work (bd16: the first of three tiles alone asked for
          // more than a core's bandwidth while the others left memory idle).
          const int64_t pf_end = s1 == r1 ? g_end : gb_end;
          const int64_t tr = n_g == 4 ? tile_rows_of<pair_t, 2> : tile_rows;
          const int64_t ahead = s1 - s0 > tr ? n_g : pf_groups;
          const uint8_t* pf = prefetch && s0 == r0 && g + n_g - 1 + ahead < pf_end
                                  ? w.data() + (g + ahead) * st
                                  : nullptr;
          const int64_t pf_l = n_g * pf_lines;
          if constexpr (!half_mins_of<Dec>) {
            if constexpr (two_pairs_per_tile<Dec>) {
              if (n_g == 4) {
                const pair_t quad[2] = {pair_t(rec, st), pair_t(rec + 2 * st, st)};
                tiles(quad, s0, s1, c0, c_lo, c_hi, pf, pf_l);
              }
            }
            if (n_g == 2) {
              const pair_t pair[1] = {pair_t(rec, st)};
              tiles(pair, s0, s1, c0, c_lo, c_hi, pf, pf_l);
            }
          }
          if (n_g == 1) {
            const inline_dec<Dec> one[1] = {inline_dec<Dec>(rec)};
            tiles(one, s0, s1, c0, c_lo, c_hi, pf, pf_l);
          }
          g += n_g;
        }
      }
    }
  }
}

}  // namespace

// quantize_act_q8_avx2's per-block sequence on 16 lanes: the same amax (max is exact, so
// the reduction order does not matter for numbers), the same scalar d and 1/d, the same
// multiply and round-to-nearest-even convert, then a saturating narrow (the values are
// already clamped to [-127, 127]) instead of the avx2 packs and permute. Same bytes, d
// and s as the avx2 quantizer (Matmul tests compare the levels' activations).
void quantize_act_q8_avx512(const float* x, int64_t ldx, int64_t n_in, int64_t row_begin, int64_t row_end, void* act) {
  const int64_t nb = n_in / 32;
  const __m512i lim_hi = _mm512_set1_epi32(127), lim_lo = _mm512_set1_epi32(-127);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* xr = x + r * ldx;
    const q8_act_row_out out = q8_act_out(act, n_in, r);
    for (int64_t b = 0; b < nb; ++b) {
      const __m512 v0 = _mm512_loadu_ps(xr + 32 * b), v1 = _mm512_loadu_ps(xr + 32 * b + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
      const float db = amax / 127.0f;
      const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
      const __m512 vid = _mm512_set1_ps(id);
      const __m512i q0 = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v0, vid)), lim_hi), lim_lo);
      const __m512i q1 = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v1, vid)), lim_hi), lim_lo);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out.qs + 32 * b), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out.qs + 32 * b + 16), _mm512_cvtsepi32_epi8(q1));
      out.d[b] = db;
      out.s[b] = db * static_cast<float>(_mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1)));
    }
  }
}

void matmul_avx512(const packed_weight& w, const void* act, int64_t n_rows, float* y, int64_t ldy, int64_t col_begin,
                   int64_t col_end) {
  // Other types never reach this level's kernel (has_avx512_kernel); they are left untouched.
  if (with_legacy_decoder<dec_legacy, dec_q8_0>(
          w.type(), [&]<class Dec>() { run_quant<Dec>(w, act, n_rows, y, ldy, col_begin, col_end); })) {
    return;
  }
  switch (w.type()) {
    case ggml_type::iq4_nl: return run_quant<dec_code_book<ggml_type::iq4_nl>>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::mxfp4: return run_quant<dec_code_book<ggml_type::mxfp4>>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::q4_k: return run_quant<dec_k45<4>>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::q5_k: return run_quant<dec_k45<5>>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::q6_k: return run_quant<dec_q6_k>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::q3_k: return run_quant<dec_q3_k>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::q2_k: return run_quant<dec_q2_k>(w, act, n_rows, y, ldy, col_begin, col_end);
    default: return;
  }
}

}  // namespace spate::kernels::detail
