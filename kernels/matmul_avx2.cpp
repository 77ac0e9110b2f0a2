// AVX2+FMA+F16C matmul kernels over the 8-column interleaved layout of
// matmul_internal.h (quantized types: its inline records, read through
// inline_dec), and the AVX2 activation quantizer.
//
// Micro-kernel: one group of 8 output columns x R activation rows (R = 1..4).
// Per 32-block the weight vectors are decoded ONCE and applied to all R rows;
// lane c of every vector belongs to column c, so each row keeps a single f32
// accumulator vector whose lane c is output column c: no horizontal reduction.
// Per (row, block) the instruction sequence is fixed and independent of R:
//   isum  = exact int32 dot (maddubs -> int16 partial sums -> madd by the
//           int16 multipliers [1 or sub-block scales])
//   acc   = fma(cvt(isum), d_w * d_a, acc)
//   acc   = fma(m_w, s_a, acc)                 (types with a min term; block_fma)
// (Q2_K's min is per 16-element half instead: block_fma_msum of
// kquant_low_bits.h, from a per-call table of activation half sums)
// so results are bitwise independent of the row tiling (batch invariance).
// Q3_K's quants are fed unsigned (0..7); each half's int16 partial sums start
// at -4 * sum(a) in the low int16 of each column's pair (a per-call table), so
// the madd by the scale pair gives sc * (dot - 4 * sum(a)) exactly.
// Integer partial sums never overflow int16: |maddubs| pairs are bounded by
// 2*15*127 (4-bit; 8 summed), 2*31*127 (5-bit; 4 summed), Q6_K's 8 terms
// (q - 32) * a per lane once its split half bias is in (32*8*127; vpaddw wraps, so only
// the final sum must fit),
// 2*3*127 (Q2_K; 4 summed), 2*7*127 (Q3_K; 4 summed, plus 4*16*127),
// 2*128*127 (8-bit; 1), 2*127*127 (IQ4_NL code book values; 1), 2*12*127 (MXFP4; 1).
#include <immintrin.h>

#include <algorithm>

#include "kernels/matmul_internal.h"
#include "kernels/simd_avx2.h"
#include "kernels/kquant_low_bits.h"
#include "kernels/inline_decoder.h"

