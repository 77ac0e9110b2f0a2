// Value-parameterized kernel tests over the ISA levels of kernels/isa.h
// (test_matmul.cpp, test_ops.cpp). A suite derives from isa_test and is
// instantiated over k_all_levels or k_simd_levels; an instance whose level the
// CPU lacks is skipped (GTEST_SKIP in SetUp, with the level's name), so every
// level shows up in the results either as run or as skipped. Test code only.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "kernels/isa.h"

namespace spate::kernels {
// Prints a level by name in GoogleTest messages (found by ADL).
inline void PrintTo(isa_level level, std::ostream* os) { *os << isa_name(level); }
}  // namespace spate::kernels

namespace spate::kernels::test {

inline const isa_level k_all_levels[] = {isa_level::scalar, isa_level::avx2, isa_level::avx512};
// The levels with SIMD kernels (compared against the scalar reference).
inline const isa_level k_simd_levels[] = {isa_level::avx2, isa_level::avx512};

// Test-name suffix of a level: "scalar", "avx2", "avx512".
inline std::string level_label(const ::testing::TestParamInfo<isa_level>& info) { return isa_short_name(info.param); }

// Skips the current test when the CPU lacks `level`.
#define SPATE_SKIP_UNLESS_CPU_SUPPORTS(level) \
  if (!cpu_supports(level)) GTEST_SKIP() << "CPU lacks " << isa_name(level)

// Fixture of a suite parameterized by the ISA level under test (level()).
class isa_test : public ::testing::TestWithParam<isa_level> {
 protected:
  void SetUp() override { SPATE_SKIP_UNLESS_CPU_SUPPORTS(GetParam()); }
  isa_level level() const { return GetParam(); }
};

}  // namespace spate::kernels::test
