// kernels/isa.h: the level init_isa() picks from CPUID, SPATE_FORCE_REFERENCE's
// flag and SPATE_MAX_ISA's cap (choose_isa, pure, so every detected level is
// covered whatever this CPU has), and the short names SPATE_MAX_ISA accepts.
#include <gtest/gtest.h>

#include "isa_test_util.h"
#include "kernels/isa.h"
#include "kernels/ops.h"

namespace spate::kernels {
namespace {

using test::k_all_levels;

TEST(Isa, CapLowersTheDetectedLevelAndNeverRaisesIt) {
  for (const isa_level detected : k_all_levels) {
    for (const isa_level cap : k_all_levels) {
      const isa_level want = static_cast<int>(cap) < static_cast<int>(detected) ? cap : detected;
      EXPECT_EQ(choose_isa(detected, false, cap), want) << isa_name(detected) << " capped at " << isa_name(cap);
    }
  }
  // The cases the issue names: avx2 on an AVX-512 CPU runs avx2; avx512 on an AVX2-only CPU runs avx2.
  EXPECT_EQ(choose_isa(isa_level::avx512, false, isa_level::avx2), isa_level::avx2);
  EXPECT_EQ(choose_isa(isa_level::avx2, false, isa_level::avx512), isa_level::avx2);
  EXPECT_EQ(choose_isa(isa_level::avx512, false, isa_level::scalar), isa_level::scalar);
}

TEST(Isa, ForceReferenceWinsOverAnyCap) {
  for (const isa_level detected : k_all_levels) {
    for (const isa_level cap : k_all_levels) EXPECT_EQ(choose_isa(detected, true, cap), isa_level::scalar);
  }
}

TEST(Isa, ShortNamesRoundTripAndNothingElseParses) {
  for (const isa_level l : k_all_levels) {
    isa_level got = l == isa_level::scalar ? isa_level::avx512 : isa_level::scalar;
    ASSERT_TRUE(parse_isa_level(isa_short_name(l), got)) << isa_short_name(l);
    EXPECT_EQ(got, l);
  }
  EXPECT_STREQ(isa_short_name(isa_level::avx2), "avx2");
  for (const char* bad : {"", "AVX2", "avx", "avx2 ", "avx-512", "avx512vnni", "sse4", "reference", "scalar-reference"}) {
    isa_level got = isa_level::avx2;
    EXPECT_FALSE(parse_isa_level(bad, got)) << '"' << bad << '"';
    EXPECT_EQ(got, isa_level::avx2) << "unchanged after '" << bad << "'";
  }
}

// init_isa on this CPU: the active level and the dispatch table follow the cap.
TEST(Isa, InitIsaAppliesTheCapToTheActiveLevelAndTheOpsTable) {
  const isa_level before = active_isa();
  for (const isa_level cap : k_all_levels) {
    const isa_level got = init_isa(false, cap);
    EXPECT_EQ(got, choose_isa(detect_isa(), false, cap));
    EXPECT_EQ(active_isa(), got);
    EXPECT_EQ(&ops(), &ops_for(got));
    EXPECT_TRUE(cpu_supports(got));
  }
  EXPECT_EQ(init_isa(true, isa_level::avx512), isa_level::scalar);
  EXPECT_EQ(active_isa(), isa_level::scalar);
  EXPECT_EQ(init_isa(false, isa_level::avx512), detect_isa());
  init_isa(false, before);
}

}  // namespace
}  // namespace spate::kernels
