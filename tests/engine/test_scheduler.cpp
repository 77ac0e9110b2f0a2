// Scheduler logic without a model: a simulated engine feeds scheduler outputs
// back (marking KV computed, appending a fake sampled token) and checks the
// budget, caps, chunking, prefill/decode alternation, preemption, admission
// and block accounting.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "engine/scheduler.h"

namespace spate {
namespace {

struct fake_request {
  fake_request(int64_t id, int32_t n_prompt, int32_t max_tokens_, block_pool& pool, int32_t first = 0)
      : tokens(static_cast<size_t>(n_prompt)), max_tokens(max_tokens_), ss(id, &tokens, pool) {
    std::iota(tokens.begin(), tokens.end(), first);
  }
  std::vector<int32_t> tokens;
  int32_t max_tokens;
  int32_t n_generated = 0;
  sched_seq ss;
  std::vector<int32_t> step_sizes;  // n_new per step it ran in
  bool done = false;
};

struct sim {
  sim(const scheduler_config& c, int32_t n_blocks, int32_t block_size, bool prefix = true)
      : kv(n_blocks, block_size, prefix), sched(c, kv) {}
  kv_block_manager kv;
  scheduler sched;
  std::vector<std::unique_ptr<fake_request>> reqs;
  std::vector<scheduler_output> history;

  fake_request& add(int32_t n_prompt, int32_t max_tokens, int32_t first = 0) {
    reqs.push_back(std::make_unique<fake_request>(static_cast<int64_t>(reqs.size()), n_prompt, max_tokens, kv.pool(), first));
    EXPECT_EQ(sched.check_admissible(n_prompt, max_tokens), "");
    sched.add(reqs.back()->ss);
    return *reqs.back();
  }
  fake_request& by_seq(const sched_seq* s) { return *reqs[static_cast<size_t>(s->id)]; }

