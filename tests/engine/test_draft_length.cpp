// engine/draft_length.h: the adaptive speculation length of one request.
#include <gtest/gtest.h>

#include "engine/draft_length.h"

namespace spate {
namespace {

TEST(DraftLength, StartsAtKMaxAndStaysThereWhileEveryDraftIsAccepted) {
  draft_length d;
  EXPECT_EQ(d.next(4), 4);
  for (int i = 0; i < 10; ++i) {
    d.on_verified(4, 4, 4);
    EXPECT_EQ(d.next(4), 4);
  }
  EXPECT_EQ(d.next(2), 2);  // never above the k_max in effect
}

TEST(DraftLength, ShrinksToOneMoreThanAcceptedThenGrowsBack) {
  draft_length d;
  d.on_verified(6, 2, 6);
  EXPECT_EQ(d.next(6), 3);
  d.on_verified(3, 3, 6);
  EXPECT_EQ(d.next(6), 4);
  d.on_verified(4, 4, 6);
  d.on_verified(5, 5, 6);
  d.on_verified(6, 6, 6);
  EXPECT_EQ(d.next(6), 6);
}

TEST(DraftLength, BacksOffExponentiallyWhileNothingIsAccepted) {
  draft_length d;
  std::vector<int32_t> skipped;
  for (int round = 0; round < 7; ++round) {
    d.on_verified(1, 0, 4);
    int32_t n = 0;
    while (d.next(4) == 0) ++n;  // the decode after the skips drafts again
    skipped.push_back(n);
  }
  EXPECT_EQ(skipped, (std::vector<int32_t>{1, 3, 7, 15, 31, 31, 31}));
  EXPECT_EQ(d.current(), 1);
  // One accepted draft ends the streak: the next miss skips one decode again.
  d.on_verified(1, 1, 4);
  EXPECT_EQ(d.next(4), 2);
  d.on_verified(2, 0, 4);
  EXPECT_EQ(d.n_skip(), 1);
}

TEST(DraftLength, PartialAcceptanceNeverBacksOff) {
  draft_length d;
  for (int i = 0; i < 20; ++i) {
    d.on_verified(d.next(4), 1, 4);
    EXPECT_EQ(d.n_skip(), 0);
  }
  EXPECT_EQ(d.next(4), 2);
}

TEST(DraftLength, OutOfRangeAcceptedCountsAreClamped) {
  draft_length d;
  d.on_verified(3, 7, 4);  // more than drafted: all of them
  EXPECT_EQ(d.next(4), 4);
  d.on_verified(3, -2, 4);  // negative: none
  EXPECT_EQ(d.n_skip(), 1);
}

}  // namespace
}  // namespace spate