namespace spate::kernels::detail {
namespace {

// Empty asm that pins v in a register at this point: stops GCC from
// re-associating the int16/int32 partial-sum chains into wide trees (which
// spills the 16 ymm registers). Pure scheduling hint; no instructions.
inline __m256i pinned(__m256i v) {
  __asm__("" : "+x"(v));
  return v;
}

inline __m128i load64(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }

// int16 pair (v, v) in each 32-bit lane from 8 int32 lanes.
inline __m256i pair16(__m256i v32) {
  return _mm256_or_si256(_mm256_and_si256(v32, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(v32, 16));
}

// Decoders: one per weight type, over one column group g laid out per L (the
// kernels read them through inline_dec, inline_decoder.h).
//   vec<J>(b)       : weight vector J (0..7) of block b (unsigned quants, or
//                     signed for is_signed decoders), decoded on demand so that
//                     only a couple of weight registers are live at a time.
//   mult(b, h)      : int16 multipliers for vectors 4h..4h+3 (1 or the scales).
//   scales(b,vd,vm) : per-column f32 scale and min of block b; K-quants:
//                     scales(b, s, vd, vm) from superblock(S), super-block S's
//                     d (and -dmin) converted once for its 8 blocks.

// Legacy 32-blocks: Bits = 4 or 5; Min = 0: min from the m region (Q4_1, Q5_1),
// otherwise the unsigned quants q with a Min * sum(a) int32 start value from the
// block-bias table (Q4_0: -8, Q5_0: -16; block_bias_of).
template <int Bits, int Min>
struct dec_legacy {
  static constexpr ggml_type type = Bits == 4 ? (Min == 0 ? ggml_type::q4_1 : ggml_type::q4_0)
                                              : (Min == 0 ? ggml_type::q5_1 : ggml_type::q5_0);
  static constexpr bool is_signed = false;
  static constexpr bool has_min = Min == 0;
  static constexpr int block_bias_mul = Min;
  static constexpr int chunk = Bits == 4 ? 8 : 4;
  const uint8_t* g;
  const group_layout* L;
  template <int J>
  __m256i vec(int64_t b) const { return quant_vec<Bits, J>(g, L->qs + 128 * b, L->qh + 32 * b); }
  __m256i mult(int64_t, int) const { return _mm256_set1_epi16(1); }
  void scales(int64_t b, __m256& vd, __m256& vm) const {
    legacy_scales<Min>(g, L->d + 16 * b, L->m + 16 * b, vd, vm);
  }
};

// Q8_0, IQ4_NL and MXFP4: signed quants, one d per block and column (fp16; MXFP4: bf16), no min.
template <ggml_type T>
struct dec_signed_d {
  static constexpr ggml_type type = T;
  static constexpr bool is_signed = true;
  static constexpr bool has_min = false;
  static constexpr int chunk = 1;
  const uint8_t* g;
  const group_layout* L;
  dec_signed_d(const uint8_t* g_, const group_layout* L_) : g(g_), L(L_) {}
  __m256i mult(int64_t, int) const { return _mm256_set1_epi16(1); }
  void scales(int64_t b, __m256& vd, __m256& vm) const {
    vd = load_d8<T>(g + L->d + 16 * b);
    vm = _mm256_setzero_ps();
  }
};

struct dec_q8_0 : dec_signed_d<ggml_type::q8_0> {
  using dec_signed_d::dec_signed_d;
  template <int J>
  __m256i vec(int64_t b) const { return load256(g + L->qs + 256 * b + 32 * J); }
};

// IQ4_NL / MXFP4: value = d*code_book<T>[q]; the 4-bit indices are looked up (vpshufb)
// into the signed code book values and then fed as Q8_0's signed quants.
template <ggml_type T>
struct dec_code_book : dec_signed_d<T> {
  using dec_signed_d<T>::dec_signed_d;
  template <int J>
  __m256i vec(int64_t b) const { return code_book_vec<J>(this->g + this->L->qs + 128 * b, code_book_lut<T, 0>()); }
};

// Q4_K / Q5_K: value = sd*(sc*q) + (-sm)*mn.
template <int Bits>
struct dec_k45 {
  static constexpr ggml_type type = Bits == 4 ? ggml_type::q4_k : ggml_type::q5_k;
  static constexpr bool is_signed = false;
  static constexpr bool has_min = true;
  static constexpr int chunk = Bits == 4 ? 8 : 4;
  const uint8_t* g;
  const group_layout* L;
  template <int J>
  __m256i vec(int64_t b) const { return quant_vec<Bits, J>(g, L->qs + 128 * b, L->qh + 32 * b); }
  __m256i mult(int64_t b, int) const { return pair16(_mm256_cvtepu8_epi32(load64(g + L->sc + 8 * b))); }
  sb_scales superblock(int64_t S) const {
    return {load_f16x8(g + L->sd + 16 * S), _mm256_xor_ps(load_f16x8(g + L->sm + 16 * S), _mm256_set1_ps(-0.0f))};
  }
  void scales(int64_t b, const sb_scales& s, __m256& vd, __m256& vm) const {
    vd = s.d;
    vm = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(load64(g + L->mn + 8 * b))), s.m);
  }
};

// Q6_K and Q3_K: one int8 scale per 16-half, d per super-block, no min.
struct dec_half_scaled {
  static constexpr bool has_min = false;
  static constexpr int chunk = 4;
  const uint8_t* g;
  const group_layout* L;
  dec_half_scaled(const uint8_t* g_, const group_layout* L_) : g(g_), L(L_) {}
  __m256i mult(int64_t b, int h) const { return pair16(_mm256_cvtepi8_epi32(load64(g + L->sc + 16 * b + 8 * h))); }
  sb_scales superblock(int64_t S) const { return {load_f16x8(g + L->sd + 16 * S), _mm256_setzero_ps()}; }
  void scales(int64_t, const sb_scales& s, __m256& vd, __m256& vm) const {
    vd = s.d;
    vm = s.m;
  }
};

// Q6_K: value = sd*(sc_half*(q-32)), fed as its unsigned quants q (0..63): each half's int16
// pairs start at the split half-bias table's -32 * sum(a) shares (fill_half_bias_split_table),
// so the madd by the scale pair gives sc * (dot - 32 * sum(a)) exactly, without the
// vpabsb / vpsignb per row that signed quants need (pp512 of Q6_K tensors ~1.25x).
struct dec_q6_k : dec_half_scaled {
  static constexpr ggml_type type = ggml_type::q6_k;
  using dec_half_scaled::dec_half_scaled;
  static constexpr bool is_signed = false;
  static constexpr int bias_mul = -32;
  static constexpr bool bias_split = true;
  template <int J>
  __m256i vec(int64_t b) const {
    const __m256i lo = nibble_vec<J>(g + L->qs + 128 * b);
    const __m256i hi = q6_hbits<J % 4>(load256(g + L->qh + 64 * b + 32 * (J / 4)));
    return _mm256_or_si256(lo, hi);
  }
};

// Q3_K: value = sd*(sc_half*(q-4)), unsigned quants (0..7) with the half-bias
// table's -4 * sum(a) (half_bias_of).
struct dec_q3_k : dec_half_scaled {
  static constexpr ggml_type type = ggml_type::q3_k;
  using dec_half_scaled::dec_half_scaled;
  static constexpr bool is_signed = false;
  static constexpr int bias_mul = -4;
  template <int J>
  __m256i vec(int64_t b) const { return q3_vec<J>(g, *L, b); }
};

// Q2_K: value = sd*(sc_half*q) + (-sm)*mn_half, unsigned 2-bit quants. The
// min term is block_fma_msum's (half_mins): scales() gives vm = -dmin.
struct dec_q2_k {
  static constexpr ggml_type type = ggml_type::q2_k;
  static constexpr bool is_signed = false;
  static constexpr bool has_min = false;
  static constexpr bool half_mins = true;
  static constexpr int chunk = 4;
  const uint8_t* g;
  const group_layout* L;
  template <int J>
  __m256i vec(int64_t b) const { return k2_low_vec<J>(g + L->qs + 64 * b); }
  __m256i mult(int64_t b, int h) const { return pair16(q2_scale32(g, *L, b, h)); }
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
inline constexpr int table_entries = half_mins_of<Dec> || block_bias_of<Dec> ? 1 : (half_bias_of<Dec> ? 2 : 0);

// The register-tiled micro-kernel: 8 columns (one group) x R rows, all nb blocks.
// table[r]: row r's entries of the per-call table (half_mins: the half-sum
// pair of block b at b; half_bias: the bias of half h of block b at 2b + h;
// block_bias: the int32 start value of block b at b).
template <class Dec, int R>
__attribute__((always_inline)) inline void tile_quant(const Dec& dec, int64_t nb, const q8_act_row* a,
                                                     const int32_t* const* table, __m256* out, const uint8_t* pf,
                                                     int64_t pf_lines_per_block) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  sb_scales sbs{};
  for (int64_t b = 0; b < nb; ++b) {  // K-quants: nb % 8 == 0 (whole 256-element super-blocks)
    // Software prefetch of a later group's record (pf == nullptr: none), spread over the blocks.
    prefetch_block(pf, b, pf_lines_per_block);
    if constexpr (has_superblocks(Dec::type))
      if (b % 8 == 0) sbs = dec.superblock(b / 8);
    __m256i s16[R], isum[R];
    // Adds the int32 products t to a row's block sum; the block's first products start it, at
    // the block-bias table's value where the decoder has one.
    auto fold = [&]<bool First>(__m256i& sum, __m256i t, const int32_t* row_table, int64_t blk) {
      if constexpr (First && block_bias_of<Dec>) sum = pinned(_mm256_add_epi32(t, _mm256_set1_epi32(row_table[blk])));
      else if constexpr (First) sum = pinned(t);
      else sum = pinned(_mm256_add_epi32(sum, t));
    };
    // One weight vector J: applied to all R rows (int16 partial sums), folded into int32 every chunk.
    auto step = [&]<int J>() {
      const __m256i w = dec.template vec<J>(b);
      const __m256i wu = Dec::is_signed ? _mm256_abs_epi8(w) : w;
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m256i av = bcast32(a[r].qs + 32 * b + 4 * J);
        if constexpr (Dec::is_signed) av = _mm256_sign_epi8(av, w);
        const __m256i p = _mm256_maddubs_epi16(wu, av);
        if constexpr (Dec::chunk == 1) {
          // 8-bit quants: every product pair is folded into int32 at once (no int16 partial
          // sum, which GCC spilled to the stack and reloaded, 8 stores per row and block).
          fold.template operator()<J == 0>(isum[r], _mm256_madd_epi16(p, _mm256_set1_epi16(1)), table[r], b);
          continue;
        }
        if constexpr (J % Dec::chunk == 0 && half_bias_split_of<Dec>)  // each lane's share of the bias
          s16[r] = pinned(_mm256_add_epi16(p, _mm256_set1_epi32(table[r][2 * b + J / 4])));
        else if constexpr (J % Dec::chunk == 0 && half_bias_of<Dec>)  // bias in the low int16 of each pair
          s16[r] = pinned(_mm256_add_epi16(p, _mm256_set1_epi32(table[r][2 * b + J / 4] & 0xffff)));
        else if constexpr (J % Dec::chunk == 0) s16[r] = pinned(p);
        else s16[r] = pinned(_mm256_add_epi16(s16[r], p));
      }
      if constexpr (Dec::chunk > 1 && (J + 1) % Dec::chunk == 0) {
        const __m256i m = dec.mult(b, J / 4);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          fold.template operator()<J + 1 == Dec::chunk>(isum[r], _mm256_madd_epi16(s16[r], m), table[r], b);
        }
      }
    };
    for_each_vec(step);
    __m256 vd, vm;
    if constexpr (has_superblocks(Dec::type)) dec.scales(b, sbs, vd, vm);
    else dec.scales(b, vd, vm);
    if constexpr (half_mins_of<Dec>) {
      const __m256i mp = dec.min_pairs(b);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r] = block_fma_msum(acc[r], isum[r], mp, table[r][b], vd, vm, a[r].d[b]);
    } else {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r] = block_fma<Dec::has_min>(acc[r], isum[r], vd, vm, a[r].d[b], a[r].s[b]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = acc[r];
}

