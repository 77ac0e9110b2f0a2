// The engine with a recurrent model (kv_block_manager's state slots): the
// fake executor's recurrent mode picks each next token from the sequence's
// own state slot, so a request decodes to expected_tokens only if its state
// was zeroed at admission, carried through every chunk, copied from the right
// checkpoint on a prefix hit, and rebuilt after preemption; the fake counts a
// slot that is not at the sequence's n_past, or that disagrees with its KV.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine_loop_harness.h"

namespace spate::test_engine {
namespace {

std::vector<std::vector<int32_t>> prompts() {
  return {words("sharedab"), words("sharedcdefghijklmnop"), words("sharedef"), words("xyzuvwq"), words("sharedghijk")};
}

TEST(EngineRecurrent, BatchedAndChunkedOutputsEqualGreedyDecodingOfTheStates) {
  constexpr int32_t max_tokens = 10;
  for (bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked prefill" : "prefill steps");
    engine_config c = small_config();
    c.sched.enable_chunked_prefill = chunked;
    c.sched.max_num_batched_tokens = chunked ? 7 : 64;  // chunks end on block boundaries, not at 7
    harness h(c, {/*n_blocks=*/64, /*block_size=*/4, /*kv_window=*/0, /*n_state_slots=*/16});
    std::vector<int64_t> ids;
    for (const auto& p : prompts()) ids.push_back(h.submit_ok(p, max_tokens));
    h.start();
    h.eng->wait_idle();
    for (size_t i = 0; i < ids.size(); ++i) {
      const request_log r = h.log.get(ids[i]);
      expect_well_formed(r);
      EXPECT_EQ(r.tokens, expected_tokens(prompts()[i], max_tokens)) << "request " << i;
    }
    EXPECT_GT(h.exec.max_batch_seqs(), 1);
    EXPECT_GE(h.exec.n_state_zeroes(), 5);  // every admission without a checkpoint starts from zeros
    h.expect_drained();
  }
}

TEST(EngineRecurrent, FewerSlotsThanRequestsMakeThemWaitNotShare) {
  // Two slots, five requests: at most two run at once; the fake refuses a
  // batch in which two sequences share a slot (expect_drained checks none did).
  harness h(small_config(), {64, 4, 0, /*n_state_slots=*/2});
  std::vector<int64_t> ids;
  for (const auto& p : prompts()) ids.push_back(h.submit_ok(p, 6));
  h.start();
  h.eng->wait_idle();
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(h.log.get(ids[i]).tokens, expected_tokens(prompts()[i], 6)) << i;
  EXPECT_LE(h.exec.max_batch_seqs(), 2);
  h.expect_drained();
}

TEST(EngineRecurrent, PreemptionRebuildsTheStateAndKeepsEveryOutput) {
  constexpr int32_t max_tokens = 12;
  for (bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked prefill" : "prefill steps");
    engine_config c = small_config();
    c.sched.enable_chunked_prefill = chunked;
    c.sched.max_num_batched_tokens = chunked ? 8 : 64;
    harness h(c, {/*n_blocks=*/14, /*block_size=*/4, 0, /*n_state_slots=*/8});
    std::vector<int64_t> ids;
    for (const auto& p : prompts()) ids.push_back(h.submit_ok(p, max_tokens));
    h.start();
    h.eng->wait_idle();
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(h.log.get(ids[i]).tokens, expected_tokens(prompts()[i], max_tokens)) << "request " << i;
    }
    EXPECT_GT(h.eng->stats().n_preemptions, 0);
    h.expect_drained();
  }
}

TEST(EngineRecurrent, ASecondTurnRestoresTheCheckpointAtThePromptsLastBlock) {
  // The first turn's prompt is 22 tokens: its prefill is cut at position 20
  // (the last block boundary), where a checkpoint is taken, and the 2-token
  // tail runs next. The second turn extends the first's prompt: it reuses 20
  // positions of KV and copies the checkpoint instead of prefilling them.
  harness h(small_config(), {64, 4, 0, /*n_state_slots=*/8});
  h.start();
  const auto first = words("thefirstturnofthechats");
  const int64_t a = h.submit_ok(first, 3);
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(a).tokens, expected_tokens(first, 3));
  EXPECT_EQ(h.exec.n_state_copies(), 1);  // the checkpoint at 20 (5 blocks: under the interval)

  auto second = first;
  for (char ch : std::string("andanotherquestion")) second.push_back(word(ch));
  const int64_t b = h.submit_ok(second, 3);
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(b).usage.cached_prompt_tokens, 20);
  EXPECT_EQ(h.log.get(b).tokens, expected_tokens(second, 3));
  EXPECT_GE(h.exec.n_state_copies(), 2);  // ... restored into the second turn's slot

  // A prompt sharing KV blocks but no checkpoint reuses nothing: its state must start at 0.
  const auto third = words("thefirstxyz");  // shares 2 blocks ("thef", "irst") with no checkpoint after them
  const int64_t zeroes = h.exec.n_state_zeroes();
  const int64_t t = h.submit_ok(third, 3);
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(t).usage.cached_prompt_tokens, 0);
  EXPECT_EQ(h.log.get(t).tokens, expected_tokens(third, 3));
  EXPECT_EQ(h.exec.n_state_zeroes(), zeroes + 1);
  h.expect_drained();
}

TEST(EngineRecurrent, DecodeTakesCheckpointsEveryIntervalOfBlocks) {
  // 4-token blocks, checkpoints at most every 8 blocks (32 positions) while decoding.
  engine_config c = small_config();
  c.sched.max_model_len = 128;
  harness h(c, {64, 4, 0, /*n_state_slots=*/8});
  h.start();
  const auto prompt = words("abcd");  // a whole block: the prompt's end is a boundary
  const int64_t a = h.submit_ok(prompt, 70);
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(a).tokens, expected_tokens(prompt, 70));
  // At 4 (the prompt's end), then 36 and 68 (every 32 positions after it).
  EXPECT_EQ(h.exec.n_state_copies(), 3);
  h.expect_drained();
}

TEST(EngineRecurrent, SpeculativeDecodingIsRefused) {
  engine_config c = small_config();
  c.speculative.kind = speculative_config::method::ngram;
  c.speculative.num_speculative_tokens = 2;
  tokenizer tok(tiny_vocab());
  fake_executor exec(tok.n_vocab(), 16, 4, 0, 0, /*n_state_slots=*/2);
  try {
    engine e(exec, tok, c);
    FAIL() << "an engine with speculation over a recurrent model";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("recurrent"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace spate::test_engine
