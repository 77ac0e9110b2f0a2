// GGUF / ggml quantized block layouts, bit-exact with the on-disk format.
//
// All multi-byte fields are little-endian (x86 native). Half-precision scales
// are stored as raw IEEE binary16 bits (uint16_t); convert with fp16_to_f32().
// Every struct is packed to its on-disk size (checked by static_assert), so a
// row of a GGUF tensor can be reinterpreted as an array of these blocks (the
// blocks have alignment 2 or 4 at most; GGUF data offsets are 32-aligned).
//
// Element order inside the legacy 32-element blocks (Q4_0/Q4_1/Q5_0/Q5_1, IQ4_NL and MXFP4):
//   element j      (j = 0..15) : low  nibble of qs[j]
//   element j + 16 (j = 0..15) : high nibble of qs[j]
//   Q5 fifth bit of element e (e = 0..31): bit e of the little-endian uint32 qh.
#pragma once

#include <cstdint>
#include <cstring>

namespace spate::kernels {

inline constexpr int qk32 = 32;   // elements per legacy block
inline constexpr int qk_k = 256;  // elements per K-quant super-block

// value = d * (q - 8), q in [0, 15]
struct block_q4_0 {
  uint16_t d;
  uint8_t qs[qk32 / 2];
};
static_assert(sizeof(block_q4_0) == 18);

// value = d * q + m, q in [0, 15]
struct block_q4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[qk32 / 2];
};
static_assert(sizeof(block_q4_1) == 20);

// value = d * (q - 16), q in [0, 31]
struct block_q5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[qk32 / 2];
};
static_assert(sizeof(block_q5_0) == 22);

// value = d * q + m, q in [0, 31]
struct block_q5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[qk32 / 2];
};
static_assert(sizeof(block_q5_1) == 24);

// IQ4_NL: value = d * iq4nl_values[q], q in [0, 15] (the Q4_0 nibble order above).
struct block_iq4_nl {
  uint16_t d;
  uint8_t qs[qk32 / 2];
};
static_assert(sizeof(block_iq4_nl) == 18);

// The fixed non-linear IQ4_NL code book (ggml's kvalues_iq4nl), indexed by the 4-bit quant.
inline constexpr int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4 (OCP microscaling FP4, GGUF type 39): value = e8m0_half_to_f32(e) * mxfp4_values[q],
// q in [0, 15] (the Q4_0 nibble order above); e is the block's E8M0 exponent.
struct block_mxfp4 {
  uint8_t e;
  uint8_t qs[qk32 / 2];
};
static_assert(sizeof(block_mxfp4) == 17);

