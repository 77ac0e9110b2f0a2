// Dequantization tests: hand-made blocks with known bytes, blocks built by an
// independent encoder of the GGUF bit layout from known quants/scales, and
// (Q2_K, Q3_K, IQ4_NL, MXFP4) blocks dequantized by the PyPI gguf package
// (fixtures/gguf_py_dequant.txt, tests/reference/make_dequant_fixture.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/dequant.h"
#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"

namespace spate::kernels {
namespace {

TEST(Dequant, Q4_0KnownBytes) {
  block_q4_0 b{};
  b.d = f32_to_fp16(0.5f);
  b.qs[0] = 0x21;  // element 0 -> 1, element 16 -> 2
  b.qs[15] = 0xf0;  // element 15 -> 0, element 31 -> 15
  float out[32];
  dequantize_row(ggml_type::q4_0, &b, out, 32);
  EXPECT_EQ(out[0], 0.5f * (1 - 8));
  EXPECT_EQ(out[16], 0.5f * (2 - 8));
  EXPECT_EQ(out[15], 0.5f * (0 - 8));
  EXPECT_EQ(out[31], 0.5f * (15 - 8));
  EXPECT_EQ(out[1], 0.5f * -8);
}

TEST(Dequant, Q8_0AndQ4_1KnownBytes) {
  block_q8_0 b8{};
  b8.d = f32_to_fp16(0.25f);
  for (int i = 0; i < 32; ++i) b8.qs[i] = static_cast<int8_t>(i - 16);
  float out[32];
  dequantize_row(ggml_type::q8_0, &b8, out, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.25f * float(i - 16));

  block_q4_1 b{};
  b.d = f32_to_fp16(2.0f);
  b.m = f32_to_fp16(-1.0f);
  b.qs[3] = 0x5a;
  dequantize_row(ggml_type::q4_1, &b, out, 32);
  EXPECT_EQ(out[3], 2.0f * 10 - 1.0f);
  EXPECT_EQ(out[19], 2.0f * 5 - 1.0f);
}

// IQ4_NL: the code book written out here from the format description (not
// read from quant_blocks.h), known bytes at both nibble positions.
TEST(Dequant, IQ4_NLKnownBytes) {
  const int book[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  block_iq4_nl b{};
  b.d = f32_to_fp16(0.5f);
  for (int i = 0; i < 16; ++i) b.qs[i] = uint8_t(i | (15 - i) << 4);  // element i -> index i, i+16 -> 15-i
  float out[32];
  dequantize_row(ggml_type::iq4_nl, &b, out, 32);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(out[i], 0.5f * float(book[i])) << i;
    EXPECT_EQ(out[i + 16], 0.5f * float(book[15 - i])) << i;
  }
  // Two blocks in a row, the second with a negative scale.
  block_iq4_nl two[2] = {b, b};
  two[1].d = f32_to_fp16(-0.25f);
  two[1].qs[3] = 0x0f;  // element 3 -> index 15 (113), element 19 -> index 0 (-127)
  float out2[64];
  dequantize_row(ggml_type::iq4_nl, two, out2, 64);
  EXPECT_EQ(out2[32 + 3], -0.25f * 113.0f);
  EXPECT_EQ(out2[32 + 19], -0.25f * -127.0f);
  EXPECT_EQ(out2[0], 0.5f * -127.0f);
}

// MXFP4: the E2M1 FP4 values written out here from the OCP MX spec (sign bit 3,
// 2 exponent bits with bias 1, 1 mantissa bit), times the E8M0 scale 2^(e - 127),
// computed in double; exact as a float unless it overflows to infinity (e = 254, 255).
// FP4's -0 (index 8) dequantizes to +0, as in ggml (its table holds the integer 0).
TEST(Dequant, MXFP4KnownBytes) {
  const double fp4[16] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};
  const int exponents[] = {0, 1, 2, 3, 100, 126, 127, 128, 129, 200, 253, 254, 255};
  constexpr int n = int(sizeof exponents / sizeof exponents[0]);
  block_mxfp4 blk[n];
  for (int i = 0; i < n; ++i) {
    blk[i].e = uint8_t(exponents[i]);
    for (int j = 0; j < 16; ++j) blk[i].qs[j] = uint8_t((j + i) % 16 | (15 - j) << 4);  // element j -> (j+i)%16, j+16 -> 15-j
  }
  float out[32 * n];
  dequantize_row(ggml_type::mxfp4, blk, out, 32 * n);
  for (int i = 0; i < n; ++i)
    for (int e = 0; e < 32; ++e) {
      const int q = e < 16 ? (e + i) % 16 : 15 - (e - 16);
      const float want = float(std::ldexp(fp4[q], exponents[i] - 127));
      uint32_t got_bits = 0, want_bits = 0;
      std::memcpy(&got_bits, &out[32 * i + e], 4);
      std::memcpy(&want_bits, &want, 4);
      EXPECT_EQ(got_bits, want_bits) << "e=" << exponents[i] << " element " << e << ": " << out[32 * i + e] << " vs " << want;
    }
  // The extremes spelled out (block i holds index (j + i) % 16 at element j < 16).
  EXPECT_EQ(out[1], std::ldexp(1.0f, -128));                 // e = 0, index 1: 0.5 * 2^-127, a subnormal
  EXPECT_EQ(out[32 * 11 + 8], std::ldexp(1.5f, 127));        // e = 254, index 3: the largest finite value
  EXPECT_EQ(out[32 * 11 + 9], INFINITY);                     // e = 254, index 4: 2 * 2^127
  EXPECT_EQ(out[32 * 12 + 5], std::ldexp(1.0f, 127));        // e = 255, index 1: 0.5 * 2^128
  EXPECT_EQ(out[32 * 12 + 13], -std::ldexp(1.0f, 127));      // e = 255, index 9
  EXPECT_EQ(out[32 * 12 + 6], INFINITY);                     // e = 255, index 2: 2^128
}

TEST(Dequant, Q5KnownBits) {
  block_q5_0 b{};
  b.d = f32_to_fp16(1.0f);
  b.qs[2] = 0x31;
  b.qh[0] = 0x04;  // bit 2 -> element 2 gets +16
  b.qh[2] = 0x04;  // bit 18 -> element 18 gets +16
  float out[32];
  dequantize_row(ggml_type::q5_0, &b, out, 32);
  EXPECT_EQ(out[2], float(1 + 16 - 16));
  EXPECT_EQ(out[18], float(3 + 16 - 16));
  EXPECT_EQ(out[0], float(-16));
}

// Independent encoders of the K-quant layouts (written from the format description).
void encode_q4_k(const int* q, const int* sc, const int* mn, float d, float dmin, block_q4_k& b) {
  std::memset(&b, 0, sizeof b);
  b.d = f32_to_fp16(d);
  b.dmin = f32_to_fp16(dmin);
  for (int s = 0; s < 8; ++s) {
    if (s < 4) {
      b.scales[s] |= uint8_t(sc[s] & 63);
      b.scales[s + 4] |= uint8_t(mn[s] & 63);
    } else {
      b.scales[s + 4] |= uint8_t((sc[s] & 15) | ((mn[s] & 15) << 4));
      b.scales[s - 4] |= uint8_t((sc[s] >> 4) << 6);
      b.scales[s] |= uint8_t((mn[s] >> 4) << 6);
    }
  }
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) b.qs[32 * c + l] = uint8_t((q[64 * c + l] & 15) | ((q[64 * c + 32 + l] & 15) << 4));
}

