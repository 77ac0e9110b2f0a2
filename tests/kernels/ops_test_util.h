// Helpers of the ops tests (test_ops*.cpp, test_rope_yarn.cpp): the suites
// parameterized over the ISA levels (instantiated once, in test_ops.cpp, for
// the tests of every file), random inputs and error measures. Test code only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "isa_test_util.h"
#include "kernels/isa.h"
#include "kernels/ops.h"

namespace spate::kernels::test {

inline const ops_table& ref() { return ops_for(isa_level::scalar); }

// Suites of the SIMD levels (ops of level() against the scalar reference) and of every level.
class OpsSimd : public isa_test {
 protected:
  const ops_table& simd() const { return ops_for(level()); }
};
class OpsLevel : public isa_test {
 protected:
  const ops_table& ops_at() const { return ops_for(level()); }
};

inline std::vector<float> random_vec(std::mt19937& rng, int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// ||a - b|| / ||b||, in double.
inline double norm_err(const float* a, const float* b, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}
inline double norm_err(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  return norm_err(a.data(), b.data(), static_cast<int64_t>(a.size()));
}
inline double norm_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

inline std::vector<int64_t> tail_sizes() {
  std::vector<int64_t> ns;
  for (int64_t n = 1; n <= 67; ++n) ns.push_back(n);
  for (int64_t n : {127, 128, 129, 1000, 2048, 4096, 5003}) ns.push_back(n);
  return ns;
}

inline bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  // empty vectors may hold null data(), which memcmp must not get (UBSan), even for 0 bytes
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace spate::kernels::test