// Rows [r, r+R) x one group. table: the per-call table of the row chunk
// (nullptr when table_entries<Dec> == 0), row r at table + (r - r_chunk) * nb * table_entries<Dec>.
template <class Dec, int R>
__attribute__((noinline)) void rows_quant(const Dec& dec, int64_t nb, const void* act, int64_t n_in, int64_t r,
                                          const int32_t* table, float* y, int64_t ldy, int64_t c0, int64_t c_lo,
                                          int64_t c_hi, const uint8_t* pf, int64_t pf_lines) {
  q8_act_row a[R];
  const int32_t* pr[R];
  for (int i = 0; i < R; ++i) {
    a[i] = q8_act_at(act, n_in, r + i);
    pr[i] = table != nullptr ? table + i * nb * table_entries<Dec> : nullptr;
  }
  __m256 out[R];
  tile_quant<Dec, R>(dec, nb, a, pr, out, pf, pf_lines);
  for (int i = 0; i < R; ++i) store_cols(y + (r + i) * ldy, c0, c_lo, c_hi, out[i]);
}

// Rows per cache chunk: activations of one chunk (~256 KiB) stay in L2 while
// every column group in the range streams over them once.
inline int64_t row_chunk(int64_t act_row_bytes) {
  return std::max<int64_t>(4, (int64_t{256} * 1024 / std::max<int64_t>(act_row_bytes, 1)) & ~int64_t{3});
}

