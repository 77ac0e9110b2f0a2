// MXFP4 matmul tests beyond the ones it shares with every type in test_matmul.cpp
// (reference vs float math, each SIMD level vs the reference, batch invariance,
// weight sets, avx512 == avx2): the E8M0 scale 2^(e - 128) over its whole range,
// subnormal (e = 0, 1) to 2^127 (e = 255), with the code book ends, bitwise equal on
// every level; each against float math on the dequantized weights and the
// dequantized q8 activations (what the kernels compute, but for the f32 rounding of
// the block sums); exact values at both exponent ends; overflow to infinity alike
// on every level. Levels the CPU lacks are skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "isa_test_util.h"
#include "kernels/fp16.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/quant_blocks.h"
#include "matmul_test_util.h"

namespace spate::kernels {
namespace {

using namespace spate::kernels::test;

bool bits_equal(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// Odd shape: 3 column groups (the last partial), 10 blocks (n_in not a multiple of 256);
// 13 rows: a full avx512 row tile and a tail, pairs of groups and a group alone.
constexpr int64_t k_out = 21, k_in = 320, k_rows = 13;

// MXFP4 rows whose blocks have exponents from `exps` (block i of the matrix: exps[i % size]),
// random nibbles, and every 5th block at a code book end (12, -12, or FP4's +-0 pairs).
std::vector<uint8_t> mxfp4_weight(int64_t n_out, int64_t n_in, const std::vector<int>& exps, std::mt19937& rng) {
  const int64_t n_blocks = n_out * n_in / 32;
  std::vector<uint8_t> w(size_t(n_blocks) * sizeof(block_mxfp4));
  auto* blk = reinterpret_cast<block_mxfp4*>(w.data());
  const uint8_t ends[] = {0x77, 0xff, 0x7f, 0x88, 0x08};
  for (int64_t i = 0; i < n_blocks; ++i) {
    blk[i].e = uint8_t(exps[size_t(i) % exps.size()]);
    for (auto& q : blk[i].qs) q = i % 5 == 0 ? ends[(i / 5) % 5] : uint8_t(rng());
  }
  return w;
}

// Rows of normal random values times 2^x_exp.
std::vector<float> scaled_x(int64_t n_rows, int64_t n_in, int x_exp, std::mt19937& rng) {
  auto x = random_x(n_rows, n_in, rng);
  for (float& v : x) v = std::ldexp(v, x_exp);
  return x;
}

// Weight k of row c dequantized in double: code book value (nibble order of
// quant_blocks.h) times 2^(e - 128). Exact, even where the f32 dequantization overflows.
double weight_at(const std::vector<uint8_t>& wq, int64_t n_in, int64_t c, int64_t k) {
  const auto& blk = reinterpret_cast<const block_mxfp4*>(wq.data())[(c * n_in + k) / 32];
  const int e = int(k % 32);
  const int q = e < 16 ? blk.qs[e] & 15 : blk.qs[e - 16] >> 4;
  return double(mxfp4_values[q]) * std::ldexp(1.0, int(blk.e) - 128);
}

// y[r][c] in double from the dequantized weights and the dequantized q8 activations
// (act: quantize_act's bytes for n_rows rows); mag receives sum |w * a|.
std::vector<double> q8_float_math(const std::vector<uint8_t>& wq, int64_t n_out, int64_t n_in, const void* act,
                                  int64_t n_rows, std::vector<double>& mag) {
  std::vector<double> y(size_t(n_rows * n_out), 0.0);
  mag.assign(y.size(), 0.0);
  for (int64_t r = 0; r < n_rows; ++r) {
    const detail::q8_act_row a = detail::q8_act_at(act, n_in, r);
    for (int64_t c = 0; c < n_out; ++c)
      for (int64_t k = 0; k < n_in; ++k) {
        const double t = weight_at(wq, n_in, c, k) * double(a.d[k / 32]) * double(a.qs[k]);
        y[size_t(r * n_out + c)] += t;
        mag[size_t(r * n_out + c)] += std::fabs(t);
      }
  }
  return y;
}

class MatmulMxfp4 : public isa_test {};

// Weight exponents with activations scaled to keep the products finite (x_exp), and the
// tolerance against float math relative to the magnitude of the summed terms: 1e-5 when
// d_w * d_a is a normal float; looser where it is subnormal (2^-128 times activations
// near 1: d_w * d_a ~ 2^-135 keeps only ~14 bits).
struct regime {
  std::vector<int> exps;
  int x_exp;
  double tol;
};

TEST_P(MatmulMxfp4, ExponentExtremesBitwiseEqualToReference) {
  const regime regimes[] = {
      {{0}, 100, 1e-5},       {{1}, 100, 1e-5},       {{0, 1, 2, 3}, 90, 1e-5},
      {{0, 1}, 0, 1e-3},      {{118, 121, 125}, 0, 1e-5}, {{127, 128, 129}, 0, 1e-5},
      {{253, 254}, -100, 1e-5}, {{255}, -100, 1e-5},   {{254, 255}, -110, 1e-5},
      // Every extreme in one row: terms from 2^-235 (flushed to zero by the f32 product) to 2^35.
      {{0, 1, 2, 127, 128, 253, 254, 255, 64, 192}, -100, 1e-5},
  };
  std::mt19937 rng(31);
  for (const regime& rg : regimes) {
    const auto wq = mxfp4_weight(k_out, k_in, rg.exps, rng);
    const auto x = scaled_x(k_rows, k_in, rg.x_exp, rng);
    const packed_weight wr = pack_weight(ggml_type::mxfp4, wq.data(), k_out, k_in, isa_level::scalar);
    const packed_weight wl = pack_weight(ggml_type::mxfp4, wq.data(), k_out, k_in, level());
    std::vector<uint8_t> act(act_bytes(wr, k_rows));
    quantize_act(wr, x.data(), k_in, 0, k_rows, act.data());
    const auto yr = run(wr, x.data(), k_in, k_rows, k_out);
    const auto yl = run(wl, x.data(), k_in, k_rows, k_out);
    std::vector<double> mag;
    const auto fm = q8_float_math(wq, k_out, k_in, act.data(), k_rows, mag);
    for (int64_t i = 0; i < k_rows * k_out; ++i) {
      ASSERT_TRUE(std::isfinite(yr[size_t(i)])) << "e=" << rg.exps[0] << " " << i;
      ASSERT_TRUE(bits_equal(yl[size_t(i)], yr[size_t(i)]))
          << "e=" << rg.exps[0] << " x_exp=" << rg.x_exp << " row=" << i / k_out << " col=" << i % k_out << " "
          << yl[size_t(i)] << " vs " << yr[size_t(i)];
    }
    EXPECT_LT(err_vs_mag(yr, fm, mag, k_rows, k_out, k_out), rg.tol) << "e=" << rg.exps[0] << " x_exp=" << rg.x_exp;
  }
}

// Exact sums at both exponent ends: every weight index 1 (FP4 0.5, doubled 1) and every
// activation 2^x_exp (quant 127, d_a = 2^x_exp / 127), so each block adds
// 32 * 127 * 2^(e - 128) * 2^x_exp / 127 = 2^(e - 123 + x_exp), exact in f32.
TEST_P(MatmulMxfp4, ExactAtExponentEnds) {
  const int64_t n_out = 9, n_in = 96, n_rows = 3;
  for (const auto& [e, x_exp] : {std::pair{0, 100}, std::pair{1, 100}, std::pair{255, -100}, std::pair{254, -100}}) {
    std::vector<uint8_t> wq(size_t(n_out * n_in / 32) * sizeof(block_mxfp4));
    auto* blk = reinterpret_cast<block_mxfp4*>(wq.data());
    for (int64_t i = 0; i < n_out * n_in / 32; ++i) {
      blk[i].e = uint8_t(e);
      std::memset(blk[i].qs, 0x11, sizeof blk[i].qs);
    }
    const std::vector<float> x(size_t(n_rows * n_in), std::ldexp(1.0f, x_exp));
    const packed_weight w = pack_weight(ggml_type::mxfp4, wq.data(), n_out, n_in, level());
    const auto y = run(w, x.data(), n_in, n_rows, n_out);
    const double want = double(n_in / 32) * std::ldexp(1.0, e - 123 + x_exp);
    for (float v : y) EXPECT_NEAR(v, want, 1e-6 * want) << "e=" << e;
  }
}

// Past 2^127 the f32 products overflow: +-inf on every level alike (one sign per column,
// so no inf - inf).
TEST_P(MatmulMxfp4, OverflowToInfinityAlike) {
  const int64_t n_out = 11, n_in = 64, n_rows = 5;
  std::vector<uint8_t> wq(size_t(n_out * n_in / 32) * sizeof(block_mxfp4));
  auto* blk = reinterpret_cast<block_mxfp4*>(wq.data());
  for (int64_t c = 0; c < n_out; ++c)
    for (int64_t b = 0; b < n_in / 32; ++b) {
      blk[c * 2 + b].e = uint8_t(b == 0 ? 255 : 130);
      std::memset(blk[c * 2 + b].qs, c % 2 ? 0x77 : 0xff, 16);  // 12 or -12
    }
  std::vector<float> x(size_t(n_rows * n_in));
  for (int64_t i = 0; i < n_rows * n_in; ++i) x[size_t(i)] = float(1 + i % 7);
  const packed_weight wr = pack_weight(ggml_type::mxfp4, wq.data(), n_out, n_in, isa_level::scalar);
  const packed_weight wl = pack_weight(ggml_type::mxfp4, wq.data(), n_out, n_in, level());
  const auto yr = run(wr, x.data(), n_in, n_rows, n_out);
  const auto yl = run(wl, x.data(), n_in, n_rows, n_out);
  for (int64_t i = 0; i < n_rows * n_out; ++i) {
    EXPECT_EQ(yr[size_t(i)], (i % n_out) % 2 ? INFINITY : -INFINITY) << i;
    EXPECT_TRUE(bits_equal(yl[size_t(i)], yr[size_t(i)])) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, MatmulMxfp4, ::testing::ValuesIn(k_simd_levels), level_label);

// The repacked records (avx2, avx512) hold MXFP4's scale 2^(e - 128) as a bf16: exact for
// every exponent, the subnormal ones (e = 0, 1) included.
TEST(MatmulMxfp4Reference, ScaleExactInBf16) {
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(e8m0_half_to_f32(uint8_t(e)), std::ldexp(1.0f, e - 128)) << e;
    EXPECT_EQ(bf16_to_f32(e8m0_half_to_bf16(uint8_t(e))), std::ldexp(1.0f, e - 128)) << e;
  }
}

// The scalar reference against float math on the dequantized q8 activations, random
// weights over the usual exponents and the odd shape: only the f32 rounding differs.
TEST(MatmulMxfp4Reference, MatchesQ8FloatMath) {
  std::mt19937 rng(32);
  const auto wq = mxfp4_weight(k_out, k_in, {119, 120, 121, 122, 123, 124}, rng);
  const auto x = scaled_x(k_rows, k_in, 0, rng);
  const packed_weight w = pack_weight(ggml_type::mxfp4, wq.data(), k_out, k_in, isa_level::scalar);
  std::vector<uint8_t> act(act_bytes(w, k_rows));
  quantize_act(w, x.data(), k_in, 0, k_rows, act.data());
  std::vector<float> y(size_t(k_rows * k_out));
  matmul(w, act.data(), k_rows, y.data(), k_out, 0, k_out);
  std::vector<double> mag;
  const auto fm = q8_float_math(wq, k_out, k_in, act.data(), k_rows, mag);
  EXPECT_LT(err_vs_mag(y, fm, mag, k_rows, k_out, k_out), 4e-6);
}

}  // namespace
}  // namespace spate::kernels