TEST(Dequant, Q4_KAndQ5_KFromEncoder) {
  std::mt19937 rng(7);
  int q[256], sc[8], mn[8];
  for (int& v : q) v = int(rng() % 32);
  for (int s = 0; s < 8; ++s) { sc[s] = int(rng() % 64); mn[s] = int(rng() % 64); }
  const float d = fp16_to_f32(f32_to_fp16(0.01f)), dmin = fp16_to_f32(f32_to_fp16(0.003f));
  int q4[256];
  for (int i = 0; i < 256; ++i) q4[i] = q[i] & 15;
  block_q4_k b4;
  encode_q4_k(q4, sc, mn, d, dmin, b4);
  float out[256];
  dequantize_row(ggml_type::q4_k, &b4, out, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(out[e], d * float(sc[e / 32]) * float(q4[e]) - dmin * float(mn[e / 32])) << e;

  block_q5_k b5;
  std::memset(&b5, 0, sizeof b5);
  b5.d = b4.d;
  b5.dmin = b4.dmin;
  std::memcpy(b5.scales, b4.scales, 12);
  std::memcpy(b5.qs, b4.qs, 128);
  for (int e = 0; e < 256; ++e)
    if (q[e] & 16) b5.qh[e % 32] |= uint8_t(1 << (e / 32));
  dequantize_row(ggml_type::q5_k, &b5, out, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(out[e], d * float(sc[e / 32]) * float(q[e]) - dmin * float(mn[e / 32])) << e;
}

TEST(Dequant, Q6_KFromEncoder) {
  std::mt19937 rng(9);
  int q[256], sc[16];
  for (int& v : q) v = int(rng() % 64);
  for (int& v : sc) v = int(rng() % 256) - 128;
  block_q6_k b;
  std::memset(&b, 0, sizeof b);
  b.d = f32_to_fp16(0.02f);
  for (int i = 0; i < 16; ++i) b.scales[i] = int8_t(sc[i]);
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const int* qq = q + 128 * h;
      b.ql[64 * h + l] = uint8_t((qq[l] & 15) | ((qq[l + 64] & 15) << 4));
      b.ql[64 * h + 32 + l] = uint8_t((qq[l + 32] & 15) | ((qq[l + 96] & 15) << 4));
      b.qh[32 * h + l] = uint8_t((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) | ((qq[l + 96] >> 4) << 6));
    }
  float out[256];
  dequantize_row(ggml_type::q6_k, &b, out, 256);
  const float d = fp16_to_f32(b.d);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(out[e], d * float(sc[e / 16]) * float(q[e] - 32)) << e;
}

// Independent encoders of the Q2_K / Q3_K layouts: q[256] unsigned quants
// (0..3 / 0..7), per-16 scales (Q2_K 4-bit scale and min; Q3_K 6-bit, stored +32).
void put_low_bits(const int* q, uint8_t* qs) {
  std::memset(qs, 0, 64);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, t = (e % 128) / 32, l = e % 32;
    qs[32 * h + l] |= uint8_t((q[e] & 3) << (2 * t));
  }
}

