// Internals shared by the matmul implementation files (matmul.cpp, repack.cpp,
// matmul_ref.cpp, matmul_avx2.cpp, matmul_avx512.cpp) and their tests. Not part of the
// forward-pass interface (that is matmul.h).
#pragma once

#include <cstdint>

#include "kernels/ggml_type.h"
#include "kernels/matmul.h"

namespace spate::kernels::detail {

// ---------------------------------------------------------------------------
// Activation format id 1 ("q8 blocks of 32"), used by every quantized weight.
// One row of n_in floats (n_in % 32 == 0, nb = n_in / 32 blocks) becomes
// q8_act_row_bytes(n_in) = 40 * nb bytes:
//
//   +---------------------------+-----------------+-----------------+
//   | qs: nb * 32 int8          | d: nb f32       | s: nb f32       |
//   +---------------------------+-----------------+-----------------+
//     block b: qs[32b .. 32b+31]  d[b] = amax/127   s[b] = d[b] * sum(qs of block b)
//
//   q = clamp(round_half_even(x * (127/amax)), -127, 127)   (q = 0 when amax == 0)
//   so x ~= d * q.  Row r starts at act + r * q8_act_row_bytes(n_in).
//
// Activation format id 0 ("f32"): row r = n_in floats at act + r * 4 * n_in.
// ---------------------------------------------------------------------------
static inline int64_t q8_act_row_bytes(int64_t n_in) { return n_in / 32 * 40; }

struct q8_act_row {
  const int8_t* qs;
  const float* d;
  const float* s;
};
static inline q8_act_row q8_act_at(const void* act, int64_t n_in, int64_t r) {
  const int64_t nb = n_in / 32;
  const auto* base = static_cast<const uint8_t*>(act) + r * q8_act_row_bytes(n_in);
  return {reinterpret_cast<const int8_t*>(base), reinterpret_cast<const float*>(base + nb * 32),
          reinterpret_cast<const float*>(base + nb * 36)};
}

// The same row, to be written by a quantizer.
struct q8_act_row_out {
  int8_t* qs;
  float* d;
  float* s;
};
static inline q8_act_row_out q8_act_out(void* act, int64_t n_in, int64_t r) {
  const int64_t nb = n_in / 32;
  auto* base = static_cast<uint8_t*>(act) + r * q8_act_row_bytes(n_in);
  return {reinterpret_cast<int8_t*>(base), reinterpret_cast<float*>(base + nb * 32), reinterpret_cast<float*>(base + nb * 36)};
}

bool is_quantized(ggml_type t);

// ---------------------------------------------------------------------------
// Repacked weight layout (isa_level::avx2 and avx512). Output columns are grouped by 8
// (group g = columns 8g .. 8g+7; the last group is padded with all-zero
// columns). Each group is one contiguous record of layout.stride bytes
// (a multiple of 64; the buffer is 64-byte aligned), groups in order.
//
// Quantized types: the k axis is cut into nb = n_in/32 blocks ("sub-blocks"
// for K-quants; super-block S = b/8 holds sub-blocks 8S..8S+7). Inside one
// block, the 32x8 quants w[c][k] (c = column in group, k = 0..31) are seen
// as 8 "vectors" j = 0..7 of 32 bytes, one 4-byte lane per column:
//
//   vector j :  | c0: k=4j..4j+3 | c1: k=4j..4j+3 | ... | c7: k=4j..4j+3 |
//                 byte 0..3        byte 4..7              byte 28..31
//
// so that broadcasting activation bytes k=4j..4j+3 to all 8 lanes and
// maddubs + madd (avx2) or one dpbusd (avx512 VNNI) gives per-column partial
// dots in the matching int32 lane.
// These vectors are stored compactly, region by region (nb entries each; the
// packed weights hold them as inline records, below, that keep these entries):
//
//   qs  (4- 5- 6-bit types, IQ4_NL, MXFP4): 128 B per block = 4 x 32 B; packed
//        vector p (p=0..3) holds vector p in its low nibbles, vector p+4 in
//        its high nibbles (low 4 bits of the quant, unsigned; IQ4_NL, MXFP4:
//        the code book index 0..15, as Q4_0's qs).
//   qs  (Q8_0): 256 B per block = vectors 0..7 as signed int8.
//   qs  (Q2_K, Q3_K): 64 B per block = 2 x 32 B; packed vector h (h=0,1)
//        holds vectors 4h..4h+3 (the 16-element half h of the block): bits
//        2t..2t+1 of byte (4c+i) = bits 0..1 of quant w[c][4(4h+t)+i].
//   qh  (Q5_0, Q5_1, Q5_K): 32 B per block; bit j of byte (4c+i) = bit 4 of
//        the quant w[c][4j+i].
//   qh  (Q3_K): 32 B per block; bit j of byte (4c+i) = bit 2 of w[c][4j+i].
//   qh  (Q6_K): 64 B per block = 2 x 32 B; in half h (vectors 4h..4h+3),
//        bits 2t..2t+1 of byte (4c+i) = bits 4..5 of quant w[c][4(4h+t)+i].
//   d   (legacy types, IQ4_NL): 16 B per block = 8 fp16 scales (column order).
//       (MXFP4): 16 B per block = 8 bf16 scales e8m0_half_to_f32(e), converted at
//               repack: 2^(e-128) is exact in bf16 (its f32 bits have zero low 16
//               bits, subnormals included), though 2^-128 .. 2^127 fits no fp16.
//   m   (Q4_1, Q5_1):   16 B per block = 8 fp16 mins.
//   sc  (Q4_K, Q5_K): 8 B per block = 6-bit scale per column (u8).
//       (Q6_K, Q3_K): 16 B per block = int8 scale of k 0..15 for columns
//               0..7, then int8 scale of k 16..31 for columns 0..7 (Q3_K:
//               the 6-bit scale minus 32).
//       (Q2_K): 16 B per block, same order; byte = 4-bit scale | 4-bit min << 4
//               (the GGUF scale byte of that 16-element sub-block).
//   mn  (Q4_K, Q5_K): 8 B per block = 6-bit min per column (u8).
//   sd  (K-quants): 16 B per super-block = 8 fp16 super-block scales d.
//   sm  (Q4_K, Q5_K, Q2_K): 16 B per super-block = 8 fp16 dmin.
//
// Quants are stored unsigned (as in GGUF) except Q8_0. The math per block:
//   IQ4_NL   : value = d*iq4nl_values[q]   (signed code book value, as Q8_0's q)
//   MXFP4    : value = d*mxfp4_values[q]   (as IQ4_NL, d from bf16)
//   Q4_0/Q5_0: value = d*(q-8) / d*(q-16), the offset taken in the int32 dot
//   Q4_1/Q5_1: value = d*q + m
//   Q4_K/Q5_K: value = sd*(sc*q) + (-sm)*mn
//   Q6_K     : value = sd*(sc*(q-32))
//   Q3_K     : value = sd*(sc*(q-4))          (sc of the 16-element half)
//   Q2_K     : value = sd*(sc*q) + (-sm)*mn   (sc, mn of the 16-element half)
//   Q8_0     : value = d*q
//
// Float types: record = n_in entries of 8 values (one per column):
//   F32: k-major [n_in][8] f32;  F16 / BF16: [n_in][8] uint16 (raw bits).
// ---------------------------------------------------------------------------
inline constexpr int group_cols = 8;

struct group_layout {
  int64_t nb = 0;       // 32-blocks per row (quantized types)
  int64_t qs = -1, qs_block = 0;   // region offsets (bytes from group start, -1 = absent)
  int64_t qh = -1, qh_block = 0;   // and bytes per block
  int64_t d = -1, m = -1;          // 16 B per block
  int64_t sc = -1, sc_block = 0;
  int64_t mn = -1;                 // 8 B per block (Q4_K, Q5_K)
  int64_t sd = -1, sm = -1;        // 16 B per super-block
  int64_t stride = 0;              // bytes per group (multiple of 64)
};
static constexpr bool is_k23(ggml_type t) { return t == ggml_type::q2_k || t == ggml_type::q3_k; }
static constexpr int64_t round_up64(int64_t v) { return (v + 63) / 64 * 64; }

// Precondition: type supported and n_in a multiple of its block size.
static constexpr group_layout layout_of(ggml_type type, int64_t n_in) {
  group_layout L;
  if (type == ggml_type::f32) {
    L.stride = round_up64(n_in * 32);
    return L;
  }
  if (type == ggml_type::f16 || type == ggml_type::bf16) {
    L.stride = round_up64(n_in * 16);
    return L;
  }
  const int64_t nb = n_in / 32, ns = n_in / 256;
  L.nb = nb;
  int64_t off = 0;
  auto region = [&](int64_t& at, int64_t per_block, int64_t count) {
    at = off;
    off += per_block * count;
  };
  const bool q5 = type == ggml_type::q5_0 || type == ggml_type::q5_1 || type == ggml_type::q5_k;
  const bool kq = type == ggml_type::q4_k || type == ggml_type::q5_k || type == ggml_type::q6_k || is_k23(type);
  const bool k45 = type == ggml_type::q4_k || type == ggml_type::q5_k;
  L.qs_block = type == ggml_type::q8_0 ? 256 : (is_k23(type) ? 64 : 128);
  region(L.qs, L.qs_block, nb);
  if (q5 || type == ggml_type::q3_k) {
    L.qh_block = 32;
    region(L.qh, 32, nb);
  } else if (type == ggml_type::q6_k) {
    L.qh_block = 64;
    region(L.qh, 64, nb);
  }
  if (!kq) {
    region(L.d, 16, nb);
    if (type == ggml_type::q4_1 || type == ggml_type::q5_1) region(L.m, 16, nb);
  } else {
    L.sc_block = k45 ? 8 : 16;
    region(L.sc, L.sc_block, nb);
    if (k45) region(L.mn, 8, nb);
    region(L.sd, 16, ns);
    if (k45 || type == ggml_type::q2_k) region(L.sm, 16, ns);
  }
  L.stride = round_up64(off);
  return L;
}

// The regions present in a layout, in memory order: offset member, bytes per entry, and
// whether there is one entry per 32-block (else one per super-block).
struct region_entry {
  int64_t group_layout::*at;
  int64_t bytes;
  bool per_block;
};
struct region_list {
  region_entry at[8];
  int n = 0;
};
static constexpr region_list regions_of(const group_layout& L) {
  const region_entry all[] = {{&group_layout::qs, L.qs_block, true}, {&group_layout::qh, L.qh_block, true},
                              {&group_layout::d, 16, true},          {&group_layout::m, 16, true},
                              {&group_layout::sc, L.sc_block, true}, {&group_layout::mn, 8, true},
                              {&group_layout::sd, 16, false},        {&group_layout::sm, 16, false}};
  region_list out{};
  for (const region_entry& r : all)
    if (L.*r.at >= 0) out.at[out.n++] = r;
  return out;
}

// ---------------------------------------------------------------------------
// Inline records (isa_level::avx2 and avx512, quantized types). The same regions and
// entries as above, stored block by block, so one group's record is read front
// to back as ONE stream (single-row decode streams every weight once per token;
// record by record, the region layout restarts a handful of short streams that
// the hardware prefetchers follow worse; perf/read_patterns measures both orders,
// figures in docs/journal/performance.md, "Inline records"):
//
//   legacy, IQ4_NL, MXFP4 : | block 0: qs qh d m | block 1: qs qh d m | ...     (block_bytes each)
//   K-quants       : | head 0: sd sm | block 0: qs qh sc mn | ... | block 7 | head 1: sd sm | block 8 ...
//
// (absent regions take no bytes). `at` holds the offsets inside a block (qs, qh,
// d, m, sc, mn) and inside a super-block head (sd, sm), so a decoder of the region
// layout reads block b of a record at g through `at` as block 0 of the record at
// g + block_offset(b) (and super-block S as super-block 0 at g + head_offset(S)).
// Records are stride bytes apart (a multiple of 64). Entries are no longer 32-byte
// aligned: the kernels load them unaligned. (inline_decoder.h adapts the decoders.)
// ---------------------------------------------------------------------------
struct inline_layout {
  group_layout at;  // offsets only (its nb and stride are the region layout's)
  int64_t block_bytes = 0;
  int64_t head_bytes = 0;  // 0 for the 32-block types (no super-blocks)
  int64_t stride = 0;
  int64_t superblock_bytes() const { return head_bytes + 8 * block_bytes; }
  int64_t head_offset(int64_t S) const { return S * superblock_bytes(); }
  int64_t block_offset(int64_t b) const {
    return head_bytes == 0 ? b * block_bytes : (b / 8) * superblock_bytes() + head_bytes + (b % 8) * block_bytes;
  }
};
// The inline layout of the records of layout L (a quantized type's).
static constexpr inline_layout inline_of(const group_layout& L) {
  inline_layout I;
  I.at = L;
  const region_list regions = regions_of(L);
  for (int k = 0; k < regions.n; ++k) {
    const region_entry& r = regions.at[k];
    int64_t& size = r.per_block ? I.block_bytes : I.head_bytes;
    I.at.*r.at = size;
    size += r.bytes;
  }
  const int64_t n_heads = I.head_bytes > 0 ? L.nb / 8 : 0;
  I.stride = round_up64(L.nb * I.block_bytes + n_heads * I.head_bytes);
  return I;
}
// Rewrites n_groups records of layout L (at groups, L.stride bytes each) as inline records
// at dst (I.stride bytes each, zero-initialised by the caller).
void write_inline(const group_layout& L, const inline_layout& I, const uint8_t* groups, int64_t n_groups, uint8_t* dst);

// Legacy 32-block decoders of the SIMD kernels: calls f.template operator()<Dec>()
// with Dec = Legacy<Bits, Min> for Q4_0 <4, -8>, Q4_1 <4, 0>, Q5_0 <5, -16>,
// Q5_1 <5, 0> (Min != 0: the quants' offset, q + Min), or Q8 for Q8_0, and returns
// true; returns false (f not called) for any other type.
template <template <int, int> class Legacy, class Q8, class F>
static bool with_legacy_decoder(ggml_type t, F&& f) {
  switch (t) {
    case ggml_type::q4_0: f.template operator()<Legacy<4, -8>>(); return true;
    case ggml_type::q4_1: f.template operator()<Legacy<4, 0>>(); return true;
    case ggml_type::q5_0: f.template operator()<Legacy<5, -16>>(); return true;
    case ggml_type::q5_1: f.template operator()<Legacy<5, 0>>(); return true;
    case ggml_type::q8_0: f.template operator()<Q8>(); return true;
    default: return false;
  }
}

// Fills dst (layout_of(type, n_in).stride * ceil(n_out/8) bytes, zero-initialised by the caller)
// from GGUF rows at src. Pure, single-threaded.
// Q4_0, Q4_1, IQ4_NL, MXFP4, Q8_0 and Q4_K move bytes and nibbles row by row; the
// other types decode each quant (repack_groups_elementwise, which handles
// every type and writes the same bytes: tests/kernels/test_repack.cpp).
void repack_groups(ggml_type type, const void* src, int64_t n_out, int64_t n_in, uint8_t* dst);
void repack_groups_elementwise(ggml_type type, const void* src, int64_t n_out, int64_t n_in, uint8_t* dst);

// Scalar reference implementations (matmul_ref.cpp).
void quantize_act_q8_ref(const float* x, int64_t ldx, int64_t n_in, int64_t row_begin, int64_t row_end, void* act);
void matmul_ref(const packed_weight& w, const void* act, int64_t n_rows, float* y, int64_t ldy, int64_t col_begin,
                int64_t col_end);

// AVX2+FMA+F16C implementations (matmul_avx2.cpp). Only call when cpu_supports(isa_level::avx2).
void quantize_act_q8_avx2(const float* x, int64_t ldx, int64_t n_in, int64_t row_begin, int64_t row_end, void* act);
void matmul_avx2(const packed_weight& w, const void* act, int64_t n_rows, float* y, int64_t ldy, int64_t col_begin,
                 int64_t col_end);

// AVX-512 VNNI implementations (matmul_avx512.cpp) of the quantized types
// (has_avx512_kernel: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K .. Q6_K) over the inline records, bitwise
// equal to matmul_avx2 for every input. Only call when cpu_supports(isa_level::avx512);
// other types must go to matmul_avx2. Activations: the avx2 quantizer's bytes,
// written by quantize_act_q8_avx512 on 16 lanes.
void quantize_act_q8_avx512(const float* x, int64_t ldx, int64_t n_in, int64_t row_begin, int64_t row_end, void* act);
// has_avx512_kernel is baseline code (matmul.cpp), safe on any CPU.
bool has_avx512_kernel(ggml_type t);
// Types whose avx512 kernel runs two pairs of groups (32 columns) per row tile when a
// matmul has several rows (matmul_avx512.cpp, two_pairs_per_tile): not Q2_K (one group),
// nor Q3_K and Q6_K (one pair; their two half sums leave no registers for a second).
static constexpr bool avx512_two_pairs(ggml_type t) {
  return t != ggml_type::q2_k && t != ggml_type::q3_k && t != ggml_type::q6_k;
}
void matmul_avx512(const packed_weight& w, const void* act, int64_t n_rows, float* y, int64_t ldy, int64_t col_begin,
                   int64_t col_end);

}  // namespace spate::kernels::detail