// The E2M1 FP4 values doubled (ggml's kvalues_mxfp4), indexed by the 4-bit quant: bit 3 is
// the sign (index 8, FP4's -0, is 0 like index 0). Doubled so that they are integers; the
// block scale is halved to match (e8m0_half_to_f32).
inline constexpr int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Half the E8M0 scale 2^(e - 127), i.e. exactly 2^(e - 128), as ggml's
// GGML_E8M0_TO_FP32_HALF: e = 0 and 1 give the subnormals 2^-128 and 2^-127, e = 255
// gives 2^127 (ggml does not treat it as the OCP spec's NaN; neither does spate).
inline uint32_t e8m0_half_bits(uint8_t e) { return e < 2 ? uint32_t{0x00200000} << e : uint32_t(e - 1) << 23; }
inline float e8m0_half_to_f32(uint8_t e) {
  const uint32_t bits = e8m0_half_bits(e);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// The same value as a bfloat16 (the top 16 bits of the f32): exact for every e, as the
// low 16 bits of e8m0_half_bits are always zero.
inline uint16_t e8m0_half_to_bf16(uint8_t e) { return uint16_t(e8m0_half_bits(e) >> 16); }

// value = d * q, q in [-128, 127]
struct block_q8_0 {
  uint16_t d;
  int8_t qs[qk32];
};
static_assert(sizeof(block_q8_0) == 34);

// Q2_K: 256 elements = 16 sub-blocks of 16; scales[s] holds sub-block s's
// 4-bit scale (low nibble) and 4-bit min (high nibble):
//   value = d * (scales[e / 16] & 15) * q - dmin * (scales[e / 16] >> 4),  q in [0, 3].
// Two halves h = 0,1 of 128 elements; half h uses qs[32h .. 32h+31]; for
// t = 0..3, l = 0..31:  element 128h + 32t + l : (qs[32h + l] >> 2t) & 3.
struct block_q2_k {
  uint8_t scales[qk_k / 16];
  uint8_t qs[qk_k / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(block_q2_k) == 84);

// Q3_K: 256 elements = 16 sub-blocks of 16 with 6-bit scales (q3_k_scale):
//   value = d * (sc[e / 16] - 32) * (q - 4),  q in [0, 7].
// Bits 0..1 of q as Q2_K's (from qs); bit 2 of element e is (hmask[e % 32] >> (e / 32)) & 1.
struct block_q3_k {
  uint8_t hmask[qk_k / 8];
  uint8_t qs[qk_k / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(block_q3_k) == 110);

// Q4_K: 256 elements = 8 sub-blocks of 32. Sub-block s has a 6-bit scale sc[s]
// and 6-bit min mn[s] (see unpack_k4_scale_min): value = d*sc*q - dmin*mn.
// Quant order: 4 chunks of 64 elements; chunk c uses qs[32c .. 32c+31]:
//   element 64c + l      : low  nibble of qs[32c + l]   (sub-block 2c)
//   element 64c + 32 + l : high nibble of qs[32c + l]   (sub-block 2c+1)
struct block_q4_k {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[qk_k / 2];
};
static_assert(sizeof(block_q4_k) == 144);

// Q5_K: as Q4_K plus a fifth bit: for element 64c + l the bit is
// (qh[l] >> 2c) & 1, for element 64c + 32 + l it is (qh[l] >> (2c+1)) & 1.
struct block_q5_k {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[qk_k / 8];
  uint8_t qs[qk_k / 2];
};
static_assert(sizeof(block_q5_k) == 176);

// Q6_K: 256 elements = 16 sub-blocks of 16 with int8 scales:
// value = d * scales[e / 16] * (q - 32), q in [0, 63].
// Two halves h = 0,1 of 128 elements; half h uses ql[64h..], qh[32h..]; for l = 0..31:
//   element 128h + l      : ql[64h + l]      & 0xF | ((qh[32h + l] >> 0) & 3) << 4
//   element 128h + 32 + l : ql[64h + 32 + l] & 0xF | ((qh[32h + l] >> 2) & 3) << 4
//   element 128h + 64 + l : ql[64h + l]      >> 4  | ((qh[32h + l] >> 4) & 3) << 4
//   element 128h + 96 + l : ql[64h + 32 + l] >> 4  | ((qh[32h + l] >> 6) & 3) << 4
struct block_q6_k {
  uint8_t ql[qk_k / 2];
  uint8_t qh[qk_k / 4];
  int8_t scales[qk_k / 16];
  uint16_t d;
};
static_assert(sizeof(block_q6_k) == 210);

// Q8_K (GGUF type 15; listed for completeness, spate does not use it):
// value = d * q; bsums[i] = sum of qs[16i .. 16i+15].
struct block_q8_k {
  float d;
  int8_t qs[qk_k];
  int16_t bsums[qk_k / 16];
};
static_assert(sizeof(block_q8_k) == 292);

// The 12 packed scale bytes of Q4_K/Q5_K hold 8 six-bit scales and 8 six-bit mins:
//   s < 4 : sc = b[s] & 63,                          mn = b[s+4] & 63
//   s >= 4: sc = (b[s+4] & 15) | ((b[s-4] >> 6) << 4), mn = (b[s+4] >> 4) | ((b[s] >> 6) << 4)
inline void unpack_k4_scale_min(const uint8_t* b, int s, int& sc, int& mn) {
  if (s < 4) {
    sc = b[s] & 63;
    mn = b[s + 4] & 63;
  } else {
    sc = (b[s + 4] & 15) | ((b[s - 4] >> 6) << 4);
    mn = (b[s + 4] >> 4) | ((b[s] >> 6) << 4);
  }
}

// Low 2 bits of element e (0..255) of a Q2_K / Q3_K block's qs (64 bytes).
inline int k2_low_bits(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

// Unsigned 2-bit quant (0..3) of element e of a Q2_K block.
inline int q2_k_quant(const block_q2_k& b, int e) { return k2_low_bits(b.qs, e); }

// Unsigned 3-bit quant (0..7, value offset -4) of element e of a Q3_K block.
inline int q3_k_quant(const block_q3_k& b, int e) {
  return k2_low_bits(b.qs, e) | ((b.hmask[e % 32] >> (e / 32)) & 1) << 2;
}

// The 12 packed scale bytes of Q3_K hold 16 six-bit scales (0..63, offset -32):
//   low 4 bits of scale s : s < 8 ? b[s] & 15 : b[s - 8] >> 4
//   high 2 bits           : (b[8 + s % 4] >> 2 * (s / 4)) & 3
inline int q3_k_scale(const uint8_t* b, int s) {
  const int lo = s < 8 ? (b[s] & 15) : (b[s - 8] >> 4);
  const int hi = (b[8 + s % 4] >> (2 * (s / 4))) & 3;
  return lo | hi << 4;
}

// Quant value (unsigned, before offset) of element e (0..255) of a Q4_K block.
inline int q4_k_quant(const block_q4_k& b, int e) {
  const int c = e / 64, l = e % 32;
  const uint8_t byte = b.qs[32 * c + l];
  return (e % 64) < 32 ? (byte & 15) : (byte >> 4);
}

inline int q5_k_quant(const block_q5_k& b, int e) {
  const int c = e / 64, l = e % 32;
  const bool hi_half = (e % 64) >= 32;
  const uint8_t byte = b.qs[32 * c + l];
  const int lo = hi_half ? (byte >> 4) : (byte & 15);
  const int bit = (b.qh[l] >> (2 * c + (hi_half ? 1 : 0))) & 1;
  return lo | (bit << 4);
}

// Unsigned 6-bit quant (0..63) of element e of a Q6_K block.
inline int q6_k_quant(const block_q6_k& b, int e) {
  const int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
  const uint8_t lo_byte = b.ql[64 * h + (quarter & 1) * 32 + l];
  const int lo = quarter < 2 ? (lo_byte & 15) : (lo_byte >> 4);
  const int hi = (b.qh[32 * h + l] >> (2 * quarter)) & 3;
  return lo | (hi << 4);
}

// 5-bit quant of element e (0..31) of a Q5_0 / Q5_1 block (qs, qh as stored).
inline int q5_quant(const uint8_t* qs, const uint8_t* qh, int e) {
  const uint32_t h = uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
  const int lo = e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4);
  return lo | int((h >> e) & 1) << 4;
}

inline int q4_quant(const uint8_t* qs, int e) { return e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4); }

}  // namespace spate::kernels