void encode_q2_k(const int* q, const int* sc, const int* mn, float d, float dmin, block_q2_k& b) {
  b.d = f32_to_fp16(d);
  b.dmin = f32_to_fp16(dmin);
  for (int s = 0; s < 16; ++s) b.scales[s] = uint8_t(sc[s] | mn[s] << 4);
  put_low_bits(q, b.qs);
}

void encode_q3_k(const int* q, const int* sc6, float d, block_q3_k& b) {
  std::memset(&b, 0, sizeof b);
  b.d = f32_to_fp16(d);
  put_low_bits(q, b.qs);
  for (int e = 0; e < 256; ++e) b.hmask[e % 32] |= uint8_t(((q[e] >> 2) & 1) << (e / 32));
  for (int s = 0; s < 16; ++s) {
    const int lo = sc6[s] & 15, hi = sc6[s] >> 4;
    if (s < 8) b.scales[s] |= uint8_t(lo);
    else b.scales[s - 8] |= uint8_t(lo << 4);
    b.scales[8 + s % 4] |= uint8_t(hi << (2 * (s / 4)));
  }
}

TEST(Dequant, Q2_KFromEncoder) {
  std::mt19937 rng(21);
  int q[256], sc[16], mn[16];
  for (int& v : q) v = int(rng() % 4);
  for (int s = 0; s < 16; ++s) { sc[s] = int(rng() % 16); mn[s] = int(rng() % 16); }
  sc[0] = 15;  // extremes
  mn[15] = 15;
  const float d = fp16_to_f32(f32_to_fp16(0.03f)), dmin = fp16_to_f32(f32_to_fp16(0.011f));
  block_q2_k b;
  encode_q2_k(q, sc, mn, d, dmin, b);
  float out[256];
  dequantize_row(ggml_type::q2_k, &b, out, 256);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(out[e], d * float(sc[e / 16]) * float(q[e]) - dmin * float(mn[e / 16])) << e;
  // Known bytes: element 0 is bits 0..1 of qs[0], element 32 bits 2..3, element 128 bits 0..1 of qs[32].
  std::memset(&b, 0, sizeof b);
  b.d = f32_to_fp16(1.0f);
  b.dmin = f32_to_fp16(0.5f);
  b.scales[0] = 0x32;   // sub-block 0: scale 2, min 3
  b.scales[2] = 0x01;   // sub-block 2 (elements 32..47): scale 1, min 0
  b.scales[8] = 0x14;   // sub-block 8 (elements 128..143): scale 4, min 1
  b.qs[0] = 0x0b;       // element 0 -> 3, element 32 -> 2
  b.qs[32] = 0x01;      // element 128 -> 1
  dequantize_row(ggml_type::q2_k, &b, out, 256);
  EXPECT_EQ(out[0], 2.0f * 3 - 0.5f * 3);
  EXPECT_EQ(out[1], -0.5f * 3);
  EXPECT_EQ(out[32], 1.0f * 2);
  EXPECT_EQ(out[128], 4.0f * 1 - 0.5f);
}