template <class Dec>
void run_quant(const packed_weight& w, const void* act, int64_t n_rows, float* y, int64_t ldy, int64_t col_begin,
               int64_t col_end) {
  const int64_t n_in = w.n_in();
  const group_layout L = layout_of(w.type(), n_in);
  const int64_t rc = row_chunk(q8_act_row_bytes(n_in));
  // Prefetch distance (groups ahead) and lines of the record to prefetch per block.
  constexpr int64_t pf_groups = 4;
  const int64_t pf_lines = (w.stride() / 64 + L.nb - 1) / L.nb;
  const int64_t g_end = (col_end + 7) / 8;
  for (int64_t r0 = 0; r0 < n_rows; r0 += rc) {
    const int64_t r1 = std::min(n_rows, r0 + rc);
    constexpr int n_table = table_entries<Dec>;
    int32_t* table = nullptr;
    if constexpr (n_table > 0) {
      table = table_buffer(size_t((r1 - r0) * L.nb * n_table));
      if constexpr (half_mins_of<Dec>) fill_half_sum_pairs(act, n_in, r0, r1, table);
      else if constexpr (block_bias_of<Dec>) fill_block_bias_table(act, n_in, r0, r1, Dec::block_bias_mul, table);
      else if constexpr (half_bias_split_of<Dec>) fill_half_bias_split_table(act, n_in, r0, r1, Dec::bias_mul, table);
      else fill_half_bias_table(act, n_in, r0, r1, Dec::bias_mul, table);
    }
    auto table_at = [&](int64_t row) { return table != nullptr ? table + (row - r0) * L.nb * n_table : nullptr; };
    for (int64_t g = col_begin / 8; g < g_end; ++g) {
      const inline_dec<Dec> dec(w.data() + g * w.stride());
      const int64_t c0 = g * 8, c_lo = std::max(col_begin, c0), c_hi = std::min(col_end, c0 + 8);
      // Only the first row tile of a group streams it from memory; later tiles hit the cache.
      const uint8_t* pf = g + pf_groups < g_end ? w.data() + (g + pf_groups) * w.stride() : nullptr;
      int64_t r = r0;
      for (; r + 4 <= r1; r += 4, pf = nullptr)
        rows_quant<inline_dec<Dec>, 4>(dec, L.nb, act, n_in, r, table_at(r), y, ldy, c0, c_lo, c_hi, pf, pf_lines);
      switch (r1 - r) {
        case 3: rows_quant<inline_dec<Dec>, 3>(dec, L.nb, act, n_in, r, table_at(r), y, ldy, c0, c_lo, c_hi, pf, pf_lines); break;
        case 2: rows_quant<inline_dec<Dec>, 2>(dec, L.nb, act, n_in, r, table_at(r), y, ldy, c0, c_lo, c_hi, pf, pf_lines); break;
        case 1: rows_quant<inline_dec<Dec>, 1>(dec, L.nb, act, n_in, r, table_at(r), y, ldy, c0, c_lo, c_hi, pf, pf_lines); break;
        default: break;
      }
    }
  }
}

