// Prompt lookup: which earlier occurrence wins, how much of its continuation
// is proposed, and when nothing is.
#include <gtest/gtest.h>

#include "engine/ngram_proposer.h"

namespace spate {
namespace {

std::vector<int32_t> propose(ngram_proposer& p, const std::vector<int32_t>& tokens, int32_t max_k) {
  std::vector<int32_t> out = {-7};  // proposals are appended after what is there
  const int32_t n = p.propose(0, tokens, max_k, out);
  EXPECT_EQ(out.front(), -7);
  EXPECT_EQ(n, static_cast<int32_t>(out.size()) - 1);
  return {out.begin() + 1, out.end()};
}

TEST(NgramProposer, ProposesWhatFollowedTheMostRecentEarlierOccurrence) {
  ngram_proposer p(1, 3);
  // Suffix {1, 2} occurs at 0 (followed by 3 4) and at 5 (followed by 9 8): the later one wins.
  const std::vector<int32_t> t = {1, 2, 3, 4, 0, 1, 2, 9, 8, 7, 1, 2};
  EXPECT_EQ(propose(p, t, 2), (std::vector<int32_t>{9, 8}));
  EXPECT_EQ(propose(p, t, 4), (std::vector<int32_t>{9, 8, 7, 1}));
}

TEST(NgramProposer, TheLongestRecurringSuffixWins) {
  ngram_proposer p(1, 3);
  // Last 3 tokens {5, 6, 7} occur at 0 (then 1); the last token alone occurs later at 6 (then 2).
  const std::vector<int32_t> t = {5, 6, 7, 1, 0, 0, 7, 2, 0, 5, 6, 7};
  EXPECT_EQ(propose(p, t, 1), (std::vector<int32_t>{1}));
  ngram_proposer shortest(1, 1);
  EXPECT_EQ(propose(shortest, t, 1), (std::vector<int32_t>{2}));
}

TEST(NgramProposer, ContinuationIsClippedAtTheEndAndMayRunIntoTheSuffix) {
  ngram_proposer p(2, 2);
  // A period-3 repetition: the match right before the suffix proposes the suffix itself.
  const std::vector<int32_t> t = {1, 2, 3, 1, 2, 3, 1, 2};
  EXPECT_EQ(propose(p, t, 8), (std::vector<int32_t>{3, 1, 2}));
}

TEST(NgramProposer, NothingWithoutARecurrenceOrBelowTheMinimum) {
  ngram_proposer p(2, 4);
  EXPECT_TRUE(propose(p, {1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(propose(p, {4, 9, 4}, 4).empty());  // only a 1-token suffix recurs, below min 2
  EXPECT_TRUE(propose(p, {4}, 4).empty());
  EXPECT_TRUE(propose(p, {}, 4).empty());
  ngram_proposer one(1, 4);
  EXPECT_EQ(propose(one, {4, 9, 4}, 4), (std::vector<int32_t>{9, 4}));
}

}  // namespace
}  // namespace spate
