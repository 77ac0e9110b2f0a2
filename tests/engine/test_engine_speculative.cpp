// Speculative decoding through the engine loop (fake executor, no weights):
// whatever the drafts, a request's tokens are those of plain decoding, greedy
// or sampled; drafts respect the budget, max_tokens, the free blocks, the
// opt-out and disable_by_batch_size; rejected drafts' KV is rolled back (the
// fake reads its KV back, so a stale draft would change the output) and never
// enters the prefix cache.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <mutex>

#include "engine/draft_proposer.h"
#include "engine_loop_harness.h"

namespace spate::test_engine {
namespace {

// Proposes the fake model's true continuation, except that the draft at
// position `wrong_at` (0-based within a proposal) is replaced by a wrong token
// (never: -1). Records what it was asked. Engine thread; the records are read
// by the test after wait_idle().
class oracle_proposer final : public draft_proposer {
 public:
  explicit oracle_proposer(int32_t wrong_at = -1, int32_t n_propose = 1 << 20) : wrong_at_(wrong_at), n_propose_(n_propose) {}
  int32_t propose(int64_t id, std::span<const int32_t> tokens, int32_t max_k, std::vector<int32_t>& out) override {
    std::lock_guard lk(mu_);
    asked_ids.push_back(id);
    max_k_seen = std::max(max_k_seen, max_k);
    const int32_t n = std::min(max_k, n_propose_);
    std::vector<int32_t> context(tokens.begin(), tokens.end());
    for (int32_t j = 0; j < n; ++j) {
      int32_t t = fake_next_token(context, 0);
      if (j == wrong_at_) t = t == word('a') ? word('b') : word('a');
      out.push_back(t);
      context.push_back(t);
    }
    return n;
  }
  std::mutex mu_;
  std::vector<int64_t> asked_ids;
  int32_t max_k_seen = 0;

 private:
  int32_t wrong_at_, n_propose_;
};

// Always proposes the same token.
class constant_proposer final : public draft_proposer {
 public:
  explicit constant_proposer(int32_t token) : token_(token) {}
  int32_t propose(int64_t, std::span<const int32_t>, int32_t max_k, std::vector<int32_t>& out) override {
    out.insert(out.end(), static_cast<size_t>(max_k), token_);
    return max_k;
  }

