// Matmul tests: AVX2 vs scalar reference, both vs float math on dequantized
// weights, bitwise batch invariance (every level), activation quantizer agreement, argument
// validation. No timing assertions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/dequant.h"
#include "kernels/fp16.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"
#include "matmul_test_util.h"

namespace spate::kernels {
namespace {

using namespace spate::kernels::test;

struct shape { int64_t n_out, n_in; };

std::vector<shape> shapes_for(ggml_type t) {
  if (block_of(t) == 256) return {{1, 256}, {13, 512}, {40, 256}, {9, 768}};
  if (block_of(t) == 32) return {{1, 32}, {7, 64}, {13, 96}, {40, 576}, {17, 160}};
  // Float types: {100, 40} has 13 column groups, so every row-tile / column-tile width occurs.
  return {{1, 1}, {7, 37}, {13, 64}, {24, 33}, {9, 576}, {100, 40}};
}

TEST(Matmul, ReferenceMatchesFloatMath) {
  std::mt19937 rng(1);
  for (ggml_type t : k_all_types) {
    for (const shape& s : shapes_for(t)) {
      const auto wq = random_weight(t, s.n_out, s.n_in, rng);
      const int64_t n_rows = 5, ldx = s.n_in + 3;
      const auto x = random_x(n_rows, ldx, rng);
      std::vector<double> mag;
      const auto ref = float_math(t, wq, s.n_out, s.n_in, x, ldx, n_rows, &mag);
      const packed_weight w = pack_weight(t, wq.data(), s.n_out, s.n_in, isa_level::scalar);
      EXPECT_EQ(w.bytes(), 0u);
      const auto y = run(w, x.data(), ldx, n_rows, s.n_out + 2);
      const double tol = (block_of(t) == 1) ? 1e-6 : 1e-2;
      EXPECT_LT(err_vs_mag(y, ref, mag, n_rows, s.n_out, s.n_out + 2), tol) << tname(t) << " " << s.n_out << "x" << s.n_in;
    }
  }
}

TEST(Matmul, Avx2MatchesReference) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(2);
  for (ggml_type t : k_all_types) {
    for (const shape& s : shapes_for(t)) {
      const auto wq = random_weight(t, s.n_out, s.n_in, rng);
      const packed_weight wr = pack_weight(t, wq.data(), s.n_out, s.n_in, isa_level::scalar);
      const packed_weight wa = pack_weight(t, wq.data(), s.n_out, s.n_in, isa_level::avx2);
      EXPECT_GT(wa.bytes(), 0u);
      EXPECT_EQ(act_format_id(wa), act_format_id(wr));
      for (int64_t n_rows = 1; n_rows <= 17; ++n_rows) {
        const int64_t ldx = s.n_in + 1;
        const auto x = random_x(n_rows, ldx, rng);
        const int64_t ldy = s.n_out + 5;
        const auto yr = run(wr, x.data(), ldx, n_rows, ldy);
        const auto ya = run(wa, x.data(), ldx, n_rows, ldy);
        std::vector<double> refd(size_t(n_rows * s.n_out));
        for (int64_t r = 0; r < n_rows; ++r)
          for (int64_t c = 0; c < s.n_out; ++c) refd[r * s.n_out + c] = yr[r * ldy + c];
        EXPECT_LT(rel_err(ya, refd, n_rows, s.n_out, ldy), 1e-5)
            << tname(t) << " " << s.n_out << "x" << s.n_in << " rows=" << n_rows;
        // Untouched padding past n_out.
        for (int64_t r = 0; r < n_rows; ++r)
          for (int64_t c = s.n_out; c < ldy; ++c) ASSERT_EQ(ya[r * ldy + c], -777.0f);
        // Also against float math on dequantized weights (looser: activation quantization).
        std::vector<double> mag;
        const auto fm = float_math(t, wq, s.n_out, s.n_in, x, ldx, n_rows, &mag);
        EXPECT_LT(err_vs_mag(ya, fm, mag, n_rows, s.n_out, ldy), block_of(t) == 1 ? 1e-6 : 1e-2) << tname(t);
      }
    }
  }
}

TEST(Matmul, QuantizeActSameBytesAcrossIsa) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(3);
  const int64_t n_in = 576, n_rows = 9;
  auto x = random_x(n_rows, n_in, rng);
  for (int i = 0; i < 32; ++i) x[32 + i] = 0.0f;   // an all-zero block
  x[100] = 1e-30f;                                  // tiny values
  x[200] = 12345.0f;                                // large outlier
  const auto wq = random_weight(ggml_type::q4_1, 8, n_in, rng);
  const packed_weight wr = pack_weight(ggml_type::q4_1, wq.data(), 8, n_in, isa_level::scalar);
  const packed_weight wa = pack_weight(ggml_type::q4_1, wq.data(), 8, n_in, isa_level::avx2);
  std::vector<uint8_t> ar(act_bytes(wr, n_rows)), aa(act_bytes(wa, n_rows));
  quantize_act(wr, x.data(), n_in, 0, n_rows, ar.data());
  quantize_act(wa, x.data(), n_in, 0, 4, aa.data());   // split by rows
  quantize_act(wa, x.data(), n_in, 4, n_rows, aa.data());
  EXPECT_EQ(ar, aa);
}