  // One step: schedule, "compute", sample deterministically, finish.
  scheduler_output step() {
    scheduler_output out = sched.schedule();
    for (const auto& q : out.seqs) {
      // Every scheduled sequence has KV room for what it computes.
      EXPECT_GE(static_cast<int64_t>(q.seq->blocks.n_blocks()) * kv.block_size(), q.n_past + q.n_new);
      by_seq(q.seq).step_sizes.push_back(q.n_new);
    }
    sched.on_step_done(out);
    for (const auto& q : out.seqs) {
      if (!q.samples) continue;
      auto& r = by_seq(q.seq);
      r.tokens.push_back(static_cast<int32_t>(1000 + r.n_generated));
      if (++r.n_generated >= r.max_tokens) {
        r.done = true;
        sched.finish(r.ss);
      }
    }
    history.push_back(out);
    return out;
  }
  int run(int max_steps = 10000) {
    int n = 0;
    while (!sched.idle() && n < max_steps) {
      step();
      ++n;
    }
    return n;
  }
};

// The one default of the budget (engine_config.h): 0 means auto, resolved by
// the scheduler; the engine may later replace it with a measured budget.
TEST(Scheduler, AutoBudgetResolvesToTheConfigDefaults) {
  scheduler_config c;
  ASSERT_EQ(c.max_num_batched_tokens, 0);
  ASSERT_TRUE(c.enable_chunked_prefill);
  c.enable_chunked_prefill = false;
  kv_block_manager kv(64, 4, true);
  {
    scheduler whole(c, kv);
    EXPECT_EQ(whole.config().max_num_batched_tokens, k_default_batched_tokens);
    EXPECT_EQ(whole.config().idle_prefill_budget, 0);
  }
  c.enable_chunked_prefill = true;
  scheduler chunked(c, kv);
  EXPECT_EQ(chunked.config().max_num_batched_tokens, k_default_chunked_batched_tokens);
  EXPECT_EQ(chunked.config().idle_prefill_budget, k_default_batched_tokens);
  c.max_num_batched_tokens = -1;
  EXPECT_THROW(scheduler(c, kv), std::invalid_argument);
}

TEST(Scheduler, RespectsBudgetAndSequenceCap) {
  scheduler_config c;
  c.enable_chunked_prefill = false;
  c.max_num_seqs = 3;
  c.max_num_batched_tokens = 20;
  c.max_model_len = 256;
  sim s(c, 256, 4);
  for (int i = 0; i < 8; ++i) s.add(5 + i, 6);
  s.run();
  for (const auto& out : s.history) {
    EXPECT_LE(out.n_tokens, 20);
    EXPECT_LE(out.seqs.size(), 3u);
  }
  for (const auto& r : s.reqs) EXPECT_TRUE(r->done);
  EXPECT_EQ(s.kv.n_free_blocks(), s.kv.n_total_blocks());
}

TEST(Scheduler, RequestJoinsAtTheNextStep) {
  scheduler_config c;
  c.enable_chunked_prefill = false;
  c.max_model_len = 256;
  sim s(c, 64, 4);
  s.add(6, 5);
  auto first = s.step();
  ASSERT_EQ(first.seqs.size(), 1u);
  s.add(3, 2);
  auto second = s.step();
  bool joined = false;
  for (const auto& q : second.seqs) joined |= q.seq->id == 1;
  EXPECT_TRUE(joined);  // a prefill step (the default allows it while decodes wait)
  s.run();
  EXPECT_EQ(s.kv.n_free_blocks(), 64);
}

TEST(Scheduler, WithoutChunkingStepsArePrefillOrDecodeWithABoundedPrefillRun) {
  scheduler_config c;
  c.enable_chunked_prefill = false;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 4;  // one prompt per prefill step
  c.max_model_len = 256;
  c.max_prefill_steps_in_row = 2;
  sim t(c, 256, 4);
  t.add(4, 20);
  t.step();  // prefill
  for (int i = 0; i < 6; ++i) t.add(4, 20);
  // While requests wait, at most 2 prefill steps may delay the running decodes.
  int prefill_in_row = 0, n_prefill_steps = 0, n_decode_steps = 0;
  for (int i = 0; i < 6; ++i) {
    auto out = t.step();
    (out.prefill_step ? n_prefill_steps : n_decode_steps) += 1;
    for (const auto& q : out.seqs) EXPECT_EQ(out.prefill_step, q.n_new > 1 || q.n_past == 0);
    bool mixed = false;
    for (const auto& q : out.seqs) mixed |= (q.n_new == 1 && q.n_past > 0) == out.prefill_step;
    EXPECT_FALSE(mixed);
    prefill_in_row = out.prefill_step ? prefill_in_row + 1 : 0;
    EXPECT_LE(prefill_in_row, 2);
  }
  EXPECT_EQ(n_prefill_steps, 4);  // P P D P P D
  EXPECT_EQ(n_decode_steps, 2);
  t.run();
  EXPECT_EQ(t.kv.n_free_blocks(), 256);
}

TEST(Scheduler, WithoutChunkingADecodeStepRunsEveryRunningSequence) {
  scheduler_config c;
  c.enable_chunked_prefill = false;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 4;  // one prompt per prefill step
  c.max_model_len = 256;
  sim t(c, 256, 4);
  for (int i = 0; i < 8; ++i) t.add(4, 30, 100 * i);  // distinct prompts: no prefix hits
  // Prefill steps alternate with decode steps; each decode step carries all
  // running sequences although there are more of them than the budget.
  size_t n_running = 0;
  for (int i = 0; i < 16; ++i) {
    auto out = t.step();
    if (out.prefill_step) {
      EXPECT_LE(out.n_tokens, 4);
      ++n_running;
    } else {
      EXPECT_EQ(out.seqs.size(), n_running);
      EXPECT_EQ(out.n_tokens, static_cast<int64_t>(n_running));
    }
  }
  EXPECT_EQ(n_running, 8u);
  t.run();
  for (const auto& r : t.reqs) EXPECT_TRUE(r->done);
  EXPECT_EQ(t.kv.n_free_blocks(), 256);
}

TEST(Scheduler, ChunkedStepsRunEveryDecodeAndAdmitPastTheBudget) {
  scheduler_config c;
  c.enable_chunked_prefill = true;
  c.max_num_batched_tokens = 4;
  c.max_num_seqs = 10;
  c.max_model_len = 256;
  sim t(c, 256, 4);
  for (int i = 0; i < 10; ++i) t.add(3, 40, 100 * i);  // distinct prompts: no prefix hits
  t.run();
  // Once admitted, a request runs in every step until it finishes, and more
  // requests run together than the budget has tokens.
  size_t max_running = 0;
  for (size_t r = 0; r < t.reqs.size(); ++r) {
    std::vector<size_t> steps;
    for (size_t k = 0; k < t.history.size(); ++k)
      for (const auto& q : t.history[k].seqs)
        if (q.seq == &t.reqs[r]->ss) steps.push_back(k);
    ASSERT_FALSE(steps.empty());
    EXPECT_EQ(steps.back() - steps.front() + 1, steps.size()) << "request " << r << " skipped a step";
    EXPECT_TRUE(t.reqs[r]->done);
  }
  for (const auto& out : t.history) {
    int64_t prompt_tokens = 0;
    for (const auto& q : out.seqs)
      if (q.n_new > 1 || !q.samples) prompt_tokens += q.n_new;
    EXPECT_LE(prompt_tokens, 4);
    max_running = std::max(max_running, out.seqs.size());
  }
  EXPECT_EQ(max_running, 10u);
  EXPECT_EQ(t.kv.n_free_blocks(), 256);
}

TEST(Scheduler, ChunkedPrefillSplitsPromptsAndSharesStepsWithDecodes) {
  scheduler_config c;
  c.enable_chunked_prefill = true;
  c.max_num_batched_tokens = 16;
  c.max_model_len = 256;
  sim s(c, 256, 4);
  auto& a = s.add(3, 10);
  s.step();  // a prefills
  auto& b = s.add(40, 2);
  auto out = s.step();
  ASSERT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.seqs[0].seq, &a.ss);  // the decode first
  EXPECT_EQ(out.seqs[0].n_new, 1);
  EXPECT_EQ(out.seqs[1].n_new, 16);   // then a chunk of the budget (decodes do not use it)
  EXPECT_FALSE(out.seqs[1].samples);
  s.run();
  EXPECT_EQ(b.step_sizes, (std::vector<int32_t>{16, 16, 8, 1}));
  EXPECT_EQ(s.kv.n_free_blocks(), 256);
}

TEST(Scheduler, OversizedPromptRunsAloneWithoutChunking) {
  scheduler_config c;
  c.enable_chunked_prefill = false;
  c.max_num_batched_tokens = 8;
  c.max_model_len = 256;
  sim s(c, 256, 4);
  s.add(20, 2);
  s.add(3, 2);
  auto out = s.step();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].n_new, 20);
  s.run();
  for (const auto& r : s.reqs) EXPECT_TRUE(r->done);
}

