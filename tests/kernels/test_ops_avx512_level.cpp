// Tests for the avx512 level's own element-wise ops (kernels/ops_avx512.cpp). This file is
// named *_level.cpp, not *_avx512.cpp, so that it builds at the baseline ISA: a test TU built
// with -mavx512f emits inline gtest/std functions with EVEX code that the linker may pick for
// the whole binary (an illegal instruction on AVX2-only CPUs, seen in the ASan build).
// swiglu, geglu and swiglu_oai run the avx2 sequence on 16 lanes, so their outputs must be
// the avx2 level's bits for every length (16-lane body, avx2 tail) and for
// saturating gates. Skipped on CPUs without AVX-512.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/isa.h"
#include "kernels/ops.h"

namespace spate::kernels {
namespace {

using gated_fn = void (*)(const float*, const float*, float*, int64_t);

void expect_same_bits(gated_fn a, gated_fn b, const std::vector<float>& g, const std::vector<float>& u) {
  const auto n = static_cast<int64_t>(g.size());
  std::vector<float> ya(g.size()), yb(g.size());
  a(g.data(), u.data(), ya.data(), n);
  b(g.data(), u.data(), yb.data(), n);
  EXPECT_EQ(std::memcmp(ya.data(), yb.data(), g.size() * sizeof(float)), 0) << "n=" << n;
}

TEST(OpsAvx512, GatedActivationsAreTheAvx2Bits) {
  if (!cpu_supports(isa_level::avx512)) GTEST_SKIP() << "CPU lacks AVX-512";
  const ops_table& w = ops_for(isa_level::avx512);
  const ops_table& n = ops_for(isa_level::avx2);
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> gate(-14.0f, 14.0f), up(-2.0f, 2.0f);
  for (int64_t len : {1, 7, 15, 16, 17, 31, 33, 576, 1536 + 5}) {
    std::vector<float> g(static_cast<size_t>(len)), u(static_cast<size_t>(len));
    for (auto& v : g) v = gate(rng);
    for (auto& v : u) v = up(rng);
    expect_same_bits(w.swiglu, n.swiglu, g, u);
    expect_same_bits(w.geglu, n.geglu, g, u);
  }
  // Saturating and extreme gates, in the 16-lane body.
  std::vector<float> g{-1e30f, -200.0f, -88.0f, -20.0f, -3.0f, -0.0f, 0.0f, 0.5f, 3.0f, 20.0f, 88.0f, 200.0f, 1e30f,
                       1e-30f, -1e-30f, 7.0f};
  std::vector<float> u(g.size(), 1.5f);
  expect_same_bits(w.swiglu, n.swiglu, g, u);
  expect_same_bits(w.geglu, n.geglu, g, u);
}

// swiglu_oai: the avx2 bits for every length and for gates and ups beyond +-limit, in the 16-lane body.
TEST(OpsAvx512, SwigluOaiIsTheAvx2Bits) {
  if (!cpu_supports(isa_level::avx512)) GTEST_SKIP() << "CPU lacks AVX-512";
  const ops_table& w = ops_for(isa_level::avx512);
  const ops_table& n = ops_for(isa_level::avx2);
  std::mt19937 rng(22);
  std::uniform_real_distribution<float> dist(-60.0f, 12.0f);
  for (int64_t len : {1, 7, 15, 16, 17, 31, 33, 576, 2880 + 5}) {
    std::vector<float> g(static_cast<size_t>(len)), u(g.size()), yw(g.size()), yn(g.size());
    for (auto& v : g) v = dist(rng);
    for (auto& v : u) v = dist(rng) + 24.0f;  // [-36, 36]
    w.swiglu_oai(g.data(), u.data(), yw.data(), len, 1.702f, 7.0f);
    n.swiglu_oai(g.data(), u.data(), yn.data(), len, 1.702f, 7.0f);
    EXPECT_EQ(std::memcmp(yw.data(), yn.data(), g.size() * sizeof(float)), 0) << "n=" << len;
  }
}

}  // namespace
}  // namespace spate::kernels
