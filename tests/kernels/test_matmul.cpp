// Matmul tests, parameterized over the ISA levels (isa_test_util.h): each SIMD
// level against the scalar reference and against float math on dequantized
// weights, activation quantizer agreement, bitwise batch invariance (every
// level; across row tiles, tails, row chunks and column splits), column ranges,
// exact Q8_0 / IQ4_NL at their integer extremes, argument validation; and the avx512 level's
// bitwise equality with avx2 for every type (kernels/matmul_avx512.cpp: the
// legacy quantized types run their own VNNI kernels, the rest fall through to
// avx2). Levels the CPU lacks are skipped. No timing assertions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa_test_util.h"
#include "kernels/dequant.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/quant_blocks.h"
#include "matmul_test_util.h"

namespace spate::kernels {
namespace {

using namespace spate::kernels::test;

// Shapes with n_out not a multiple of 8 (partial last group) and several block counts.
struct shape { int64_t n_out, n_in; };

std::vector<shape> shapes_for(ggml_type t) {
  if (block_of(t) == 256) return {{1, 256}, {13, 512}, {40, 256}, {9, 768}, {9, 256}, {56, 256}};
  if (block_of(t) == 32) return {{1, 32}, {7, 64}, {13, 96}, {40, 576}, {17, 160}, {37, 320}, {56, 64}};
  // Float types: {100, 40} has 13 column groups, so every row-tile / column-tile width occurs.
  return {{1, 1}, {7, 37}, {13, 64}, {24, 33}, {9, 576}, {100, 40}};
}

bool bits_equal(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// y (n_rows x ldy) of w for act over column range [cb, ce); untouched entries stay -777.
std::vector<float> run_range(const packed_weight& w, const std::vector<uint8_t>& act, int64_t n_rows, int64_t ldy,
                             int64_t cb, int64_t ce) {
  std::vector<float> y(size_t(n_rows * ldy), -777.0f);
  matmul(w, act.data(), n_rows, y.data(), ldy, cb, ce);
  return y;
}

TEST(Matmul, IsaLevelOrderAndName) {
  EXPECT_TRUE(cpu_supports(isa_level::scalar));
  EXPECT_STREQ(isa_name(isa_level::avx512), "avx512vnni+avx2+fma+f16c");
  if (cpu_supports(isa_level::avx512)) {
    EXPECT_TRUE(cpu_supports(isa_level::avx2));
    EXPECT_EQ(detect_isa(), isa_level::avx512);
  }
}

// prefetch_single_rows follows the CPU's vendor and family as /proc/cpuinfo reports them.
TEST(Matmul, SingleRowPrefetchFollowsTheCpuFamily) {
  std::ifstream info("/proc/cpuinfo");
  std::string line, vendor;
  int family = -1;
  while (std::getline(info, line) && (vendor.empty() || family < 0)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = line.substr(colon + 1);
    if (key == "vendor_id") vendor = value.substr(value.find_first_not_of(' '));
    if (key == "cpu family") family = std::stoi(value);
  }
  if (vendor.empty() || family < 0) GTEST_SKIP() << "no /proc/cpuinfo vendor and family";
  EXPECT_EQ(prefetch_single_rows(), vendor == "AuthenticAMD" && family >= 0x1a) << vendor << " family " << family;
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

// ------------------------------------------------------------------ every SIMD level vs the reference

class MatmulSimd : public isa_test {};

// rows 1..17 of one shape: against the reference (tight), untouched padding, and float math (looser).
void check_rows_against_reference(ggml_type t, const shape& s, const std::vector<uint8_t>& wq,
                                  const packed_weight& wr, const packed_weight& wl, std::mt19937& rng) {
  for (int64_t n_rows = 1; n_rows <= 17; ++n_rows) {
    const int64_t ldx = s.n_in + 1, ldy = s.n_out + 5;
    const auto x = random_x(n_rows, ldx, rng);
    const auto yr = run(wr, x.data(), ldx, n_rows, ldy);
    const auto yl = run(wl, x.data(), ldx, n_rows, ldy);
    std::vector<double> refd(size_t(n_rows * s.n_out));
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t c = 0; c < s.n_out; ++c) refd[r * s.n_out + c] = yr[r * ldy + c];
    EXPECT_LT(rel_err(yl, refd, n_rows, s.n_out, ldy), 1e-5)
        << tname(t) << " " << s.n_out << "x" << s.n_in << " rows=" << n_rows;
    // Untouched padding past n_out.
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t c = s.n_out; c < ldy; ++c) ASSERT_EQ(yl[r * ldy + c], -777.0f);
    // Also against float math on dequantized weights (looser: activation quantization).
    std::vector<double> mag;
    const auto fm = float_math(t, wq, s.n_out, s.n_in, x, ldx, n_rows, &mag);
    EXPECT_LT(err_vs_mag(yl, fm, mag, n_rows, s.n_out, ldy), block_of(t) == 1 ? 1e-6 : 1e-2) << tname(t);
  }
}

TEST_P(MatmulSimd, MatchesReference) {
  std::mt19937 rng(2);
  for (ggml_type t : k_all_types) {
    for (const shape& s : shapes_for(t)) {
      const auto wq = random_weight(t, s.n_out, s.n_in, rng);
      const packed_weight wr = pack_weight(t, wq.data(), s.n_out, s.n_in, isa_level::scalar);
      const packed_weight wl = pack_weight(t, wq.data(), s.n_out, s.n_in, level());
      EXPECT_EQ(wl.isa(), level());
      EXPECT_GT(wl.bytes(), 0u);
      EXPECT_EQ(act_format_id(wl), act_format_id(wr));
      check_rows_against_reference(t, s, wq, wr, wl, rng);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(MatmulSimd, QuantizeActSameBytesAsReference) {
  std::mt19937 rng(3);
  const int64_t n_in = 576, n_rows = 9;
  auto x = random_x(n_rows, n_in, rng);
  for (int i = 0; i < 32; ++i) x[32 + i] = 0.0f;   // an all-zero block
  x[100] = 1e-30f;                                  // tiny values
  x[200] = 12345.0f;                                // large outlier
  const auto wq = random_weight(ggml_type::q4_1, 8, n_in, rng);
  const packed_weight wr = pack_weight(ggml_type::q4_1, wq.data(), 8, n_in, isa_level::scalar);
  const packed_weight wa = pack_weight(ggml_type::q4_1, wq.data(), 8, n_in, level());
  std::vector<uint8_t> ar(act_bytes(wr, n_rows)), aa(act_bytes(wa, n_rows));
  quantize_act(wr, x.data(), n_in, 0, n_rows, ar.data());
  quantize_act(wa, x.data(), n_in, 0, 4, aa.data());   // split by rows
  quantize_act(wa, x.data(), n_in, 4, n_rows, aa.data());
  EXPECT_EQ(ar, aa);
}

// Row r computed alone == row r inside a large batch (full row tiles, every
// tail, more than one row chunk of the cache blocking), any column split.
void check_single_rows_in_big_batch(ggml_type t, const packed_weight& w, const std::vector<float>& x,
                                    const std::vector<float>& full) {
  const int64_t n_in = w.n_in(), n_out = w.n_out();
  const int64_t picks[] = {0, 1, 7, 8, 100, 271, 272, 273, 363, 364, 365, 379};
  for (int64_t r : picks) {
    std::vector<uint8_t> act(act_bytes(w, 1));
    quantize_act(w, x.data() + r * n_in, n_in, 0, 1, act.data());
    std::vector<float> y(size_t(n_out), 0.0f);
    const int64_t cuts[] = {0, 8, 16, n_out};  // one call per column range
    for (int i = 0; i < 3; ++i) matmul(w, act.data(), 1, y.data(), n_out, cuts[i], cuts[i + 1]);
    for (int64_t c = 0; c < n_out; ++c)
      ASSERT_TRUE(bits_equal(full[r * n_out + c], y[c])) << tname(t) << " row=" << r << " col=" << c;
  }
}

TEST_P(MatmulSimd, BatchInvarianceAcrossTilesChunksAndSplits) {
  std::mt19937 rng(13);
  const ggml_type types[] = {ggml_type::q4_0, ggml_type::q4_1, ggml_type::q5_0, ggml_type::q5_1,
                             ggml_type::q8_0, ggml_type::iq4_nl, ggml_type::mxfp4, ggml_type::q2_k,
                             ggml_type::q3_k, ggml_type::q4_k, ggml_type::q5_k, ggml_type::q6_k};
  for (ggml_type t : types) {
    // 576 inputs: 720-byte activation rows, so 380 rows span two row chunks (K-quants:
    // 768 inputs, 960-byte rows, chunks of ~272 rows; the per-call tables are per chunk).
    const int64_t n_in = block_of(t) == 256 ? 768 : 576, n_out = 21, total = 380;
    const auto wq = random_weight(t, n_out, n_in, rng);
    const packed_weight w = pack_weight(t, wq.data(), n_out, n_in, level());
    const auto x = random_x(total, n_in, rng);
    const auto full = run(w, x.data(), n_in, total, n_out);
    check_single_rows_in_big_batch(t, w, x, full);
    if (HasFatalFailure()) return;
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

// Q8_0 at the int8 extremes: w = -128 / +127 with activations at +-127 exercise
// (at avx512) the w+128 bias and its -128*sum(a) correction at their largest magnitudes.
TEST_P(MatmulSimd, Q8ExtremesExact) {
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
  const packed_weight wl = pack_weight(ggml_type::q8_0, wq.data(), n_out, n_in, level());
  const auto yr = run(wr, x.data(), n_in, n_rows, n_out);
  const auto y2 = run(w2, x.data(), n_in, n_rows, n_out);
  const auto yl = run(wl, x.data(), n_in, n_rows, n_out);
  for (int64_t i = 0; i < n_rows * n_out; ++i) {
    // Integer dots are exact and every level uses one float sequence: all levels agree bitwise here.
    ASSERT_TRUE(bits_equal(yl[i], y2[i])) << i << " " << yl[i] << " vs " << y2[i];
    ASSERT_TRUE(bits_equal(yl[i], yr[i])) << i << " " << yl[i] << " vs " << yr[i];
  }
}

// IQ4_NL at its code book ends: indices 0 (-127) and 15 (+113), mixed, against
// activations at +-127 exercise the avx2 signed path (abs / sign, int16 pairs up
// to 2*127*127) and the avx512 v+128 table with its -128*sum(a) start, at their
// largest magnitudes. One float sequence on every level: bitwise equal.
TEST_P(MatmulSimd, IQ4_NLExtremesExact) {
  const int64_t n_out = 11, n_in = 128, n_rows = 10;
  std::vector<uint8_t> wq(size_t(n_out * (n_in / 32)) * sizeof(block_iq4_nl));
  auto* blk = reinterpret_cast<block_iq4_nl*>(wq.data());
  for (int64_t i = 0; i < n_out * n_in / 32; ++i) {
    blk[i].d = f32_to_fp16(i % 2 ? 0.5f : -0.75f);
    std::memset(blk[i].qs, i % 3 == 0 ? 0x00 : (i % 3 == 1 ? 0xff : 0x0f), sizeof blk[i].qs);
  }
  std::vector<float> x(size_t(n_rows * n_in));
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t k = 0; k < n_in; ++k) x[r * n_in + k] = r % 2 ? ((k / 3) % 2 ? 1.0f : -1.0f) : float(r + 1) * -1.0f;
  const packed_weight wr = pack_weight(ggml_type::iq4_nl, wq.data(), n_out, n_in, isa_level::scalar);
  const packed_weight wl = pack_weight(ggml_type::iq4_nl, wq.data(), n_out, n_in, level());
  const auto yr = run(wr, x.data(), n_in, n_rows, n_out);
  const auto yl = run(wl, x.data(), n_in, n_rows, n_out);
  for (int64_t i = 0; i < n_rows * n_out; ++i)
    ASSERT_TRUE(bits_equal(yl[i], yr[i])) << i << " " << yl[i] << " vs " << yr[i];
  // The exact value of one output: row 0 (all activations -1 -> quants -127, d_a = 1/127) x column 0.
  double want = 0;
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const int64_t i = b;  // column 0's blocks are 0 .. n_in/32 - 1
    const double d = i % 2 ? 0.5 : -0.75;
    const int lo = i % 3 == 0 ? -127 : 113, hi = i % 3 == 1 ? 113 : -127;  // qs 0x00, 0xff, 0x0f
    want += d * -1.0 * (16 * lo + 16 * hi);
  }
  EXPECT_NEAR(yr[0], want, 1e-3 * std::fabs(want));
}

// Q2_K / Q3_K / Q6_K at their integer extremes: largest quants, scales and mins
// against activations at +-127 (after quantization) exercise the int16 sums of
// the avx2 kernels (Q3_K's half bias and Q6_K's split one included) and the
// half-sum tables at their largest magnitudes. All levels share one float
// sequence: bitwise equal.
std::vector<uint8_t> extreme_k23_weight(ggml_type t, int64_t n_out, int64_t n_in) {
  const auto tr = *traits_of(uint32_t(t));
  std::vector<uint8_t> wq(size_t(row_bytes(tr, n_in) * n_out));
  for (int64_t i = 0; i < n_out * n_in / 256; ++i) {
    uint8_t* b = wq.data() + i * tr.block_bytes;
    std::memset(b, i % 3 == 0 ? 0xff : (i % 3 == 1 ? 0x00 : 0xaa), size_t(tr.block_bytes));
    if (t == ggml_type::q2_k) {
      for (int s = 0; s < 16; ++s) b[s] = s % 2 ? 0xff : 0xf0;  // scale 15 or 0, min 15
      put_half(b + 80, 0.25f);
      put_half(b + 82, 0.125f);
    } else if (t == ggml_type::q6_k) {  // quants 63, 0 or pseudo-random; every scale -128 or +127
      uint32_t lcg = uint32_t(i) * 2654435761u + 1;
      if (i % 3 == 2)
        for (int s = 0; s < 192; ++s) b[s] = uint8_t((lcg = lcg * 1664525u + 1013904223u) >> 24);
      for (int s = 192; s < 208; ++s) b[s] = i % 2 ? 0x80 : 0x7f;
      put_half(b + 208, 0.5f);
    } else {
      for (int s = 96; s < 108; ++s) b[s] = i % 2 ? 0x00 : 0xff;  // every scale -32 or +31
      put_half(b + 108, 0.5f);
    }
  }
  return wq;
}

TEST_P(MatmulSimd, K23ExtremesExact) {
  const int64_t n_out = 11, n_in = 512, n_rows = 10;
  std::vector<float> x(size_t(n_rows * n_in));
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t k = 0; k < n_in; ++k) {
      // Constant rows, period-6 signs, and + + - - over each k-quad: the last gives Q6_K's
      // int16 lanes their largest products with a bias share that must come from the same k.
      const float v = r % 3 == 0 ? float(r + 1) * -1.0f : (r % 3 == 1 ? ((k / 3) % 2 ? 1.0f : -1.0f) : (k % 4 < 2 ? 1.0f : -1.0f));
      x[r * n_in + k] = v;
    }
  for (ggml_type t : {ggml_type::q2_k, ggml_type::q3_k, ggml_type::q6_k}) {
    const auto wq = extreme_k23_weight(t, n_out, n_in);
    const packed_weight wr = pack_weight(t, wq.data(), n_out, n_in, isa_level::scalar);
    const packed_weight wl = pack_weight(t, wq.data(), n_out, n_in, level());
    const auto yr = run(wr, x.data(), n_in, n_rows, n_out);
    const auto yl = run(wl, x.data(), n_in, n_rows, n_out);
    for (int64_t i = 0; i < n_rows * n_out; ++i)
      ASSERT_TRUE(bits_equal(yl[i], yr[i])) << tname(t) << " " << i << " " << yl[i] << " vs " << yr[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, MatmulSimd, ::testing::ValuesIn(k_simd_levels), level_label);

// ------------------------------------------------------------------ every level

class MatmulLevel : public isa_test {};

// Row r of a big batch must be bitwise equal to row r computed in any batch, at any position,
// with any column split.
void check_sub_batches(ggml_type t, const packed_weight& w, const std::vector<float>& x, int64_t ldx,
                       const std::vector<float>& full, int64_t total) {
  const int64_t n_out = w.n_out(), ldy = n_out, g = col_granularity(w);
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

TEST_P(MatmulLevel, BatchInvariance) {
  std::mt19937 rng(4);
  const int64_t total = 40;
  for (ggml_type t : k_all_types) {
    const int64_t n_in = block_of(t) == 256 ? 512 : (block_of(t) == 32 ? 96 : 45);
    // Float types: 101 columns (13 groups) so the widest column tiles are exercised too.
    const int64_t n_out = block_of(t) == 1 ? 101 : 37;
    const auto wq = random_weight(t, n_out, n_in, rng);
    const packed_weight w = pack_weight(t, wq.data(), n_out, n_in, level());
    const int64_t ldx = n_in + 2;
    const auto x = random_x(total, ldx, rng);
    const auto full = run(w, x.data(), ldx, total, n_out);
    check_sub_batches(t, w, x, ldx, full, total);
    if (HasFatalFailure()) return;
  }
}

TEST_P(MatmulLevel, ColumnSplitsWriteOnlyTheirRange) {
  std::mt19937 rng(5);
  const int64_t n_out = 29, n_in = 64, n_rows = 3;
  const auto wq = random_weight(ggml_type::q4_1, n_out, n_in, rng);
  const packed_weight w = pack_weight(ggml_type::q4_1, wq.data(), n_out, n_in, level());
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

// A packed_weight_set (the experts of a MoE tensor, packed side by side in one
// buffer) gives each matrix bitwise the products of that matrix packed alone,
// for every type, odd shapes, and matrices packed out of order.
TEST_P(MatmulLevel, WeightSetMatricesEqualTheirOwnPacking) {
  std::mt19937 rng(6);
  const int64_t n_mats = 5, n_rows = 3;
  for (ggml_type t : k_all_types) {
    const int64_t n_in = block_of(t) == 256 ? 256 : (block_of(t) == 32 ? 96 : 45);
    const int64_t n_out = 19;
    std::vector<std::vector<uint8_t>> mats;
    std::vector<uint8_t> all;
    for (int64_t i = 0; i < n_mats; ++i) {
      mats.push_back(random_weight(t, n_out, n_in, rng));
      all.insert(all.end(), mats.back().begin(), mats.back().end());
    }
    packed_weight_set set(t, n_mats, n_out, n_in, level());
    const size_t mat_bytes = mats[0].size();
    for (int64_t i : {3, 0, 4, 1, 2}) set.pack(i, all.data() + size_t(i) * mat_bytes);
    ASSERT_EQ(set.size(), size_t(n_mats));
    EXPECT_EQ(set.bytes() == 0, level() == isa_level::scalar);
    const auto x = random_x(n_rows, n_in, rng);
    for (int64_t i = 0; i < n_mats; ++i) {
      const packed_weight alone = pack_weight(t, mats[size_t(i)].data(), n_out, n_in, level());
      const auto want = run(alone, x.data(), n_in, n_rows, n_out);
      const auto got = run(set[size_t(i)], x.data(), n_in, n_rows, n_out);
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << tname(t) << " matrix " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, MatmulLevel, ::testing::ValuesIn(k_all_levels), level_label);

// ------------------------------------------------------------------ avx512 vs avx2, bitwise

// One shape: avx512 == avx2 bitwise for rows 1..17 and 40 and several column
// ranges (full, group-aligned, and unaligned ends / starts the kernels also handle).
void check_avx512_equals_avx2(ggml_type t, const shape& s, const packed_weight& w2, const packed_weight& w5,
                              std::mt19937& rng) {
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
    // With several rows the avx512 kernel pairs neighbouring groups (16 columns on zmm) and
    // runs two pairs per tile: these ranges put a group in two pairs, in a pair, alone at a
    // range's end, and in pairs that start elsewhere (56 columns: 2 + 2 + 2 + 1 groups).
    const int64_t ranges[][2] = {{0, s.n_out},   {8, 24}, {3, s.n_out - 2}, {s.n_out / 8 * 8, s.n_out},
                                 {5, s.n_out - 9}, {16, s.n_out}};
    for (const auto& cr : ranges) {
      const int64_t cb = cr[0], ce = std::min(cr[1], s.n_out);
      const auto y2 = run_range(w2, a2, n_rows, ldy, cb, ce);
      const auto y5 = run_range(w5, a5, n_rows, ldy, cb, ce);
      for (int64_t i = 0; i < n_rows * ldy; ++i)
        ASSERT_TRUE(bits_equal(y2[i], y5[i]))
            << tname(t) << " " << s.n_out << "x" << s.n_in << " rows=" << n_rows << " cols=[" << cb << "," << ce
            << ") row=" << i / ldy << " col=" << i % ldy << " " << y2[i] << " vs " << y5[i];
    }
  }
}

TEST(MatmulAvx512, BitwiseEqualToAvx2) {
  SPATE_SKIP_UNLESS_CPU_SUPPORTS(isa_level::avx512);
  std::mt19937 rng(11);
  for (ggml_type t : k_all_types) {
    for (const shape& s : shapes_for(t)) {
      const auto wq = random_weight(t, s.n_out, s.n_in, rng);
      const packed_weight w2 = pack_weight(t, wq.data(), s.n_out, s.n_in, isa_level::avx2);
      const packed_weight w5 = pack_weight(t, wq.data(), s.n_out, s.n_in, isa_level::avx512);
      EXPECT_EQ(w5.isa(), isa_level::avx512);
      EXPECT_EQ(w5.bytes(), w2.bytes());
      EXPECT_EQ(act_format_id(w5), act_format_id(w2));
      check_avx512_equals_avx2(t, s, w2, w5, rng);
      if (HasFatalFailure()) return;
    }
  }
}

// Inline records (avx2 and avx512): every entry of the region layout lands once, at its block's (or
// super-block head's) offset, and a block's entries are contiguous.
TEST(Matmul, InlineRecordsMoveEveryEntryOnce) {
  struct expect {
    ggml_type t;
    int64_t block_bytes, head_bytes;
  };
  const expect cases[] = {{ggml_type::q4_0, 144, 0},  {ggml_type::q4_1, 160, 0}, {ggml_type::q8_0, 272, 0},
                          {ggml_type::mxfp4, 144, 0}, {ggml_type::q4_k, 144, 32}, {ggml_type::q6_k, 208, 16},
                          {ggml_type::q2_k, 80, 32}};
  for (const expect& e : cases) {
    const int64_t n_in = 512, n_groups = 3;
    const detail::group_layout L = detail::layout_of(e.t, n_in);
    const detail::inline_layout I = detail::inline_of(L);
    EXPECT_EQ(I.block_bytes, e.block_bytes) << tname(e.t);
    EXPECT_EQ(I.head_bytes, e.head_bytes) << tname(e.t);
    EXPECT_EQ(I.at.qs, 0) << tname(e.t);
    EXPECT_EQ(I.stride % 64, 0) << tname(e.t);
    EXPECT_GE(I.stride, L.nb * I.block_bytes + (L.nb / 8) * I.head_bytes * (e.head_bytes > 0)) << tname(e.t);
    // A byte pattern (never 0) over the region records, moved inline.
    std::vector<uint8_t> src8(size_t(L.stride * n_groups)), dst8(size_t(I.stride * n_groups), 0);
    for (size_t i = 0; i < src8.size(); ++i) src8[i] = uint8_t(1 + i % 251);
    detail::write_inline(L, I, src8.data(), n_groups, dst8.data());
    for (int64_t g = 0; g < n_groups; ++g) {
      const uint8_t* rin = src8.data() + g * L.stride;
      const uint8_t* rout = dst8.data() + g * I.stride;
      for (int64_t b = 0; b < L.nb; ++b) {  // qs of block b: region entry b -> block b at offset 0
        EXPECT_EQ(std::memcmp(rout + I.block_offset(b) + I.at.qs, rin + L.qs + b * L.qs_block, size_t(L.qs_block)), 0)
            << tname(e.t) << " g=" << g << " b=" << b;
        if (L.d >= 0) {
          EXPECT_EQ(std::memcmp(rout + I.block_offset(b) + I.at.d, rin + L.d + b * 16, 16), 0) << tname(e.t);
        }
      }
      for (int64_t S = 0; S < L.nb / 8 && L.sd >= 0; ++S)
        EXPECT_EQ(std::memcmp(rout + I.head_offset(S) + I.at.sd, rin + L.sd + S * 16, 16), 0) << tname(e.t) << " S=" << S;
    }
    // Every used byte moved exactly once: the byte sums agree (the regions end at `used`).
    const detail::region_list regions = detail::regions_of(L);
    int64_t used = 0;
    for (int k = 0; k < regions.n; ++k) used += regions.at[k].bytes * (regions.at[k].per_block ? L.nb : L.nb / 8);
    uint64_t sum_in = 0, sum_out = 0;
    for (int64_t g = 0; g < n_groups; ++g)
      for (int64_t i = 0; i < used; ++i) sum_in += src8[size_t(g * L.stride + i)];
    for (uint8_t v : dst8) sum_out += v;
    EXPECT_EQ(sum_in, sum_out) << tname(e.t);
  }
}

TEST(Matmul, PackWeightValidates) {
  std::vector<uint8_t> buf(1 << 16);
  try {
    pack_weight(ggml_type::q8_k, buf.data(), 4, 256, isa_level::scalar);
    FAIL() << "expected throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Q8_K"), std::string::npos) << e.what();
  }
  try {
    pack_weight(ggml_type::q3_k, buf.data(), 4, 128, isa_level::scalar);
    FAIL() << "expected throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Q3_K"), std::string::npos) << e.what();
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

// Repacked buffers are their own mappings: page aligned, and 2 MiB aligned from 2 MiB up
// (so transparent huge pages can back them); padding columns read as zero; moving keeps the
// buffer and the moved-from object frees nothing.
TEST(Matmul, PackedBuffersAreAlignedForHugePages) {
  SPATE_SKIP_UNLESS_CPU_SUPPORTS(isa_level::avx2);
  std::mt19937 rng(21);
  const int64_t big_out = 4100, small_out = 13, n_in = 1024;  // Q4_0: ~2.4 MB and ~8 KB packed
  const auto wq = random_weight(ggml_type::q4_0, big_out, n_in, rng);
  packed_weight big = pack_weight(ggml_type::q4_0, wq.data(), big_out, n_in, isa_level::avx2);
  const packed_weight small = pack_weight(ggml_type::q4_0, wq.data(), small_out, n_in, isa_level::avx2);
  EXPECT_GE(big.bytes(), size_t{2} << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % (uintptr_t{2} << 20), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 4096, 0u);
  // The 4 padding columns of the last group of `big` are zero in every byte of their lanes:
  // the output is computed from the real columns only and matches the reference.
  const auto x = random_x(1, n_in, rng);
  const packed_weight ref = pack_weight(ggml_type::q4_0, wq.data(), big_out, n_in, isa_level::scalar);
  const auto y = run(big, x.data(), n_in, 1, big_out);
  const auto yr = run(ref, x.data(), n_in, 1, big_out);
  for (int64_t c = big_out - 8; c < big_out; ++c) EXPECT_NEAR(y[c], yr[c], 1e-3f * (1.0f + std::fabs(yr[c]))) << c;
  const uint8_t* data = big.data();
  packed_weight moved = std::move(big);
  EXPECT_EQ(moved.data(), data);
}

}  // namespace
}  // namespace spate::kernels
