// The draft-model proposer over fake executors (no weights): it proposes the
// draft's greedy continuation, recomputes only what changed after a rejection
// (the fake reads its KV back, so stale draft KV would change the proposals),
// proposes less when its KV is full, and returns its blocks on release(). In
// the engine, a draft that agrees with the target gets everything accepted,
// one that does not gets some rejected; the output is the target's either way.
#include <gtest/gtest.h>

#include "engine/draft_model_proposer.h"
#include "engine_loop_harness.h"

namespace spate::test_engine {
namespace {

std::vector<int32_t> rollout(std::vector<int32_t> context, int32_t k, int32_t kv_window = 0) {
  return expected_tokens(std::move(context), k, 0, kv_window);
}

TEST(DraftModelProposer, ProposesTheDraftsGreedyContinuationAndFollowsRejections) {
  fake_executor draft(tiny_vocab().tokens.size(), 16, 4);
  draft_model_proposer p(draft);
  std::vector<int32_t> tokens = words("hello");
  std::vector<int32_t> out;
  ASSERT_EQ(p.propose(7, tokens, 3, out), 3);
  EXPECT_EQ(out, rollout(tokens, 3));
  // The target kept the first draft and replaced the second: the draft's KV
  // after the first draft is stale and must be recomputed.
  tokens.push_back(out[0]);
  tokens.push_back(out[1] == word('a') ? word('b') : word('a'));
  out.clear();
  ASSERT_EQ(p.propose(7, tokens, 4, out), 4);
  EXPECT_EQ(out, rollout(tokens, 4));
  EXPECT_EQ(draft.n_invalid_batches(), 0);
  EXPECT_EQ(draft.n_unwritten_reads(), 0);
  // Another request alongside, then both released: every block is back.
  std::vector<int32_t> other;
  ASSERT_EQ(p.propose(8, words("other"), 2, other), 2);
  EXPECT_EQ(other, rollout(words("other"), 2));
  EXPECT_LT(p.n_free_blocks(), p.n_total_blocks());
  p.release(7);
  p.release(8);
  EXPECT_EQ(p.n_free_blocks(), p.n_total_blocks());
}

TEST(DraftModelProposer, ProposesLessWhenItsKvIsFull) {
  fake_executor draft(tiny_vocab().tokens.size(), 3, 4);  // 12 positions
  draft_model_proposer p(draft);
  std::vector<int32_t> out;
  // 9 tokens + k - 1 drafts fed must fit in 12 positions: k <= 4.
  EXPECT_EQ(p.propose(1, words("abcdefghi"), 8, out), 4);
  EXPECT_EQ(out, rollout(words("abcdefghi"), 4));
  out.clear();
  EXPECT_EQ(p.propose(2, words("xyz"), 4, out), 0);  // the first request holds every block
  p.release(1);
  EXPECT_EQ(p.propose(2, words("xyz"), 4, out), 4);
}

TEST(DraftModelProposer, InTheEngineTheOutputIsTheTargetsWhateverTheDraft) {
  for (int32_t draft_window : {0, 3}) {  // 0: the draft agrees with the target; 3: it often does not
    SCOPED_TRACE("draft kv_window " + std::to_string(draft_window));
    fake_executor draft(tiny_vocab().tokens.size(), 64, 4, 0, draft_window);
    auto proposer = std::make_shared<draft_model_proposer>(draft);
    engine_config c = small_config();
    c.speculative.kind = speculative_config::method::draft_model;
    c.speculative.num_speculative_tokens = 3;
    c.speculative.proposer = proposer;
    {
      harness h(c);
      std::vector<int64_t> ids;
      for (const auto& p : {words("draft"), words("model"), words("speculation")}) ids.push_back(h.submit_ok(p, 20));
      h.start();
      h.eng->wait_idle();
      EXPECT_EQ(h.log.get(ids[0]).tokens, expected_tokens(words("draft"), 20));
      EXPECT_EQ(h.log.get(ids[1]).tokens, expected_tokens(words("model"), 20));
      EXPECT_EQ(h.log.get(ids[2]).tokens, expected_tokens(words("speculation"), 20));
      const engine_stats s = h.eng->stats();
      EXPECT_GT(s.spec_num_drafts, 0);
      if (draft_window == 0) {
        EXPECT_EQ(s.spec_num_accepted_tokens, s.spec_num_draft_tokens);
      } else {
        EXPECT_LT(s.spec_num_accepted_tokens, s.spec_num_draft_tokens);
      }
      h.expect_drained();
    }
    EXPECT_EQ(proposer->n_free_blocks(), proposer->n_total_blocks());  // released as requests finished
    EXPECT_EQ(draft.n_invalid_batches(), 0);
  }
}

}  // namespace
}  // namespace spate::test_engine
