// Tests of the avx512 matmul level (kernels/matmul_avx512.cpp): bitwise
// equality with the avx2 kernels for every type (the legacy quantized types
// run their own VNNI kernels, the rest fall through to avx2), agreement with
// the scalar reference, bitwise batch invariance across row tiles, tails,
// row chunks and column splits, and exact Q8_0 bias correction at the int8
// extremes. Skipped when the CPU lacks AVX-512 F/BW/VL/VNNI.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"
#include "matmul_test_util.h"

namespace spate::kernels {
namespace {

using namespace spate::kernels::test;

#define SPATE_REQUIRE_AVX512() \
  if (!have_avx512()) GTEST_SKIP() << "CPU lacks AVX-512 F/BW/VL/VNNI"

// Shapes with n_out not a multiple of 8 (partial last group) and several block counts.
struct shape { int64_t n_out, n_in; };
std::vector<shape> shapes_512(ggml_type t) {
  if (block_of(t) == 256) return {{13, 512}, {9, 256}};
  if (block_of(t) == 32) return {{1, 32}, {7, 64}, {13, 96}, {40, 576}, {17, 160}, {37, 320}};
  return {{7, 37}, {13, 64}};
}

bool bits_equal(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// y (n_rows x ldy) of w for act over column range [cb, ce); untouched entries stay -777.
std::vector<float> run_range(const packed_weight& w, const std::vector<uint8_t>& act, int64_t n_rows, int64_t ldy,
                             int64_t cb, int64_t ce) {
  std::vector<float> y(size_t(n_rows * ldy), -777.0f);
  matmul(w, act.data(), n_rows, y.data(), ldy, cb, ce);
  return y;
}

TEST(MatmulAvx512, IsaLevelOrderAndName) {
  EXPECT_TRUE(cpu_supports(isa_level::scalar));
  EXPECT_STREQ(isa_name(isa_level::avx512), "avx512vnni+avx2+fma+f16c");
  if (cpu_supports(isa_level::avx512)) {
    EXPECT_TRUE(cpu_supports(isa_level::avx2));
    EXPECT_EQ(detect_isa(), isa_level::avx512);
  }
}

// avx512 == avx2 bitwise, every type, rows 1..17 and 40, several column ranges
// (full, group-aligned, and unaligned ends / starts the kernels also handle).
TEST(MatmulAvx512, BitwiseEqualToAvx2) {
  SPATE_REQUIRE_AVX512();
  std::mt19937 rng(11);
  for (ggml_type t : k_all_types) {
    for (const shape& s : shapes_512(t)) {
      const auto wq = random_weight(t, s.n_out, s.n_in, rng);
      const packed_weight w2 = pack_weight(t, wq.data(), s.n_out, s.n_in, isa_level::avx2);
      const packed_weight w5 = pack_weight(t, wq.data(), s.n_out, s.n_in, isa_level::avx512);
      EXPECT_EQ(w5.isa(), isa_level::avx512);
      EXPECT_EQ(w5.bytes(), w2.bytes());
      EXPECT_EQ(act_format_id(w5), act_format_id(w2));
      std::vector<int64_t> row_counts;
      for (int64_t n = 1; n <= 17; ++n) row_counts.push_back(n);
      row_counts.push_back(40);
      for (int64_t n_rows : row_counts) {
        const int64_t ldx = s.n_in + 1, ldy = s.n_out + 5;
        const auto x = random_x(n_rows, ldx, rng);
        std::vector<uint8_t> a2(act_bytes(w2, n_rows)), a5(act_bytes(w5, n_rows));
        quantize_act(w2, x.data(), ldx, 0, n_rows, a2.data());
        quantize_act(w5, x.data(), ldx, 0, n_rows, a5.data());
        ASSERT_EQ(a2, a5) << tname(t);
        const int64_t ranges[][2] = {{0, s.n_out}, {8, 24}, {3, s.n_out - 2}, {s.n_out / 8 * 8, s.n_out}};
        for (const auto& cr : ranges) {
          const int64_t cb = cr[0], ce = std::min(cr[1], s.n_out);
          const auto y2 = run_range(w2, a2, n_rows, ldy, cb, ce);
          const auto y5 = run_range(w5, a5, n_rows, ldy, cb, ce);
          for (int64_t i = 0; i < n_rows * ldy; ++i)
            ASSERT_TRUE(bits_equal(y2[i], y5[i]))
                << tname(t) << " " << s.n_out << "x" << s.n_in << " rows=" << n_rows << " cols=[" << cb << ","
                << ce << ") row=" << i / ldy << " col=" << i % ldy << " " << y2[i] << " vs " << y5[i];
        }
      }
    }
  }
}

// Against the scalar reference (same tolerance as avx2) and float math on dequantized weights.
TEST(MatmulAvx512, MatchesReference) {
  SPATE_REQUIRE_AVX512();
  std::mt19937 rng(12);
  for (ggml_type t : k_all_types) {
    for (const shape& s : shapes_512(t)) {
      const auto wq = random_weight(t, s.n_out, s.n_in, rng);
      const packed_weight wr = pack_weight(t, wq.data(), s.n_out, s.n_in, isa_level::scalar);
      const packed_weight w5 = pack_weight(t, wq.data(), s.n_out, s.n_in, isa_level::avx512);
      for (int64_t n_rows : {1, 2, 5, 8, 9, 13, 17}) {
        const int64_t ldx = s.n_in + 1, ldy = s.n_out + 5;
        const auto x = random_x(n_rows, ldx, rng);
        const auto yr = run(wr, x.data(), ldx, n_rows, ldy);
        const auto y5 = run(w5, x.data(), ldx, n_rows, ldy);
        std::vector<double> refd(size_t(n_rows * s.n_out));
        for (int64_t r = 0; r < n_rows; ++r)
          for (int64_t c = 0; c < s.n_out; ++c) refd[r * s.n_out + c] = yr[r * ldy + c];
        EXPECT_LT(rel_err(y5, refd, n_rows, s.n_out, ldy), 1e-5)
            << tname(t) << " " << s.n_out << "x" << s.n_in << " rows=" << n_rows;
        for (int64_t r = 0; r < n_rows; ++r)
          for (int64_t c = s.n_out; c < ldy; ++c) ASSERT_EQ(y5[r * ldy + c], -777.0f);
        std::vector<double> mag;
        const auto fm = float_math(t, wq, s.n_out, s.n_in, x, ldx, n_rows, &mag);
        EXPECT_LT(err_vs_mag(y5, fm, mag, n_rows, s.n_out, ldy), block_of(t) == 1 ? 1e-6 : 1e-2) << tname(t);
      }
    }
  }
}

// Row r computed alone == row r inside a large batch (full 8-row tiles, every
// tail, more than one row chunk of the cache blocking), any column split.
TEST(MatmulAvx512, BatchInvarianceAcrossTilesChunksAndSplits) {
  SPATE_REQUIRE_AVX512();
  std::mt19937 rng(13);
  const ggml_type types[] = {ggml_type::q4_0, ggml_type::q4_1, ggml_type::q5_0, ggml_type::q5_1, ggml_type::q8_0};
  for (ggml_type t : types) {
    // 576 inputs: 720-byte activation rows, so 380 rows span two row chunks.
    const int64_t n_in = 576, n_out = 21, total = 380;
    const auto wq = random_weight(t, n_out, n_in, rng);
    const packed_weight w = pack_weight(t, wq.data(), n_out, n_in, isa_level::avx512);
    const auto x = random_x(total, n_in, rng);
    const auto full = run(w, x.data(), n_in, total, n_out);
    const int64_t picks[] = {0, 1, 7, 8, 100, 363, 364, 365, 379};
    for (int64_t r : picks) {
      std::vector<uint8_t> act(act_bytes(w, 1));
      quantize_act(w, x.data() + r * n_in, n_in, 0, 1, act.data());
      std::vector<float> y(size_t(n_out), 0.0f);
      const int64_t cuts[] = {0, 8, 16, n_out};  // one call per column range
      for (int i = 0; i < 3; ++i) matmul(w, act.data(), 1, y.data(), n_out, cuts[i], cuts[i + 1]);
      for (int64_t c = 0; c < n_out; ++c)
        ASSERT_TRUE(bits_equal(full[r * n_out + c], y[c])) << tname(t) << " row=" << r << " col=" << c;
    }
    // Sub-batches at odd offsets and sizes (every tail length), split into two column calls.
    for (int64_t bs : {3, 9, 15, 23}) {
      const int64_t st = 5;
      std::vector<uint8_t> act(act_bytes(w, bs));
      quantize_act(w, x.data() + st * n_in, n_in, 0, bs, act.data());
      std::vector<float> y(size_t(bs * n_out), 0.0f);
      matmul(w, act.data(), bs, y.data(), n_out, 0, 16);
      matmul(w, act.data(), bs, y.data(), n_out, 16, n_out);
      for (int64_t r = 0; r < bs; ++r)
        for (int64_t c = 0; c < n_out; ++c)
          ASSERT_TRUE(bits_equal(full[(st + r) * n_out + c], y[r * n_out + c]))
              << tname(t) << " batch=" << bs << " row=" << r << " col=" << c;
    }
  }
}

// Q8_0 at the int8 extremes: w = -128 / +127 with activations at +-127 exercise the
// w+128 bias and its -128*sum(a) correction at their largest magnitudes.
TEST(MatmulAvx512, Q8ExtremesExact) {
  SPATE_REQUIRE_AVX512();
  const int64_t n_out = 11, n_in = 128, n_rows = 10;
  std::vector<uint8_t> wq(size_t(n_out * (n_in / 32)) * sizeof(block_q8_0));
  auto* blk = reinterpret_cast<block_q8_0*>(wq.data());
  for (int64_t i = 0; i < n_out * n_in / 32; ++i) {
    blk[i].d = f32_to_fp16(0.5f);
    for (int e = 0; e < 32; ++e) blk[i].qs[e] = int8_t(i % 3 == 0 ? -128 : (i % 3 == 1 ? 127 : (e % 2 ? -128 : 127)));
  }
  std::vector<float> x(size_t(n_rows * n_in));
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t k = 0; k < n_in; ++k) x[r * n_in + k] = r % 2 ? ((k / 3) % 2 ? 1.0f : -1.0f) : float(r + 1) * -1.0f;
  const packed_weight wr = pack_weight(ggml_type::q8_0, wq.data(), n_out, n_in, isa_level::scalar);
  const packed_weight w2 = pack_weight(ggml_type::q8_0, wq.data(), n_out, n_in, isa_level::avx2);
  const packed_weight w5 = pack_weight(ggml_type::q8_0, wq.data(), n_out, n_in, isa_level::avx512);
  const auto yr = run(wr, x.data(), n_in, n_rows, n_out);
  const auto y2 = run(w2, x.data(), n_in, n_rows, n_out);
  const auto y5 = run(w5, x.data(), n_in, n_rows, n_out);
  for (int64_t i = 0; i < n_rows * n_out; ++i) {
    // Integer dots are exact and every level uses one float sequence: all three agree bitwise here.
    ASSERT_TRUE(bits_equal(y5[i], y2[i])) << i << " " << y5[i] << " vs " << y2[i];
    ASSERT_TRUE(bits_equal(y5[i], yr[i])) << i << " " << y5[i] << " vs " << yr[i];
  }
}

}  // namespace
}  // namespace spate::kernels