TEST(Scheduler, RejectsWhatCanNeverFit) {
  scheduler_config c;
  c.enable_chunked_prefill = false;
  c.max_model_len = 64;
  kv_block_manager kv(4, 4, true);
  scheduler sched(c, kv);
  EXPECT_NE(sched.check_admissible(60, 5), "");                       // over max_model_len
  EXPECT_NE(sched.check_admissible(10, 10).find("cannot hold request"), std::string::npos);  // 19 positions > 16
  EXPECT_EQ(sched.check_admissible(10, 7), "");                       // 16 positions fit
  EXPECT_NE(sched.check_admissible(0, 1), "");
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOutAndEverythingFinishes) {
  for (bool chunked : {false, true}) {
    scheduler_config c;
    c.enable_chunked_prefill = chunked;
    c.max_num_batched_tokens = 32;
    c.max_model_len = 128;
    sim s(c, 12, 4);  // 48 positions for 6 requests that want ~26 each
    for (int i = 0; i < 6; ++i) s.add(10 + i, 16, 100 * i);
    s.run();
    for (const auto& r : s.reqs) {
      EXPECT_TRUE(r->done);
      EXPECT_EQ(r->n_generated, 16);
    }
    EXPECT_GT(s.sched.n_preemptions(), 0) << "chunked " << chunked;
    EXPECT_EQ(s.kv.n_free_blocks(), 12);
    // The preempted requests were the newest ones.
    EXPECT_EQ(s.reqs[0]->ss.n_preemptions, 0);
  }
}

TEST(Scheduler, FinishFromWaitingOrRunningFreesBlocks) {
  scheduler_config c;
  c.enable_chunked_prefill = false;
  c.max_num_seqs = 1;
  c.max_model_len = 128;
  sim s(c, 16, 4);
  auto& a = s.add(9, 50);
  auto& b = s.add(9, 50);
  s.step();
  EXPECT_EQ(a.ss.where, sched_seq::state::running);
  EXPECT_EQ(b.ss.where, sched_seq::state::waiting);
  s.sched.finish(b.ss);
  s.sched.finish(a.ss);
  s.sched.finish(a.ss);  // idempotent
  EXPECT_TRUE(s.sched.idle());
  EXPECT_EQ(s.kv.n_free_blocks(), 16);
}

TEST(Scheduler, SecondRequestWithTheSamePromptHitsThePrefixCache) {
  for (bool prefix : {true, false}) {
    scheduler_config c;
  c.enable_chunked_prefill = false;
    c.max_model_len = 128;
    sim s(c, 32, 4, prefix);
    s.add(18, 3);
    s.run();
    s.add(18, 3);
    auto out = s.step();
    ASSERT_EQ(out.seqs.size(), 1u);
    EXPECT_EQ(out.seqs[0].n_past, prefix ? 16 : 0);
    EXPECT_EQ(out.seqs[0].n_new, prefix ? 2 : 18);
    s.run();
    EXPECT_EQ(s.kv.stats().n_hit_tokens, prefix ? 16 : 0);
    EXPECT_EQ(s.kv.n_free_blocks(), 32);
  }
}

}  // namespace
}  // namespace spate