 private:
  int32_t token_;
};

engine_config spec_config(std::shared_ptr<draft_proposer> p, int32_t k) {
  engine_config c = small_config();
  c.speculative.kind = speculative_config::method::draft_model;
  c.speculative.num_speculative_tokens = k;
  c.speculative.proposer = std::move(p);
  return c;
}

const std::vector<std::vector<int32_t>> k_prompts = {words("abc"), words("hello"), words("speculative"), words("zz")};

TEST(EngineSpeculative, GreedyOutputEqualsPlainDecodingWhateverTheDrafts) {
  for (int32_t wrong_at : {-1, 0, 1, 3}) {
    for (bool chunked : {false, true}) {
      SCOPED_TRACE("wrong_at " + std::to_string(wrong_at) + (chunked ? " chunked" : ""));
      auto oracle = std::make_shared<oracle_proposer>(wrong_at);
      engine_config c = spec_config(oracle, 4);
      c.sched.enable_chunked_prefill = chunked;
      harness h(c);
      std::vector<int64_t> ids;
      for (const auto& p : k_prompts) ids.push_back(h.submit_ok(p, 21));
      h.start();
      h.eng->wait_idle();
      for (size_t i = 0; i < k_prompts.size(); ++i) {
        const request_log r = h.log.get(ids[i]);
        expect_well_formed(r);
        EXPECT_EQ(r.tokens, expected_tokens(k_prompts[i], 21)) << "request " << i;
        EXPECT_EQ(r.reason, finish_reason::length);
        if (wrong_at == 0) {
          EXPECT_EQ(r.n_token_events, 21);  // every first draft is wrong: one token per step
        } else {
          EXPECT_LT(r.n_token_events, 21);  // some steps brought several tokens
        }
      }
      const engine_stats s = h.eng->stats();
      EXPECT_GT(s.spec_num_drafts, 0);
      EXPECT_EQ(s.spec_num_accepted_tokens > 0, wrong_at != 0);
      if (wrong_at < 0) {
        EXPECT_EQ(s.spec_num_accepted_tokens, s.spec_num_draft_tokens);
      } else {
        EXPECT_LT(s.spec_num_accepted_tokens, s.spec_num_draft_tokens);
      }
      // The first draft is right unless wrong_at is 0.
      EXPECT_EQ(s.spec_accepted_per_pos[0], wrong_at == 0 ? 0 : s.spec_num_drafts);
      EXPECT_EQ(s.generated_tokens, 4 * 21);
      h.expect_drained();
    }
  }
}

TEST(EngineSpeculative, PerfectDraftsCutTheSteps) {
  auto oracle = std::make_shared<oracle_proposer>();
  harness h(spec_config(oracle, 4));
  h.start();
  const int64_t id = h.submit_ok(words("abc"), 20);
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(id).tokens, expected_tokens(words("abc"), 20));
  // 1 prefill step (1 token), then up to 5 tokens per step: 4 decodes.
  EXPECT_EQ(h.eng->stats().n_steps, 5);
  // Drafts never reach past max_tokens: the last decode needs 4 more tokens, so 3 drafts.
  EXPECT_EQ(h.eng->stats().spec_num_draft_tokens, 4 + 4 + 4 + 3);
  h.expect_drained();
}

TEST(EngineSpeculative, DraftsCountAgainstTheBudget) {
  auto oracle = std::make_shared<oracle_proposer>();
  engine_config c = spec_config(oracle, 8);
  c.sched.max_num_batched_tokens = 3;
  c.sched.enable_chunked_prefill = true;
  harness h(c);
  const int64_t a = h.submit_ok(words("abc"), 20);
  const int64_t b = h.submit_ok(words("xyz"), 20);
  h.start();
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(a).tokens, expected_tokens(words("abc"), 20));
  EXPECT_EQ(h.log.get(b).tokens, expected_tokens(words("xyz"), 20));
  EXPECT_LE(oracle->max_k_seen, 3);
  // A step carries at most the budget plus one token per running request.
  const engine_stats s = h.eng->stats();
  EXPECT_EQ(s.step_tokens_buckets[0] + s.step_tokens_buckets[1], s.n_steps);  // every step <= 8 tokens
  h.expect_drained();
}

// Runs the prompts together (max_tokens each) with always-wrong drafts, k 4,
// adaptive k on or off; checks each output is plain decoding's and returns
// the draft tokens proposed.
int64_t wrong_draft_tokens(bool adaptive, const std::vector<const char*>& prompts, int32_t max_tokens) {
  SCOPED_TRACE(adaptive ? "adaptive" : "fixed k");
  engine_config c = spec_config(std::make_shared<constant_proposer>(word('q')), 4);
  c.speculative.adaptive_k = adaptive;
  harness h(c);
  std::vector<int64_t> ids;
  for (const char* p : prompts) ids.push_back(h.submit_ok(words(p), max_tokens));
  h.start();
  h.eng->wait_idle();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(h.log.get(ids[i]).tokens, expected_tokens(words(prompts[i]), max_tokens));
  }
  const int64_t n = h.eng->stats().spec_num_draft_tokens;
  h.expect_drained();
  return n;
}

// Drafts that are always wrong: with adaptive k ("adaptive_k") requests that
// run together back off and draft far fewer tokens than with a fixed k; the
// output is the same.
TEST(EngineSpeculative, AdaptiveKBacksOffFromRejectedDraftsWithoutChangingTheOutput) {
  const int64_t fixed = wrong_draft_tokens(false, {"abc", "hello"}, 40);
  const int64_t adaptive = wrong_draft_tokens(true, {"abc", "hello"}, 40);
  EXPECT_GT(fixed, 0);
  EXPECT_GT(adaptive, 0);
  EXPECT_LT(adaptive * 4, fixed);
}

// Alone, a request's steps are bound by reading the weights: adaptive k then
// drafts k at every decode, exactly as a fixed k does.
TEST(EngineSpeculative, AdaptiveKDraftsFullLengthForALoneRequest) {
  const int64_t fixed = wrong_draft_tokens(false, {"abc"}, 20);
  EXPECT_GT(fixed, 0);
  EXPECT_EQ(wrong_draft_tokens(true, {"abc"}, 20), fixed);
}