// ---- float weights: [n_in][8] per group ----
// Register tile: R rows x G groups (8G columns), R*G accumulators. Per k the G
// weight vectors are loaded/converted once and x[r][k] is broadcast once per row.
// Every output is ONE f32 FMA chain in k order, acc = fma(w[c][k], x[r][k], acc)
// for k = 0..n_in-1, starting from +0: bitwise independent of R, G, the row's
// position and the column split (batch invariance).
template <ggml_type T>
inline __m256 load_w8(const uint8_t* g, int64_t k) {
  if constexpr (T == ggml_type::f32) {
    return _mm256_load_ps(reinterpret_cast<const float*>(g) + 8 * k);
  } else if constexpr (T == ggml_type::f16) {
    return load_f16x8(g + 16 * k);
  } else {
    const __m128i h = _mm_load_si128(reinterpret_cast<const __m128i*>(g + 16 * k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <ggml_type T, int R, int G>
__attribute__((noinline)) void tile_float(const uint8_t* g0, int64_t gstride, int64_t n_in, const float* act,
                                          int64_t r, float* y, int64_t ldy, int64_t c0, int64_t col_begin,
                                          int64_t col_end) {
  const float* x[R];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) x[i] = act + (r + i) * n_in;
  const uint8_t* gp[G];
#pragma GCC unroll 8
  for (int j = 0; j < G; ++j) gp[j] = g0 + j * gstride;
  __m256 acc[R][G];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < G; ++j) acc[i][j] = _mm256_setzero_ps();
  // Unrolled by 2 only to cut loop overhead in the narrow tiles; the per-output FMA chain is unchanged.
#pragma GCC unroll 2
  for (int64_t k = 0; k < n_in; ++k) {
    __m256 w[G];
#pragma GCC unroll 8
    for (int j = 0; j < G; ++j) w[j] = load_w8<T>(gp[j], k);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m256 b = _mm256_broadcast_ss(x[i] + k);
#pragma GCC unroll 8
      for (int j = 0; j < G; ++j) acc[i][j] = _mm256_fmadd_ps(w[j], b, acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < G; ++j) {
      const int64_t cg = c0 + 8 * j;
      store_cols(y + (r + i) * ldy, cg, std::max(col_begin, cg), std::min(col_end, cg + 8), acc[i][j]);
    }
}

// Rows per tile, and groups per tile by rows: fewer rows get wider column tiles
// so that every tile keeps >= 6 independent FMA chains (FMA latency x 2 pipes)
// within the 16 ymm registers (R*G accumulators + G weights + 1 broadcast).
inline constexpr int float_rows = 6;
inline constexpr int float_col_tile = 6;  // groups per column tile of the loop nest (multiple of every G)
template <int R>
inline constexpr int float_groups = R == 1 ? 6 : (R <= 3 ? 3 : 2);

template <ggml_type T, int R>
inline void tile_float_cols(const uint8_t* g0, int64_t gstride, int ng, int64_t n_in, const float* act, int64_t r,
                            float* y, int64_t ldy, int64_t c0, int64_t col_begin, int64_t col_end) {
  constexpr int GM = float_groups<R>;
  for (int s = 0; s < ng; s += GM) {
    const int n = std::min(GM, ng - s);
    const uint8_t* gs = g0 + s * gstride;
    const int64_t cs = c0 + 8 * s;
#define SPATE_TILE_CASE(N) \
  case N: if constexpr (GM >= N) tile_float<T, R, N>(gs, gstride, n_in, act, r, y, ldy, cs, col_begin, col_end); break;
    switch (n) {
      SPATE_TILE_CASE(8) SPATE_TILE_CASE(7) SPATE_TILE_CASE(6) SPATE_TILE_CASE(5)
      SPATE_TILE_CASE(4) SPATE_TILE_CASE(3) SPATE_TILE_CASE(2)
      default: tile_float<T, R, 1>(gs, gstride, n_in, act, r, y, ldy, cs, col_begin, col_end); break;
    }
#undef SPATE_TILE_CASE
  }
}

template <ggml_type T>
void run_float(const packed_weight& w, const void* act, int64_t n_rows, float* y, int64_t ldy, int64_t col_begin,
               int64_t col_end) {
  const int64_t n_in = w.n_in();
  const auto* a = static_cast<const float*>(act);
  // Rows per cache chunk: a multiple of the row tile, activations ~256 KiB.
  const int64_t rc = std::max<int64_t>(float_rows, int64_t{256} * 1024 / (n_in * 4) / float_rows * float_rows);
  constexpr int col_tile = float_col_tile;
  const int64_t g_begin = col_begin / 8, g_end = (col_end + 7) / 8;
  for (int64_t r0 = 0; r0 < n_rows; r0 += rc) {
    const int64_t r1 = std::min(n_rows, r0 + rc);
    for (int64_t g = g_begin; g < g_end; g += col_tile) {
      const int ng = int(std::min<int64_t>(col_tile, g_end - g));
      const uint8_t* grp = w.data() + g * w.stride();
      const int64_t c0 = g * 8;
      int64_t r = r0;
      for (; r + float_rows <= r1; r += float_rows)
        tile_float_cols<T, float_rows>(grp, w.stride(), ng, n_in, a, r, y, ldy, c0, col_begin, col_end);
      switch (r1 - r) {
        case 5: tile_float_cols<T, 5>(grp, w.stride(), ng, n_in, a, r, y, ldy, c0, col_begin, col_end); break;
        case 4: tile_float_cols<T, 4>(grp, w.stride(), ng, n_in, a, r, y, ldy, c0, col_begin, col_end); break;
        case 3: tile_float_cols<T, 3>(grp, w.stride(), ng, n_in, a, r, y, ldy, c0, col_begin, col_end); break;
        case 2: tile_float_cols<T, 2>(grp, w.stride(), ng, n_in, a, r, y, ldy, c0, col_begin, col_end); break;
        case 1: tile_float_cols<T, 1>(grp, w.stride(), ng, n_in, a, r, y, ldy, c0, col_begin, col_end); break;
        default: break;
      }
    }
  }
}

}  // namespace

void matmul_avx2(const packed_weight& w, const void* act, int64_t n_rows, float* y, int64_t ldy, int64_t col_begin,
                 int64_t col_end) {
  auto run_legacy = [&]<class Dec>() { run_quant<Dec>(w, act, n_rows, y, ldy, col_begin, col_end); };
  if (with_legacy_decoder<dec_legacy, dec_q8_0>(w.type(), run_legacy)) return;
  switch (w.type()) {
    case ggml_type::iq4_nl: return run_quant<dec_code_book<ggml_type::iq4_nl>>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::mxfp4: return run_quant<dec_code_book<ggml_type::mxfp4>>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::q4_k: return run_quant<dec_k45<4>>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::q5_k: return run_quant<dec_k45<5>>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::q6_k: return run_quant<dec_q6_k>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::q3_k: return run_quant<dec_q3_k>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::q2_k: return run_quant<dec_q2_k>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::f32: return run_float<ggml_type::f32>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::f16: return run_float<ggml_type::f16>(w, act, n_rows, y, ldy, col_begin, col_end);
    case ggml_type::bf16: return run_float<ggml_type::bf16>(w, act, n_rows, y, ldy, col_begin, col_end);
    default: return;
  }
}

void quantize_act_q8_avx2(const float* x, int64_t ldx, int64_t n_in, int64_t row_begin, int64_t row_end, void* act) {
  const int64_t nb = n_in / 32;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i lim_hi = _mm256_set1_epi32(127), lim_lo = _mm256_set1_epi32(-127);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* xr = x + r * ldx;
    const q8_act_row_out out = q8_act_out(act, n_in, r);
    for (int64_t b = 0; b < nb; ++b) {
      __m256 v[4];
      for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xr + 32 * b + 8 * i);
      __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                               _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
      const float amax = _mm_cvtss_f32(m4);
      const float db = amax / 127.0f;
      const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
      const __m256 vid = _mm256_set1_ps(id);
      __m256i q[4];
      for (int i = 0; i < 4; ++i)
        q[i] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[i], vid)), lim_hi), lim_lo);
      __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
      const int isum = _mm_cvtsi128_si32(s4);
      const __m256i p = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])), perm);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs + 32 * b), p);
      out.d[b] = db;
      out.s[b] = db * static_cast<float>(isum);
    }
  }
}

}  // namespace spate::kernels::detail