// Row r of a big batch must be bitwise equal to row r computed in any batch, at any position,
// with any column split.
void check_batch_invariance(isa_level level) {
  std::mt19937 rng(4);
  const int64_t total = 40;
  for (ggml_type t : k_all_types) {
    const int64_t n_in = block_of(t) == 256 ? 512 : (block_of(t) == 32 ? 96 : 45);
    // Float types: 101 columns (13 groups) so the widest column tiles are exercised too.
    const int64_t n_out = block_of(t) == 1 ? 101 : 37;
    const auto wq = random_weight(t, n_out, n_in, rng);
    const packed_weight w = pack_weight(t, wq.data(), n_out, n_in, level);
    const int64_t ldx = n_in + 2, ldy = n_out;
    const auto x = random_x(total, ldx, rng);
    const auto full = run(w, x.data(), ldx, total, ldy);
    const int64_t g = col_granularity(w);
    const int64_t sizes[] = {1, 3, 4, 5, 16, 17};
    const int64_t starts[] = {0, 1, 2, 7, 13, 23};
    for (int64_t bs : sizes)
      for (int64_t st : starts) {
        if (st + bs > total) continue;
        std::vector<uint8_t> act(act_bytes(w, bs));
        quantize_act(w, x.data() + st * ldx, ldx, 0, bs, act.data());
        std::vector<float> y(size_t(bs * ldy), 0.0f);
        // Three column ranges: [0, g), [g, 3g), [3g, n_out) -- different per-call shapes.
        const int64_t cuts[] = {0, g, 3 * g, n_out};
        for (int i = 0; i < 3; ++i) matmul(w, act.data(), bs, y.data(), ldy, cuts[i], cuts[i + 1]);
        for (int64_t r = 0; r < bs; ++r)
          for (int64_t c = 0; c < n_out; ++c) {
            const float a = full[(st + r) * ldy + c], b = y[r * ldy + c];
            ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << tname(t) << " batch=" << bs << " start=" << st << " row=" << r
                                                 << " col=" << c << " " << a << " vs " << b;
          }
      }
  }
}

TEST(Matmul, BatchInvarianceAvx2) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2";
  check_batch_invariance(isa_level::avx2);
}

TEST(Matmul, BatchInvarianceAvx512) {
  if (!have_avx512()) GTEST_SKIP() << "CPU lacks AVX-512 F/BW/VL/VNNI";
  check_batch_invariance(isa_level::avx512);
}

TEST(Matmul, BatchInvarianceReference) { check_batch_invariance(isa_level::scalar); }

TEST(Matmul, ColumnSplitsWriteOnlyTheirRange) {
  std::mt19937 rng(5);
  for (isa_level level : {isa_level::scalar, isa_level::avx2, isa_level::avx512}) {
    if (!cpu_supports(level)) continue;
    const int64_t n_out = 29, n_in = 64, n_rows = 3;
    const auto wq = random_weight(ggml_type::q4_1, n_out, n_in, rng);
    const packed_weight w = pack_weight(ggml_type::q4_1, wq.data(), n_out, n_in, level);
    const auto x = random_x(n_rows, n_in, rng);
    std::vector<uint8_t> act(act_bytes(w, n_rows));
    quantize_act(w, x.data(), n_in, 0, n_rows, act.data());
    std::vector<float> y(size_t(n_rows * n_out), -5.0f);
    matmul(w, act.data(), n_rows, y.data(), n_out, 8, 24);
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t c = 0; c < n_out; ++c) {
        if (c < 8 || c >= 24) EXPECT_EQ(y[r * n_out + c], -5.0f) << c;
        else EXPECT_NE(y[r * n_out + c], -5.0f) << c;
      }
  }
}

TEST(Matmul, PackWeightValidates) {
  std::vector<uint8_t> buf(1 << 16);
  try {
    pack_weight(ggml_type::q2_k, buf.data(), 4, 256, isa_level::scalar);
    FAIL() << "expected throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Q2_K"), std::string::npos) << e.what();
  }
  try {
    pack_weight(ggml_type::q4_k, buf.data(), 4, 128, isa_level::scalar);
    FAIL() << "expected throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Q4_K"), std::string::npos) << e.what();
  }
  EXPECT_THROW(pack_weight(ggml_type::q4_1, buf.data(), 4, 48, isa_level::scalar), std::invalid_argument);
  EXPECT_THROW(pack_weight(ggml_type::q8_1, buf.data(), 4, 64, isa_level::scalar), std::invalid_argument);
  EXPECT_THROW(pack_weight(ggml_type::q4_1, nullptr, 4, 64, isa_level::scalar), std::invalid_argument);
  EXPECT_THROW(pack_weight(ggml_type::q4_1, buf.data(), 0, 64, isa_level::scalar), std::invalid_argument);
  packed_weight w = pack_weight(ggml_type::q4_1, buf.data(), 4, 64, isa_level::scalar);
  EXPECT_EQ(w.n_out(), 4);
  EXPECT_EQ(w.n_in(), 64);
  EXPECT_EQ(w.type(), ggml_type::q4_1);
  EXPECT_EQ(w.isa(), isa_level::scalar);
  packed_weight moved = std::move(w);
  EXPECT_EQ(moved.n_out(), 4);
}

}  // namespace
}  // namespace spate::kernels