TEST(EngineSpeculative, OptedOutRequestsGetNoDrafts) {
  auto oracle = std::make_shared<oracle_proposer>();
  harness h(spec_config(oracle, 4));
  sampling_params plain;
  plain.temperature = 0.0f;
  plain.speculative = false;
  const int64_t opted_out = h.submit(words("abc"), 12, plain).id;
  h.start();
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(opted_out).tokens, expected_tokens(words("abc"), 12));
  EXPECT_TRUE(oracle->asked_ids.empty());
  EXPECT_EQ(h.eng->stats().spec_num_drafts, 0);

  h.expect_drained();
}

TEST(EngineSpeculative, DisableByBatchSizeProposesNothingAboveIt) {
  auto oracle = std::make_shared<oracle_proposer>();
  engine_config c = spec_config(oracle, 4);
  c.speculative.disable_by_batch_size = 2;
  harness h(c);
  // Three running requests (queued before the loop starts, so they run
  // together), above disable_by_batch_size 2: no drafts until one finishes.
  const int64_t a = h.submit_ok(words("abc"), 4);
  const int64_t b = h.submit_ok(words("def"), 12);
  const int64_t d = h.submit_ok(words("ghi"), 12);
  h.start();
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(a).tokens, expected_tokens(words("abc"), 4));
  EXPECT_EQ(h.log.get(b).tokens, expected_tokens(words("def"), 12));
  EXPECT_EQ(h.log.get(d).tokens, expected_tokens(words("ghi"), 12));
  EXPECT_EQ(std::count(oracle->asked_ids.begin(), oracle->asked_ids.end(), a), 0);
  EXPECT_GT(h.eng->stats().spec_num_drafts, 0);  // b and d, after a finished
  h.expect_drained();
}

TEST(EngineSpeculative, StopsAtEosAndDraftsNeverPreemptOrOverfillTheCache) {
  // EOS once the context holds 12 tokens; the oracle proposes past it.
  {
    auto oracle = std::make_shared<oracle_proposer>();
    harness h(spec_config(oracle, 6), {}, /*eos_at_length=*/12);
    h.start();
    const int64_t id = h.submit_ok(words("abcd"), 30);
    h.eng->wait_idle();
    const request_log r = h.log.get(id);
    EXPECT_EQ(r.tokens, expected_tokens(words("abcd"), 30, 12));
    EXPECT_EQ(r.reason, finish_reason::stop);
    h.expect_drained();
  }
  // 10 blocks of 4: two requests of 5 + 14 tokens need 5 blocks each at the
  // end, so plain decoding never preempts; drafts (which would need more)
  // must not force a preemption either.
  for (bool spec : {false, true}) {
    engine_config c = spec ? spec_config(std::make_shared<oracle_proposer>(2), 8) : small_config();
    harness h(c, kv_shape{10, 4});
    const int64_t a = h.submit_ok(words("abcde"), 14);
    const int64_t b = h.submit_ok(words("fghij"), 14);
    h.start();
    h.eng->wait_idle();
    EXPECT_EQ(h.log.get(a).tokens, expected_tokens(words("abcde"), 14));
    EXPECT_EQ(h.log.get(b).tokens, expected_tokens(words("fghij"), 14));
    EXPECT_EQ(h.eng->stats().n_preemptions, 0) << (spec ? "speculative" : "plain");
    h.expect_drained();
  }
}

TEST(EngineSpeculative, RejectedDraftsNeverEnterThePrefixCache) {
  auto oracle = std::make_shared<oracle_proposer>(1);  // every proposal's second draft is wrong
  harness h(spec_config(oracle, 3));
  h.start();
  const auto prompt = words("prefixcache");
  const int64_t first = h.submit_ok(prompt, 24);
  h.eng->wait_idle();
  const request_log r = h.log.get(first);
  ASSERT_EQ(r.tokens, expected_tokens(prompt, 24));
  // A plain request whose prompt is the first one's whole context reuses its
  // full blocks; stale draft KV in them would change its output.
  std::vector<int32_t> context = prompt;
  context.insert(context.end(), r.tokens.begin(), r.tokens.end());
  sampling_params plain;
  plain.temperature = 0.0f;
  plain.speculative = false;
  const int64_t hits_before = h.eng->stats().prefix_cache_hits;
  const int64_t second = h.submit(context, 6, plain).id;
  h.eng->wait_idle();
  EXPECT_GE(h.eng->stats().prefix_cache_hits - hits_before, 28);  // 7 of the 8 full blocks
  EXPECT_EQ(h.log.get(second).tokens, expected_tokens(context, 6));
  h.expect_drained();
}

