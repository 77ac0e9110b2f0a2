// Matmul tests: AVX2 vs scalar reference, both vs float math on dequantized
// weights, bitwise batch invariance, activation quantizer agreement, argument
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

namespace spate::kernels {
namespace {

const ggml_type k_all_types[] = {ggml_type::f32,  ggml_type::f16,  ggml_type::bf16, ggml_type::q8_0,
                                 ggml_type::q4_0, ggml_type::q4_1, ggml_type::q5_0, ggml_type::q5_1,
                                 ggml_type::q4_k, ggml_type::q5_k, ggml_type::q6_k};

const char* tname(ggml_type t) { return type_name(static_cast<uint32_t>(t)); }
int64_t block_of(ggml_type t) { return traits_of(uint32_t(t))->block_elems; }
bool have_avx2() { return detect_isa() == isa_level::avx2; }

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// Random GGUF rows: random quant bytes, sane random scales.
std::vector<uint8_t> random_weight(ggml_type t, int64_t n_out, int64_t n_in, std::mt19937& rng) {
  const auto tr = *traits_of(uint32_t(t));
  const int64_t rb = row_bytes(tr, n_in);
  std::vector<uint8_t> w(size_t(rb * n_out));
  std::uniform_real_distribution<float> uf(-1.0f, 1.0f);
  if (t == ggml_type::f32 || t == ggml_type::f16 || t == ggml_type::bf16) {
    for (int64_t i = 0; i < n_out * n_in; ++i) {
      const float v = uf(rng);
      if (t == ggml_type::f32) std::memcpy(w.data() + 4 * i, &v, 4);
      else {
        const uint16_t h = t == ggml_type::f16 ? f32_to_fp16(v) : f32_to_bf16(v);
        std::memcpy(w.data() + 2 * i, &h, 2);
      }
    }
    return w;
  }
  for (auto& b : w) b = uint8_t(rng());
  std::uniform_real_distribution<float> ud(0.001f, 0.02f);
  const int64_t nblk = n_out * n_in / tr.block_elems;
  for (int64_t i = 0; i < nblk; ++i) {
    uint8_t* b = w.data() + i * tr.block_bytes;
    switch (t) {
      case ggml_type::q4_0: case ggml_type::q5_0: case ggml_type::q8_0:
        put_half(b, ud(rng) * (rng() % 2 ? 1.0f : -1.0f));
        break;
      case ggml_type::q4_1: case ggml_type::q5_1:
        put_half(b, ud(rng));
        put_half(b + 2, -ud(rng) * 8.0f);
        break;
      case ggml_type::q4_k: case ggml_type::q5_k:
        put_half(b, ud(rng) * 0.1f);
        put_half(b + 2, ud(rng) * 0.1f);
        break;
      case ggml_type::q6_k:
        put_half(b + 208, ud(rng) * 0.05f);
        break;
      default: break;
    }
  }
  return w;
}

std::vector<float> random_x(int64_t n_rows, int64_t ldx, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n_rows * ldx));
  for (auto& v : x) v = nd(rng);
  return x;
}

// y for all rows and columns through the public interface.
std::vector<float> run(const packed_weight& w, const float* x, int64_t ldx, int64_t n_rows, int64_t ldy) {
  std::vector<uint8_t> act(act_bytes(w, n_rows));
  quantize_act(w, x, ldx, 0, n_rows, act.data());
  std::vector<float> y(size_t(n_rows * ldy), -777.0f);
  matmul(w, act.data(), n_rows, y.data(), ldy, 0, w.n_out());
  return y;
}

double rel_err(const std::vector<float>& a, const std::vector<double>& ref, int64_t n_rows, int64_t n_out,
               int64_t lda) {
  double num = 0, den = 0;
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t c = 0; c < n_out; ++c) {
      const double d = double(a[r * lda + c]) - ref[r * n_out + c];
      num += d * d;
      den += ref[r * n_out + c] * ref[r * n_out + c];
    }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Float math on dequantized weights (double accumulation). If mag is given it receives
// sum_k |W[c][k] * x[r][k]|, the natural scale of the activation-quantization error.
std::vector<double> float_math(ggml_type t, const std::vector<uint8_t>& wq, int64_t n_out, int64_t n_in,
                               const std::vector<float>& x, int64_t ldx, int64_t n_rows,
                               std::vector<double>* mag = nullptr) {
  const int64_t rb = row_bytes(*traits_of(uint32_t(t)), n_in);
  std::vector<float> wrow(static_cast<size_t>(n_in));
  std::vector<double> y(size_t(n_rows * n_out));
  if (mag) mag->assign(size_t(n_rows * n_out), 0.0);
  for (int64_t c = 0; c < n_out; ++c) {
    dequantize_row(t, wq.data() + c * rb, wrow.data(), n_in);
    for (int64_t r = 0; r < n_rows; ++r) {
      double s = 0, m = 0;
      for (int64_t k = 0; k < n_in; ++k) {
        s += double(wrow[k]) * double(x[r * ldx + k]);
        m += std::fabs(double(wrow[k]) * double(x[r * ldx + k]));
      }
      y[r * n_out + c] = s;
      if (mag) (*mag)[r * n_out + c] = m;
    }
  }
  return y;
}

// ||a - ref|| / ||mag||: error relative to the magnitude of the terms summed.
double err_vs_mag(const std::vector<float>& a, const std::vector<double>& ref, const std::vector<double>& mag,
                  int64_t n_rows, int64_t n_out, int64_t lda) {
  double num = 0, den = 0;
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t c = 0; c < n_out; ++c) {
      const double d = double(a[r * lda + c]) - ref[r * n_out + c];
      num += d * d;
      den += mag[r * n_out + c] * mag[r * n_out + c];
    }
  return std::sqrt(num / std::max(den, 1e-30));
}

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

TEST(Matmul, BatchInvarianceReference) { check_batch_invariance(isa_level::scalar); }

TEST(Matmul, ColumnSplitsWriteOnlyTheirRange) {
  std::mt19937 rng(5);
  for (isa_level level : {isa_level::scalar, isa_level::avx2}) {
    if (level == isa_level::avx2 && !have_avx2()) continue;
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
