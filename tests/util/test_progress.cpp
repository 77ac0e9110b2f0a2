#include <gtest/gtest.h>

#include "util/progress.h"

namespace spate {
namespace {

TEST(PercentSteps, ReportsEachTenPercentOnce) {
  percent_steps p(30);
  std::vector<int> seen;
  for (int64_t done = 0; done <= 30; ++done)
    if (auto pct = p.advance(done)) seen.push_back(*pct);
  EXPECT_EQ(seen, (std::vector<int>{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}));
  EXPECT_FALSE(p.advance(30).has_value());
}

TEST(PercentSteps, JumpsReportTheHighestMarkAndOddTotalsEndAtHundred) {
  percent_steps p(7);
  EXPECT_EQ(p.advance(3), 40);  // 42%
  EXPECT_FALSE(p.advance(3).has_value());
  EXPECT_EQ(p.advance(6), 80);  // 85%
  EXPECT_EQ(p.advance(7), 100);
  percent_steps one(0);  // nothing to do counts as one unit
  EXPECT_FALSE(one.advance(0).has_value());
  EXPECT_EQ(one.advance(5), 100);  // clamped
}

TEST(ProgressBar, DrawsTheShareAndTheRate) {
  EXPECT_EQ(progress_bar(14, 40, "requests", 532.14, "tok/s", 20), "[#######.............] 14/40 requests, 532.1 tok/s");
  EXPECT_EQ(progress_bar(50, 40, "requests", 0, "tok/s", 4), "[####] 40/40 requests, 0.0 tok/s");
  EXPECT_EQ(progress_bar(0, 0, "x", 1, "y", 2), "[..] 0/1 x, 1.0 y");
}

}  // namespace
}  // namespace spate