TEST(Dequant, Q3_KFromEncoder) {
  std::mt19937 rng(23);
  int q[256], sc6[16];
  for (int& v : q) v = int(rng() % 8);
  for (int& v : sc6) v = int(rng() % 64);
  sc6[3] = 0;   // extremes: -32 and +31
  sc6[12] = 63;
  const float d = fp16_to_f32(f32_to_fp16(0.0125f));
  block_q3_k b;
  encode_q3_k(q, sc6, d, b);
  float out[256];
  dequantize_row(ggml_type::q3_k, &b, out, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(out[e], d * float(sc6[e / 16] - 32) * float(q[e] - 4)) << e;
  // Known bytes: all scales 33 (scale +1) except sub-block 15 (scale 63 - 32); hmask bit 7 of byte 31 = element 255.
  std::memset(&b, 0, sizeof b);
  b.d = f32_to_fp16(1.0f);
  for (int i = 0; i < 8; ++i) b.scales[i] = 0x11;  // low nibbles 1 of every scale
  for (int i = 8; i < 12; ++i) b.scales[i] = 0xaa;  // high bits 2 -> +32 of every scale
  b.scales[7] |= 0xf0;                              // scale 15: low nibble 15 -> 47
  b.scales[11] |= 0xc0;                             // scale 15: high bits 3 -> 63
  b.qs[63] = 0xc0;                                  // element 255: low bits 3
  b.hmask[31] = 0x80;                               // element 255: bit 2
  dequantize_row(ggml_type::q3_k, &b, out, 256);
  EXPECT_EQ(out[0], 1.0f * float(0 - 4));
  EXPECT_EQ(out[255], float(63 - 32) * float(7 - 4));
  EXPECT_EQ(out[254], float(63 - 32) * float(0 - 4));
}

// Q2_K / Q3_K / IQ4_NL / MXFP4 against the gguf package's dequantization, bit for bit.
TEST(Dequant, Q2_KQ3_KIQ4_NLAndMXFP4MatchGgufPackage) {
  std::ifstream in(std::string(SPATE_SOURCE_DIR) + "/tests/kernels/fixtures/gguf_py_dequant.txt");
  ASSERT_TRUE(in) << "missing fixture";
  std::string line;
  std::getline(in, line);  // comment
  int types_seen = 0;
  while (std::getline(in, line) && !line.empty()) {
    std::istringstream head(line);
    std::string name;
    int n_blocks = 0;
    head >> name >> n_blocks;
    const ggml_type t = name == "Q2_K"     ? ggml_type::q2_k
                        : name == "Q3_K"   ? ggml_type::q3_k
                        : name == "IQ4_NL" ? ggml_type::iq4_nl
                                           : ggml_type::mxfp4;
    ASSERT_TRUE(t != ggml_type::mxfp4 || name == "MXFP4") << name;
    const auto tr = *traits_of(uint32_t(t));
    const int n_elems = int(tr.block_elems);
    std::string hex;
    std::getline(in, hex);
    const size_t n_bytes = size_t(n_blocks) * size_t(tr.block_bytes);
    ASSERT_EQ(hex.size(), 2 * n_bytes) << name;
    std::vector<uint8_t> bytes(n_bytes);
    for (size_t i = 0; i < n_bytes; ++i) bytes[i] = uint8_t(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
    std::vector<float> out(size_t(n_blocks) * size_t(n_elems));
    dequantize_row(t, bytes.data(), out.data(), int64_t(out.size()));
    for (int blk = 0; blk < n_blocks; ++blk) {
      std::getline(in, line);
      std::istringstream vals(line);
      for (int e = 0; e < n_elems; ++e) {
        std::string bits;
        vals >> bits;
        const uint32_t want = uint32_t(std::stoul(bits, nullptr, 16));
        uint32_t got = 0;
        std::memcpy(&got, &out[size_t(blk) * size_t(n_elems) + size_t(e)], 4);
        ASSERT_EQ(got, want) << name << " block " << blk << " element " << e;
      }
    }
    ++types_seen;
  }
  EXPECT_EQ(types_seen, 4);
}

TEST(Dequant, FloatTypes) {
  const float v[3] = {1.5f, -2.25f, 65504.0f};
  uint16_t h[3], bf[3];
  for (int i = 0; i < 3; ++i) { h[i] = f32_to_fp16(v[i]); bf[i] = f32_to_bf16(v[i]); }
  float out[3];
  dequantize_row(ggml_type::f16, h, out, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], v[i]);
  dequantize_row(ggml_type::bf16, bf, out, 3);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.25f);
  dequantize_row(ggml_type::f32, v, out, 3);
  EXPECT_EQ(out[2], 65504.0f);
}

TEST(Dequant, RejectsBadArguments) {
  float out[64];
  block_q4_0 b[2]{};
  EXPECT_THROW(dequantize_row(ggml_type::q4_0, b, out, 33), std::invalid_argument);
  EXPECT_THROW(dequantize_row(ggml_type::q8_k, b, out, 256), std::invalid_argument);
}

}  // namespace
}  // namespace spate::kernels