// Sampled decoding: same seeds, speculation on or off, same tokens; and the
// emitted first token follows the model's distribution whatever the draft.
TEST(EngineSpeculative, SampledOutputEqualsPlainAndKeepsTheDistribution) {
  constexpr int n_requests = 3000;
  const auto prompt = words("dist");
  std::map<bool, std::vector<std::vector<int32_t>>> outputs;
  int64_t accepted_first = 0, drafts = 0;
  for (bool spec : {false, true}) {
    engine_config c = spec ? spec_config(std::make_shared<constant_proposer>(word('q')), 3) : small_config();
    c.max_queued_requests = n_requests;
    harness h(c);
    h.exec.set_soft_logits(true);
    std::vector<int64_t> ids;
    for (int i = 0; i < n_requests; ++i) {
      sampling_params p;
      p.temperature = 1.0f;
      p.seed = static_cast<uint64_t>(i);
      ids.push_back(h.submit(prompt, 4, p).id);
    }
    h.start();
    h.eng->wait_idle();
    for (int64_t id : ids) outputs[spec].push_back(h.log.get(id).tokens);
    if (spec) {
      accepted_first = h.eng->stats().spec_accepted_per_pos[0];
      drafts = h.eng->stats().spec_num_drafts;
    }
    h.expect_drained();
  }
  EXPECT_EQ(outputs[true], outputs[false]);
  // The model's distribution of the first token (after the prompt), and the
  // share of second tokens that are the draft 'q' where the first decode
  // proposed it: each first decode's first draft is accepted with p(q | its context).
  std::vector<float> row(static_cast<size_t>(tiny_vocab().tokens.size()));
  fake_soft_logits(prompt, row);
  double z = 0;
  for (float l : row) z += std::exp(static_cast<double>(l));
  std::vector<int> count(row.size(), 0);
  for (const auto& t : outputs[true]) ++count[static_cast<size_t>(t[0])];
  for (size_t t = 0; t < row.size(); ++t) {
    const double p = std::exp(static_cast<double>(row[t])) / z;
    const double sigma = std::sqrt(n_requests * p * (1 - p));
    EXPECT_NEAR(count[t], n_requests * p, 5 * sigma + 1) << "token " << t;
  }
  EXPECT_GT(drafts, 0);
  EXPECT_GT(accepted_first, 0);
  EXPECT_LT(accepted_first, drafts);
}

TEST(EngineSpeculative, InvalidSettingsAreRefusedNamingTheKey) {
  auto make = [](speculative_config s) {
    engine_config c = small_config();
    c.speculative = std::move(s);
    harness h(c);
  };
  speculative_config s;
  s.kind = speculative_config::method::ngram;
  s.num_speculative_tokens = 0;
  EXPECT_THROW(make(s), std::invalid_argument);
  s.num_speculative_tokens = k_max_speculative_tokens + 1;
  EXPECT_THROW(make(s), std::invalid_argument);
  s.num_speculative_tokens = 4;
  s.prompt_lookup_min = 3;
  s.prompt_lookup_max = 2;
  try {
    make(s);
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("prompt_lookup_max"), std::string::npos) << e.what();
  }
  s.prompt_lookup_min = 0;
  EXPECT_THROW(make(s), std::invalid_argument);
  s.prompt_lookup_min = 1;
  s.disable_by_batch_size = -1;
  EXPECT_THROW(make(s), std::invalid_argument);
  s.disable_by_batch_size = 0;
  s.kind = speculative_config::method::draft_model;  // no proposer given
  EXPECT_THROW(make(s), std::invalid_argument);
  s.kind = speculative_config::method::ngram;
  EXPECT_NO_THROW(make(s));
}

}  // namespace
}  // namespace spate::test_engine
