// Tests for kernels/ops.h, parameterized over the ISA levels (isa_test_util.h):
// each SIMD level's ops against the scalar reference, every level against
// direct double-precision formulas, batch invariance and alignment
// independence at every level; the AVX2 exp and the scalar f16 conversions of
// kernels/fp16.h against F16C. Levels the CPU lacks are skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "isa_test_util.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/ops.h"
#include "kernels/ops_internal.h"

namespace spate::kernels {
namespace {

using namespace spate::kernels::test;

const ops_table& ref() { return ops_for(isa_level::scalar); }

// Suites of the SIMD levels (ops of level() against the scalar reference) and of every level.
class OpsSimd : public isa_test {
 protected:
  const ops_table& simd() const { return ops_for(level()); }
};
class OpsLevel : public isa_test {
 protected:
  const ops_table& ops_at() const { return ops_for(level()); }
};
INSTANTIATE_TEST_SUITE_P(Levels, OpsSimd, ::testing::ValuesIn(k_simd_levels), level_label);
INSTANTIATE_TEST_SUITE_P(Levels, OpsLevel, ::testing::ValuesIn(k_all_levels), level_label);

std::vector<float> random_vec(std::mt19937& rng, int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// ||a - b|| / ||b||, in double.
double norm_err(const float* a, const float* b, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}
double norm_err(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  return norm_err(a.data(), b.data(), static_cast<int64_t>(a.size()));
}
double norm_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

std::vector<int64_t> tail_sizes() {
  std::vector<int64_t> ns;
  for (int64_t n = 1; n <= 67; ++n) ns.push_back(n);
  for (int64_t n : {127, 128, 129, 1000, 2048, 4096, 5003}) ns.push_back(n);
  return ns;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ------------------------------------------------------------------ dispatch

TEST(KernelOps, DispatchFollowsActiveIsa) {
  EXPECT_EQ(&ops(), &ops_for(active_isa()));
  EXPECT_EQ(&ops_for(isa_level::scalar), &detail::ops_ref_table());
  // The avx512 level runs the avx2 ops except for its own attention.
  if (cpu_supports(isa_level::avx512)) {
    const ops_table& a512 = ops_for(isa_level::avx512);
    const ops_table& a2 = detail::ops_avx2_table();
    EXPECT_EQ(&a512, &detail::ops_avx512_table());
    EXPECT_EQ(a512.rms_norm, a2.rms_norm);
    EXPECT_EQ(a512.kv_store, a2.kv_store);
    EXPECT_NE(a512.attention, a2.attention);
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

// ------------------------------------------------------------------ paged KV cache, attention

// A paged cache for one layer with a random (non-contiguous, permuted) block table.
struct paged_cache {
  paged_kv_view view;
  std::vector<float> kf, vf;
  std::vector<uint16_t> kh, vh;
  std::vector<int32_t> table;

  paged_cache(kv_dtype dt, int32_t block_size, int32_t n_kv_heads, int32_t head_dim, int32_t n_ctx, uint32_t seed) {
    const int32_t n_used = (n_ctx + block_size - 1) / block_size;
    const int32_t n_blocks = 2 * n_used + 3;
    const size_t elems = static_cast<size_t>(n_blocks) * n_kv_heads * block_size * head_dim;
    std::mt19937 rng(seed);
    view.dtype = dt;
    view.block_size = block_size;
    view.n_kv_heads = n_kv_heads;
    view.head_dim = head_dim;
    if (dt == kv_dtype::f32) {
      // Poison unused slots so a read outside [0, n_ctx) shows up.
      kf.assign(elems, std::numeric_limits<float>::quiet_NaN());
      vf.assign(elems, std::numeric_limits<float>::quiet_NaN());
      view.k = kf.data();
      view.v = vf.data();
    } else {
      kh.assign(elems, 0x7e00u);
      vh.assign(elems, 0x7e00u);
      view.k = kh.data();
      view.v = vh.data();
    }
    std::vector<int32_t> perm(n_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    table.assign(perm.begin(), perm.begin() + n_used);
  }

  // Fills positions [0, n_ctx) of every kv head with random K/V through kv_store.
  void fill(const ops_table& t, int32_t n_ctx, uint32_t seed, float k_range = 1.0f, int32_t from = 0) {
    std::mt19937 rng(seed);
    for (int32_t p = from; p < n_ctx; ++p)
      for (int32_t h = 0; h < view.n_kv_heads; ++h) {
        const auto k = random_vec(rng, view.head_dim, -k_range, k_range);
        const auto v = random_vec(rng, view.head_dim);
        t.kv_store(view, table[p / view.block_size], p % view.block_size, h, k.data(), v.data());
      }
  }

  float elem(bool is_k, int32_t p, int32_t h, int32_t d) const {
    const int32_t block = table[p / view.block_size], slot = p % view.block_size;
    const int64_t at = is_k ? detail::kv_k_index(view, block, h, slot, d) : detail::kv_v_row_index(view, block, h, slot) + d;
    if (view.dtype == kv_dtype::f32) return (is_k ? kf : vf)[at];
    return fp16_to_f32((is_k ? kh : vh)[at]);
  }
};

TEST_P(OpsSimd, KvStoreMatchesRefBitwise) {
  for (kv_dtype dt : {kv_dtype::f16, kv_dtype::f32}) {
    for (int32_t hd : {1, 7, 8, 13, 64, 128}) {
      paged_cache a(dt, 16, 3, hd, 37, 11), b(dt, 16, 3, hd, 37, 11);
      a.fill(ref(), 37, 12, 70000.0f);  // includes values that overflow to inf in f16
      b.fill(simd(), 37, 12, 70000.0f);
      if (dt == kv_dtype::f32) {
        EXPECT_EQ(0, std::memcmp(a.kf.data(), b.kf.data(), a.kf.size() * 4));
        EXPECT_EQ(0, std::memcmp(a.vf.data(), b.vf.data(), a.vf.size() * 4));
      } else {
        EXPECT_EQ(a.kh, b.kh) << "hd=" << hd;
        EXPECT_EQ(a.vh, b.vh) << "hd=" << hd;
      }
    }
  }
}

struct attn_case {
  int32_t n_group, head_dim, n_ctx, block_size;
};

std::vector<attn_case> attn_cases() {
  std::vector<attn_case> cs;
  for (int32_t n_ctx = 1; n_ctx <= 67; n_ctx += 3) cs.push_back({3, 64, n_ctx, 16});
  for (int32_t n_ctx : {1, 15, 16, 17, 100, 512, 1000}) {
    cs.push_back({1, 64, n_ctx, 16});
    cs.push_back({3, 64, n_ctx, 16});
    cs.push_back({4, 128, n_ctx, 16});
    cs.push_back({5, 80, n_ctx, 7});    // odd head count, odd block size, 80 = 2*32 + 16
    cs.push_back({8, 12, n_ctx, 32});   // head_dim % 8 != 0
    cs.push_back({2, 3, n_ctx, 1});     // tiny head, one slot per block
  }
  return cs;
}

// Naive dense attention in double on the values actually stored in the cache.
std::vector<double> attention_double(const paged_cache& c, const std::vector<float>& q, int32_t n_group, int32_t kv_head,
                                     int32_t n_ctx, double scale, int32_t first = 0) {
  const int32_t hd = c.view.head_dim;
  std::vector<double> out(static_cast<size_t>(n_group) * hd, 0.0);
  for (int32_t g = 0; g < n_group; ++g) {
    std::vector<double> s(n_ctx, -std::numeric_limits<double>::infinity());
    for (int32_t p = first; p < n_ctx; ++p) {
      double dot = 0.0;
      for (int32_t d = 0; d < hd; ++d) dot += static_cast<double>(q[g * hd + d]) * c.elem(true, p, kv_head, d);
      s[p] = dot * scale;
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0.0;
    for (auto& v : s) sum += (v = std::exp(v - mx));
    for (int32_t p = first; p < n_ctx; ++p)
      for (int32_t d = 0; d < hd; ++d) out[g * hd + d] += s[p] / sum * c.elem(false, p, kv_head, d);
  }
  return out;
}

// out of one attention call of table t (fresh scratch).
std::vector<float> run_attention(const ops_table& t, const paged_cache& c, const std::vector<float>& q,
                                 const attn_case& ac, int32_t kv_head, float scale) {
  std::vector<float> scratch(attention_scratch_floats(ac.n_group, ac.n_ctx));
  std::vector<float> out(static_cast<size_t>(ac.n_group) * ac.head_dim);
  t.attention(q.data(), ac.n_group, c.view, kv_head, c.table.data(), 0, ac.n_ctx, scale, out.data(), scratch.data());
  return out;
}

// Every level against naive double attention; the SIMD levels also against the
// reference, and avx512 also against avx2.
TEST_P(OpsLevel, AttentionMatchesDoubleAndRef) {
  const int32_t n_kv_heads = 3;
  uint32_t seed = 100;
  for (kv_dtype dt : {kv_dtype::f16, kv_dtype::f32}) {
    for (const attn_case& ac : attn_cases()) {
      ++seed;
      paged_cache c(dt, ac.block_size, n_kv_heads, ac.head_dim, ac.n_ctx, seed);
      // Large-ish K so the softmax is peaked for some heads and flat for others.
      c.fill(ref(), ac.n_ctx, seed + 1000, 2.0f);
      std::mt19937 rng(seed);
      const auto q = random_vec(rng, static_cast<int64_t>(ac.n_group) * ac.head_dim, -2.0f, 2.0f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(ac.head_dim));
      const int32_t kv_head = static_cast<int32_t>(seed % n_kv_heads);
      const auto want = attention_double(c, q, ac.n_group, kv_head, ac.n_ctx, scale);
      const std::string what = "dtype=" + std::to_string(int(dt)) + " g=" + std::to_string(ac.n_group) +
                               " hd=" + std::to_string(ac.head_dim) + " n_ctx=" + std::to_string(ac.n_ctx) +
                               " bs=" + std::to_string(ac.block_size);
      const auto out = run_attention(ops_at(), c, q, ac, kv_head, scale);
      EXPECT_LT(norm_err(out, want), 2e-6) << what;
      if (level() == isa_level::scalar) continue;
      EXPECT_LT(norm_err(out, run_attention(ref(), c, q, ac, kv_head, scale)), 3e-6) << what;
      if (level() != isa_level::avx512) continue;
      EXPECT_LT(norm_err(out, run_attention(ops_for(isa_level::avx2), c, q, ac, kv_head, scale)), 3e-6) << what;
    }
  }
}

// A sliding window [first, n_ctx): the blocks wholly before it stay
// NaN-poisoned (never written), so any read of them would show; the window's
// first block is written whole, as the engine's cache is.
TEST_P(OpsLevel, AttentionWindowReadsOnlyItsBlocks) {
  uint32_t seed = 700;
  for (kv_dtype dt : {kv_dtype::f16, kv_dtype::f32}) {
    for (const attn_case& ac : {attn_case{3, 64, 100, 16}, attn_case{1, 80, 530, 16}, attn_case{4, 12, 67, 7},
                                attn_case{2, 3, 40, 1}}) {
      for (int32_t window : {1, 5, 16, 17, 33, 512}) {
        if (window > ac.n_ctx) continue;
        ++seed;
        const int32_t first = ac.n_ctx - window;
        paged_cache c(dt, ac.block_size, 2, ac.head_dim, ac.n_ctx, seed);
        c.fill(ref(), ac.n_ctx, seed + 1, 2.0f, first / ac.block_size * ac.block_size);
        std::mt19937 rng(seed);
        const auto q = random_vec(rng, static_cast<int64_t>(ac.n_group) * ac.head_dim, -2.0f, 2.0f);
        const float scale = 1.0f / std::sqrt(static_cast<float>(ac.head_dim));
        const auto want = attention_double(c, q, ac.n_group, 1, ac.n_ctx, scale, first);
        std::vector<float> scratch(attention_scratch_floats(ac.n_group, ac.n_ctx));
        std::vector<float> out(static_cast<size_t>(ac.n_group) * ac.head_dim);
        // The runner's prefetch of the same window reads only the window's table
        // entries (ASan builds check the table bounds) and changes nothing.
        prefetch_kv(c.view, 1, c.table.data(), first, ac.n_ctx);
        ops_at().attention(q.data(), ac.n_group, c.view, 1, c.table.data(), first, ac.n_ctx, scale, out.data(), scratch.data());
        EXPECT_LT(norm_err(out, want), 2e-6) << "dtype=" << int(dt) << " hd=" << ac.head_dim << " n_ctx=" << ac.n_ctx
                                             << " window=" << window;
      }
    }
  }
}

TEST_P(OpsLevel, AttentionEmptyContextWritesZeros) {
  paged_cache c(kv_dtype::f16, 16, 1, 64, 1, 1);
  std::vector<float> q(2 * 64, 1.0f), out(2 * 64, 5.0f), scratch(attention_scratch_floats(2, 0));
  ops_at().attention(q.data(), 2, c.view, 0, c.table.data(), 0, 0, 0.125f, out.data(), scratch.data());
  for (float v : out) ASSERT_EQ(v, 0.0f);
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

// Attention depends only on the logical K/V contents: a different physical
// block placement, other block sizes (multiples of the 16- and 8-lane score
// chunks, and sizes whose leftover slots go one by one), q at another
// address, and dirty scratch all give identical bits.
TEST_P(OpsLevel, AttentionIndependentOfPhysicalLayout) {
  const ops_table& t = ops_at();
  for (kv_dtype dt : {kv_dtype::f16, kv_dtype::f32}) {
    const int32_t n_group = 3, hd = 64, n_ctx = 77;
    paged_cache a(dt, 16, 2, hd, n_ctx, 1), b(dt, 16, 2, hd, n_ctx, 2), c(dt, 8, 2, hd, n_ctx, 3);
    a.fill(t, n_ctx, 42);
    b.fill(t, n_ctx, 42);
    c.fill(t, n_ctx, 42);
    ASSERT_NE(a.table, b.table);
    std::mt19937 rng(5);
    const auto q = random_vec(rng, n_group * hd);
    std::vector<float> qshift(q.size() + 3);
    std::copy(q.begin(), q.end(), qshift.begin() + 3);
    std::vector<float> s1(attention_scratch_floats(n_group, n_ctx), 0.0f), s2(s1.size(), 1e30f);
    std::vector<float> oa(n_group * hd), ob(oa.size()), oc(oa.size());
    t.attention(q.data(), n_group, a.view, 1, a.table.data(), 0, n_ctx, 0.125f, oa.data(), s1.data());
    t.attention(qshift.data() + 3, n_group, b.view, 1, b.table.data(), 0, n_ctx, 0.125f, ob.data(), s2.data());
    t.attention(q.data(), n_group, c.view, 1, c.table.data(), 0, n_ctx, 0.125f, oc.data(), s2.data());
    EXPECT_TRUE(bits_equal(oa, ob));
    EXPECT_TRUE(bits_equal(oa, oc));
    for (int32_t bs : {1, 7, 13, 24, 33, 40, 64, 100}) {
      paged_cache d(dt, bs, 2, hd, n_ctx, 10 + bs);
      d.fill(t, n_ctx, 42);
      std::vector<float> od(oa.size());
      t.attention(q.data(), n_group, d.view, 1, d.table.data(), 0, n_ctx, 0.125f, od.data(), s2.data());
      EXPECT_TRUE(bits_equal(oa, od)) << "block_size=" << bs;
    }
    // Each head's result does not depend on which other heads share the call
    // (head tiles of 4, 3, 2 and 1 at the different levels).
    std::vector<float> o1(hd);
    t.attention(q.data() + hd, 1, a.view, 1, a.table.data(), 0, n_ctx, 0.125f, o1.data(), s1.data());
    EXPECT_TRUE(bits_equal(o1, std::vector<float>(oa.begin() + hd, oa.begin() + 2 * hd)));
    const int32_t n_wide = 7;  // 4 + 3 heads at the avx512 level, 3 + 3 + 1 at avx2
    const auto q7 = random_vec(rng, n_wide * hd);
    std::vector<float> o7(n_wide * hd), s7(attention_scratch_floats(n_wide, n_ctx));
    t.attention(q7.data(), n_wide, a.view, 1, a.table.data(), 0, n_ctx, 0.125f, o7.data(), s7.data());
    for (int32_t h = 0; h < n_wide; ++h) {
      t.attention(q7.data() + h * hd, 1, a.view, 1, a.table.data(), 0, n_ctx, 0.125f, o1.data(), s1.data());
      EXPECT_TRUE(bits_equal(o1, std::vector<float>(o7.begin() + h * hd, o7.begin() + (h + 1) * hd))) << "head " << h;
    }
  }
}

}  // namespace
}  // namespace spate::kernels
