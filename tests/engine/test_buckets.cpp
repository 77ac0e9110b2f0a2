// Bucket generation and lookup. No model needed.
#include <gtest/gtest.h>

#include "engine/buckets.h"

namespace spate {
namespace {

TEST(Buckets, RampUpInPowersOfTwoBelowStepThenLinear) {
  EXPECT_EQ(bucket_values({1, 32, 64}), (std::vector<int32_t>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(bucket_values({128, 128, 1024}), (std::vector<int32_t>{128, 256, 384, 512, 640, 768, 896, 1024}));
  EXPECT_EQ(bucket_values({3, 8, 20}), (std::vector<int32_t>{3, 6, 8, 16, 20}));
  EXPECT_EQ(bucket_values({4, 4, 4}), (std::vector<int32_t>{4}));
  EXPECT_EQ(bucket_values({1, 2, 2}), (std::vector<int32_t>{1, 2}));
}

TEST(Buckets, CartesianProductInOrder) {
  const auto b = make_buckets({1, 2, 2}, {64, 64, 128});
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0], (bucket{1, 64}));
  EXPECT_EQ(b[1], (bucket{1, 128}));
  EXPECT_EQ(b[2], (bucket{2, 64}));
  EXPECT_EQ(b[3], (bucket{2, 128}));
  EXPECT_EQ(describe(b), "[(1, 64), (1, 128), (2, 64), (2, 128)]");
  EXPECT_EQ(describe({1, 32, 64}, {128, 128, 1024}, "seq"), "bs:[1, 32, 64], seq:[128, 128, 1024]");
}

TEST(Buckets, FindsTheSmallestBucketThatHolds) {
  const auto b = make_buckets({1, 4, 8}, {16, 16, 64});
  EXPECT_EQ(*find_bucket(b, 1, 1), (bucket{1, 16}));
  EXPECT_EQ(*find_bucket(b, 3, 17), (bucket{4, 32}));
  EXPECT_EQ(*find_bucket(b, 8, 64), (bucket{8, 64}));
  EXPECT_FALSE(find_bucket(b, 9, 1));
  EXPECT_FALSE(find_bucket(b, 1, 65));
}

TEST(Buckets, ValidatesRanges) {
  EXPECT_EQ(validate(bucket_range{1, 1, 1}, "x"), "");
  EXPECT_NE(validate(bucket_range{0, 1, 1}, "x"), "");
  EXPECT_NE(validate(bucket_range{4, 1, 2}, "x"), "");
}

TEST(Buckets, WarmupOrderRunsTheSmallestOfEachKindFirst) {
  // 3 prompt buckets (0..2), 4 decode buckets (3..6).
  EXPECT_EQ(warmup_order(3, 4), (std::vector<int32_t>{0, 3, 1, 2, 4, 5, 6}));
  EXPECT_EQ(warmup_order(1, 2), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(warmup_order(0, 2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(warmup_order(2, 0), (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(warmup_order(0, 0).empty());
}

}  // namespace
}  // namespace spate
