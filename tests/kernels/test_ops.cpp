// Tests for kernels/ops.h, parameterized over the ISA levels (isa_test_util.h):
// each SIMD level's ops against the scalar reference, every level against
// direct double-precision formulas, batch invariance and alignment
// independence at every level; the AVX2 exp and the scalar f16 conversions of
// kernels/fp16.h against F16C. Levels the CPU lacks are skipped. The KV cache
// and attention tests are in test_ops_attention.cpp, YaRN's rotary angles in
// test_rope_yarn.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "isa_test_util.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/ops.h"
#include "kernels/ops_internal.h"
#include "ops_test_util.h"

namespace spate::kernels {
namespace {

using namespace spate::kernels::test;

// The suites of ops_test_util.h, for the tests of every test_ops*.cpp file.
INSTANTIATE_TEST_SUITE_P(Levels, OpsSimd, ::testing::ValuesIn(k_simd_levels), level_label);
INSTANTIATE_TEST_SUITE_P(Levels, OpsLevel, ::testing::ValuesIn(k_all_levels), level_label);

// ------------------------------------------------------------------ dispatch

TEST(KernelOps, DispatchFollowsActiveIsa) {
  EXPECT_EQ(&ops(), &ops_for(active_isa()));
  EXPECT_EQ(&ops_for(isa_level::scalar), &detail::ops_ref_table());
  // The avx512 level runs the avx2 ops except for its own attention and gated activations.
  if (cpu_supports(isa_level::avx512)) {
    const ops_table& a512 = ops_for(isa_level::avx512);
    const ops_table& a2 = detail::ops_avx2_table();
    EXPECT_EQ(&a512, &detail::ops_avx512_table());
    EXPECT_EQ(a512.rms_norm, a2.rms_norm);
    EXPECT_EQ(a512.kv_store, a2.kv_store);
    EXPECT_NE(a512.attention, a2.attention);
    EXPECT_NE(a512.swiglu_oai, a2.swiglu_oai);
  }
  EXPECT_EQ(attention_scratch_floats(3, 1), attention_scratch_floats(3, 8));
  EXPECT_GE(attention_scratch_floats(3, 9), 3 * 9);
}

// ------------------------------------------------------------------ rms_norm

TEST_P(OpsSimd, RmsNormMatchesRef) {
  std::mt19937 rng(1);
  for (int64_t n : tail_sizes()) {
    const auto x = random_vec(rng, n, -3.0f, 3.0f);
    const auto w = random_vec(rng, n, 0.5f, 1.5f);
    std::vector<float> yr(n), ya(n);
    ref().rms_norm(x.data(), w.data(), yr.data(), n, 1e-6f);
    simd().rms_norm(x.data(), w.data(), ya.data(), n, 1e-6f);
    EXPECT_LT(norm_err(ya, yr), 2e-6) << "n=" << n;
    // In place (x and y alias) gives the same bits as out of place.
    for (const ops_table* t : {&ref(), &simd()}) {
      std::vector<float> out(n), inplace = x;
      t->rms_norm(x.data(), w.data(), out.data(), n, 1e-6f);
      t->rms_norm(inplace.data(), w.data(), inplace.data(), n, 1e-6f);
      EXPECT_TRUE(bits_equal(out, inplace)) << "n=" << n;
    }
  }
}

TEST(KernelOps, RmsNormRefMatchesDouble) {
  std::mt19937 rng(2);
  for (int64_t n : {1, 7, 64, 2048}) {
    const auto x = random_vec(rng, n, -3.0f, 3.0f);
    const auto w = random_vec(rng, n, 0.5f, 1.5f);
    std::vector<float> y(n);
    ref().rms_norm(x.data(), w.data(), y.data(), n, 1e-5f);
    double ss = 0.0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
    std::vector<double> yd(n);
    for (int64_t i = 0; i < n; ++i) yd[i] = x[i] * inv * w[i];
    EXPECT_LT(norm_err(y, yd), 1e-6) << "n=" << n;
  }
}

// ------------------------------------------------------------------ rope

struct rope_case {
  int32_t n_heads, head_dim, n_rot, pos;
  float base;
  bool factors;
};

std::vector<rope_case> rope_cases() {
  std::vector<rope_case> cs;
  for (int32_t pos : {0, 1, 17, 511, 4095, 131071}) {
    cs.push_back({9, 64, 64, pos, 10000.0f, false});
    cs.push_back({3, 128, 128, pos, 500000.0f, true});
    cs.push_back({5, 80, 32, pos, 10000.0f, false});   // partial rotation
    cs.push_back({1, 6, 6, pos, 10000.0f, true});      // tiny head, pure tail
    cs.push_back({7, 96, 90, pos, 1000000.0f, true});  // n_rot % 8 != 0
    cs.push_back({2, 64, 0, pos, 10000.0f, false});    // no rotation
  }
  return cs;
}

std::vector<double> rope_double(const std::vector<float>& x, const rope_case& c, const float* ff, rope_mode mode) {
  std::vector<double> y(x.begin(), x.end());
  const int32_t half = c.n_rot / 2;
  for (int32_t h = 0; h < c.n_heads; ++h) {
    for (int32_t i = 0; i < half; ++i) {
      double theta = c.pos * std::pow(static_cast<double>(c.base), -2.0 * i / c.n_rot);
      if (ff) theta /= ff[i];
      const int32_t i0 = h * c.head_dim + (mode == rope_mode::normal ? 2 * i : i);
      const int32_t i1 = h * c.head_dim + (mode == rope_mode::normal ? 2 * i + 1 : i + half);
      const double x0 = x[i0], x1 = x[i1];
      y[i0] = x0 * std::cos(theta) - x1 * std::sin(theta);
      y[i1] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  }
  return y;
}

// Every level against the double formula; the SIMD levels also against the reference.
TEST_P(OpsLevel, RopeMatchesDoubleFormulaAndRef) {
  std::mt19937 rng(3);
  for (const rope_case& c : rope_cases()) {
    for (rope_mode mode : {rope_mode::normal, rope_mode::neox}) {
      const auto x = random_vec(rng, static_cast<int64_t>(c.n_heads) * c.head_dim);
      const auto ffv = random_vec(rng, std::max(1, c.n_rot / 2), 1.0f, 8.0f);
      const float* ff = c.factors ? ffv.data() : nullptr;
      const auto yd = rope_double(x, c, ff, mode);
      std::vector<float> cs(static_cast<size_t>(std::max(c.n_rot, 1)));
      rope_angles(c.n_rot, c.pos, c.base, ff, cs.data());
      std::vector<float> yl = x;
      ops_at().rope(yl.data(), c.n_heads, c.head_dim, c.n_rot, cs.data(), mode);
      EXPECT_LT(norm_err(yl, yd), 3e-7) << "pos=" << c.pos << " hd=" << c.head_dim << " mode=" << int(mode);
      // Dims past n_rot untouched.
      for (int32_t h = 0; h < c.n_heads; ++h)
        for (int32_t d = c.n_rot; d < c.head_dim; ++d) ASSERT_EQ(yl[h * c.head_dim + d], x[h * c.head_dim + d]);
      if (level() == isa_level::scalar) continue;
      std::vector<float> yr = x;
      ref().rope(yr.data(), c.n_heads, c.head_dim, c.n_rot, cs.data(), mode);
      EXPECT_LT(norm_err(yl, yr), 3e-7) << "pos=" << c.pos << " hd=" << c.head_dim << " mode=" << int(mode);
    }
  }
}

// ------------------------------------------------------------------ swiglu / add / softmax

TEST_P(OpsSimd, SwigluMatchesRef) {
  std::mt19937 rng(4);
  for (int64_t n : tail_sizes()) {
    const auto g = random_vec(rng, n, -12.0f, 12.0f);
    const auto u = random_vec(rng, n, -2.0f, 2.0f);
    std::vector<float> yr(n), ya(n);
    ref().swiglu(g.data(), u.data(), yr.data(), n);
    simd().swiglu(g.data(), u.data(), ya.data(), n);
    EXPECT_LT(norm_err(ya, yr), 1e-6) << "n=" << n;
  }
  // Extremes: large |gate| saturates to gate*up or -0, no NaN.
  const std::vector<float> g{-200.0f, -88.0f, -20.0f, 0.0f, 20.0f, 88.0f, 200.0f, 1e30f, -1e30f};
  const std::vector<float> u(g.size(), 1.5f);
  std::vector<float> yr(g.size()), ya(g.size());
  ref().swiglu(g.data(), u.data(), yr.data(), static_cast<int64_t>(g.size()));
  simd().swiglu(g.data(), u.data(), ya.data(), static_cast<int64_t>(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_FALSE(std::isnan(ya[i])) << g[i];
    EXPECT_NEAR(ya[i], yr[i], std::fabs(yr[i]) * 1e-6f + 1e-30f) << g[i];
  }
}

TEST_P(OpsSimd, GegluMatchesRef) {
  std::mt19937 rng(14);
  for (int64_t n : tail_sizes()) {
    const auto g = random_vec(rng, n, -8.0f, 8.0f);
    const auto u = random_vec(rng, n, -2.0f, 2.0f);
    std::vector<float> yr(n), ya(n);
    ref().geglu(g.data(), u.data(), yr.data(), n);
    simd().geglu(g.data(), u.data(), ya.data(), n);
    EXPECT_LT(norm_err(ya, yr), 1e-6) << "n=" << n;
  }
  // Extremes: large |gate| saturates to gate*up or -0, no NaN.
  const std::vector<float> g{-1e30f, -200.0f, -20.0f, -3.0f, 0.0f, 0.5f, 3.0f, 20.0f, 200.0f, 1e30f};
  const std::vector<float> u(g.size(), 1.5f);
  std::vector<float> yr(g.size()), ya(g.size());
  ref().geglu(g.data(), u.data(), yr.data(), static_cast<int64_t>(g.size()));
  simd().geglu(g.data(), u.data(), ya.data(), static_cast<int64_t>(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_FALSE(std::isnan(ya[i])) << g[i];
    EXPECT_NEAR(ya[i], yr[i], std::fabs(yr[i]) * 1e-6f + 1e-8f) << g[i];
  }
}

// The reference against gelu_tanh in double: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
TEST(KernelOps, GegluRefMatchesTanhFormula) {
  std::mt19937 rng(15);
  const auto g = random_vec(rng, 1000, -10.0f, 10.0f);
  const std::vector<float> u(g.size(), 1.0f);
  std::vector<float> y(g.size());
  ref().geglu(g.data(), u.data(), y.data(), static_cast<int64_t>(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = g[i];
    const double want = 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(y[i], want, 1e-6 * std::fabs(want) + 1e-6) << x;
  }
}

// ------------------------------------------------------------------ swiglu_oai (gpt-oss)

constexpr float k_oai_alpha = 1.702f, k_oai_limit = 7.0f;

// Against the reference (the swiglu tolerance) over odd tails, with gate and
// up beyond +-limit; in place (out = gate or out = up) gives the same bits.
TEST_P(OpsSimd, SwigluOaiMatchesRef) {
  std::mt19937 rng(16);
  for (int64_t n : tail_sizes()) {
    const auto g = random_vec(rng, n, -12.0f, 12.0f);
    const auto u = random_vec(rng, n, -10.0f, 10.0f);
    std::vector<float> yr(n), ya(n);
    ref().swiglu_oai(g.data(), u.data(), yr.data(), n, k_oai_alpha, k_oai_limit);
    simd().swiglu_oai(g.data(), u.data(), ya.data(), n, k_oai_alpha, k_oai_limit);
    EXPECT_LT(norm_err(ya, yr), 1e-6) << "n=" << n;
    for (const ops_table* t : {&ref(), &simd()}) {
      const std::vector<float>& want = t == &ref() ? yr : ya;
      auto gi = g, ui = u;
      t->swiglu_oai(gi.data(), u.data(), gi.data(), n, k_oai_alpha, k_oai_limit);
      t->swiglu_oai(g.data(), ui.data(), ui.data(), n, k_oai_alpha, k_oai_limit);
      EXPECT_TRUE(bits_equal(gi, want)) << "n=" << n;
      EXPECT_TRUE(bits_equal(ui, want)) << "n=" << n;
    }
  }
  // Extremes: clamped gates and ups, saturating exp, NaN in gate or up stays NaN (as ggml's std::min / clamp).
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> g{-1e30f, -200.0f, -60.0f, -40.0f, -7.5f, -0.0f, 0.0f, 6.99f, 7.0f, 7.01f, 8.0f, 1e30f, inf,
                             nan,    1.0f,    1.0f,   1.0f,   1.0f,  1.0f,  -2.0f, 3.0f};
  const std::vector<float> u{1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f, -1.0f, 0.0f, 2.0f, 1.5f, 1.5f, 1.5f,
                             1.5f, -inf, inf,  -8.0f, 8.0f, nan,   -7.0f, 7.0f};
  const auto n = static_cast<int64_t>(g.size());
  std::vector<float> yr(g.size()), ya(g.size());
  ref().swiglu_oai(g.data(), u.data(), yr.data(), n, k_oai_alpha, k_oai_limit);
  simd().swiglu_oai(g.data(), u.data(), ya.data(), n, k_oai_alpha, k_oai_limit);
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) || std::isnan(u[i])) {
      EXPECT_TRUE(std::isnan(yr[i]) && std::isnan(ya[i])) << i;
      continue;
    }
    EXPECT_FALSE(std::isnan(ya[i])) << g[i];
    EXPECT_NEAR(ya[i], yr[i], std::fabs(yr[i]) * 1e-6f + 1e-30f) << g[i] << " " << u[i];
  }
}

// The reference against the formula in double: x = min(g, limit), y = clamp(u, -limit, limit),
// x * sigmoid(alpha x) * (y + 1); other alpha and limit values too.
TEST(KernelOps, SwigluOaiRefMatchesFormula) {
  std::mt19937 rng(17);
  const auto g = random_vec(rng, 2001, -15.0f, 15.0f);
  const auto u = random_vec(rng, 2001, -15.0f, 15.0f);
  for (auto [alpha, limit] : {std::pair{k_oai_alpha, k_oai_limit}, std::pair{1.0f, 3.0f}, std::pair{2.5f, 100.0f}}) {
    std::vector<float> y(g.size());
    ref().swiglu_oai(g.data(), u.data(), y.data(), static_cast<int64_t>(g.size()), alpha, limit);
    for (size_t i = 0; i < g.size(); ++i) {
      const double x = std::min<double>(g[i], limit), yy = std::clamp<double>(u[i], -limit, limit);
      const double want = x / (1.0 + std::exp(-static_cast<double>(alpha) * x)) * (yy + 1.0);
      EXPECT_NEAR(y[i], want, 1e-6 * std::fabs(want) + 1e-6) << g[i] << " " << u[i];
    }
  }
  // Known values at gpt-oss's constants: x = 7 (clamped from 9), y = -7 (clamped from -9): 7 sigma(11.914) * -6.
  const float g1 = 9.0f, u1 = -9.0f;
  float y1 = 0.0f;
  ref().swiglu_oai(&g1, &u1, &y1, 1, k_oai_alpha, k_oai_limit);
  EXPECT_NEAR(y1, -42.0 / (1.0 + std::exp(-11.914)), 1e-5);
}

TEST_P(OpsSimd, AddMatchesRefExactly) {
  std::mt19937 rng(5);
  for (int64_t n : tail_sizes()) {
    const auto x = random_vec(rng, n);
    auto yr = random_vec(rng, n);
    auto ya = yr;
    ref().add(yr.data(), x.data(), n);
    simd().add(ya.data(), x.data(), n);
    EXPECT_TRUE(bits_equal(ya, yr)) << "n=" << n;
  }
}

TEST_P(OpsSimd, LoraExpandMatchesRefExactly) {
  std::mt19937 rng(15);
  for (int32_t rank : {1, 7, 16, 33}) {
    for (int64_t n : tail_sizes()) {
      const int64_t ld = n + 5;
      const auto bt = random_vec(rng, ld * rank);
      const auto t = random_vec(rng, rank, -3.0f, 3.0f);
      auto yr = random_vec(rng, n);
      auto ya = yr;
      ref().lora_expand(yr.data(), bt.data(), ld, rank, t.data(), 0.75f, n);
      simd().lora_expand(ya.data(), bt.data(), ld, rank, t.data(), 0.75f, n);
      EXPECT_TRUE(bits_equal(ya, yr)) << "rank=" << rank << " n=" << n;
      // The reference is the sum it states (in double, to float rounding).
      for (int64_t c = 0; c < n; c += std::max<int64_t>(1, n / 7)) {
        double s = 0;
        for (int32_t j = 0; j < rank; ++j) s += static_cast<double>(t[static_cast<size_t>(j)]) * bt[static_cast<size_t>(j * ld + c)];
        auto y0 = random_vec(rng, 1);
        float y1 = y0[0];
        ref().lora_expand(&y1, bt.data() + c, ld, rank, t.data(), 0.75f, 1);
        EXPECT_NEAR(y1, y0[0] + 0.75 * s, 1e-4 * (1 + std::fabs(s))) << "rank=" << rank << " c=" << c;
      }
    }
  }
}

TEST_P(OpsSimd, SoftmaxMatchesRef) {
  std::mt19937 rng(6);
  for (int64_t n : tail_sizes()) {
    for (float range : {1.0f, 30.0f, 1000.0f}) {
      const auto x = random_vec(rng, n, -range, range);
      auto yr = x, ya = x;
      ref().softmax(yr.data(), n);
      simd().softmax(ya.data(), n);
      EXPECT_LT(norm_err(ya, yr), 2e-6) << "n=" << n << " range=" << range;
      double s = 0.0;
      for (float v : ya) s += v;
      EXPECT_NEAR(s, 1.0, 1e-5) << "n=" << n;
    }
  }
  // -inf entries get weight 0; all-equal inputs give uniform weights.
  std::vector<float> x{-std::numeric_limits<float>::infinity(), 0.0f, 0.0f, -std::numeric_limits<float>::infinity(), 0.0f};
  simd().softmax(x.data(), 5);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_EQ(x[3], 0.0f);
  EXPECT_NEAR(x[1], 1.0f / 3.0f, 1e-7f);
}

TEST(KernelOps, SoftmaxRefMatchesDouble) {
  std::mt19937 rng(7);
  for (int64_t n : {1, 3, 64, 1000}) {
    const auto x = random_vec(rng, n, -20.0f, 20.0f);
    auto y = x;
    ref().softmax(y.data(), n);
    const double mx = *std::max_element(x.begin(), x.end());
    std::vector<double> yd(n);
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += (yd[i] = std::exp(x[i] - mx));
    for (auto& v : yd) v /= s;
    EXPECT_LT(norm_err(y, yd), 1e-6) << "n=" << n;
  }
}

// ------------------------------------------------------------------ exp

// ulps between a float result and the exact value.
double ulp_error(float got, double exact) {
  if (std::isinf(exact) || exact > std::numeric_limits<float>::max()) return std::isinf(got) ? 0.0 : 1e9;
  const float ef = static_cast<float>(exact);
  const double ulp = ef == 0.0f || std::fabs(ef) < std::numeric_limits<float>::min()
                         ? std::ldexp(1.0, -149)
                         : std::ldexp(1.0, std::ilogb(ef) - 23);
  return std::fabs(got - exact) / ulp;
}

TEST(KernelOps, ExpAvx2Within2Ulp) {
  SPATE_SKIP_UNLESS_CPU_SUPPORTS(isa_level::avx2);
  std::vector<float> x;
  for (float v = -104.5f; v < 89.5f; v += 0.000731f) x.push_back(v);
  std::mt19937 rng(8);
  for (float v : random_vec(rng, 100000, -1.0f, 1.0f)) x.push_back(v);
  std::vector<float> y(x.size());
  detail::exp_avx2(x.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst = 0.0;
  float worst_x = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = ulp_error(y[i], std::exp(static_cast<double>(x[i])));
    if (e > worst) {
      worst = e;
      worst_x = x[i];
    }
  }
  EXPECT_LE(worst, 2.0) << "at x=" << worst_x;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> sx{0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1.0f, -1000.0f, 1000.0f};
  std::vector<float> sy(sx.size());
  detail::exp_avx2(sx.data(), sy.data(), static_cast<int64_t>(sx.size()));
  EXPECT_EQ(sy[0], 1.0f);
  EXPECT_EQ(sy[1], 1.0f);
  EXPECT_EQ(sy[2], inf);
  EXPECT_EQ(sy[3], 0.0f);
  EXPECT_TRUE(std::isnan(sy[4]));
  EXPECT_NEAR(sy[5], static_cast<float>(M_E), 3e-7f);
  EXPECT_EQ(sy[6], 0.0f);
  EXPECT_EQ(sy[7], inf);
}

// ------------------------------------------------------------------ f16 conversions

TEST(KernelOps, Fp16ToF32MatchesF16cForAllHalves) {
  SPATE_SKIP_UNLESS_CPU_SUPPORTS(isa_level::avx2);
  std::vector<uint16_t> h(65536);
  std::iota(h.begin(), h.end(), uint16_t{0});
  std::vector<float> f(65536);
  detail::f16c_to_f32(h.data(), f.data(), 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    const float mine = fp16_to_f32(static_cast<uint16_t>(i));
    if (std::isnan(f[i])) {
      ASSERT_TRUE(std::isnan(mine)) << std::hex << i;
    } else {
      ASSERT_EQ(bits_from_f32(mine), bits_from_f32(f[i])) << std::hex << i;
    }
  }
}

TEST(KernelOps, F32ToFp16MatchesF16cAtRoundingBoundaries) {
  SPATE_SKIP_UNLESS_CPU_SUPPORTS(isa_level::avx2);
  std::vector<float> xs;
  const float inf = std::numeric_limits<float>::infinity();
  // Named edge cases.
  for (float v : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 65504.0f, 65519.996f, 65520.0f,
                  65536.0f, 1e10f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(1.5f, -24),
                  std::ldexp(1.5f, -25), std::ldexp(1.0f, -14), std::ldexp(1023.0f, -24), std::ldexp(1.0f, -26),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::max(), 1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(3.0f, -11)}) {
    xs.push_back(v);
    xs.push_back(-v);
  }
  // Every half value, the midpoint to its successor (ties), and the floats just around that midpoint.
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const float a = fp16_to_f32(static_cast<uint16_t>(h));
    const float b = fp16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((static_cast<double>(a) + b) / 2.0);  // exact: 11-bit values
    for (float v : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, inf)}) {
      xs.push_back(v);
      xs.push_back(-v);
    }
  }
  // A sweep over the whole float bit space.
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) xs.push_back(f32_from_bits(static_cast<uint32_t>(u)));
  std::vector<uint16_t> hw(xs.size());
  detail::f16c_from_f32(xs.data(), hw.data(), static_cast<int64_t>(xs.size()));
  size_t bad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const uint16_t mine = f32_to_fp16(xs[i]);
    if (std::isnan(xs[i])) {
      const bool mine_nan = (mine & 0x7c00u) == 0x7c00u && (mine & 0x3ffu) != 0;
      EXPECT_TRUE(mine_nan) << std::hex << bits_from_f32(xs[i]);
      EXPECT_EQ(mine & 0x8000u, hw[i] & 0x8000u);
      continue;
    }
    if (mine != hw[i] && ++bad < 10) {
      ADD_FAILURE() << "x=" << xs[i] << " bits=" << std::hex << bits_from_f32(xs[i]) << " mine=" << mine
                    << " f16c=" << hw[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

// ------------------------------------------------------------------ batch invariance

// The same values at a different address (misaligned by `shift` floats) give the same bits.
TEST_P(OpsLevel, ResultsIndependentOfBufferAlignment) {
  std::mt19937 rng(9);
  const ops_table& t = ops_at();
  for (int64_t n : {5, 37, 300}) {
    const auto x = random_vec(rng, n, -5.0f, 5.0f);
    const auto w = random_vec(rng, n);
    std::vector<float> base_norm, base_soft, base_swi;
    for (int shift = 0; shift < 8; ++shift) {
      std::vector<float> xb(n + 8), wb(n + 8), yb(n + 8), sb(n + 8);
      std::copy(x.begin(), x.end(), xb.begin() + shift);
      std::copy(w.begin(), w.end(), wb.begin() + shift);
      std::copy(x.begin(), x.end(), sb.begin() + shift);
      t.rms_norm(xb.data() + shift, wb.data() + shift, yb.data() + shift, n, 1e-6f);
      std::vector<float> norm(yb.begin() + shift, yb.begin() + shift + n);
      t.softmax(sb.data() + shift, n);
      std::vector<float> soft(sb.begin() + shift, sb.begin() + shift + n);
      t.swiglu(xb.data() + shift, wb.data() + shift, yb.data() + shift, n);
      std::vector<float> swi(yb.begin() + shift, yb.begin() + shift + n);
      if (shift == 0) {
        base_norm = norm;
        base_soft = soft;
        base_swi = swi;
      } else {
        EXPECT_TRUE(bits_equal(norm, base_norm)) << "n=" << n << " shift=" << shift;
        EXPECT_TRUE(bits_equal(soft, base_soft)) << "n=" << n << " shift=" << shift;
        EXPECT_TRUE(bits_equal(swi, base_swi)) << "n=" << n << " shift=" << shift;
      }
    }
  }
}

}  // namespace
}  // namespace spate::kernels
