// The engine loop without weights: a fake executor (fake_executor.h) whose
// outputs are a known function of the context it reads back from its paged
// KV store, and a tiny real SentencePiece vocabulary. Covers finish reasons,
// cancellation, admission refusals, stop(), forward failures, preemption,
// prefix-cache hits, warmup, the stats counters and the event order. Timing
// is made deterministic with the executor's gate and wait_idle(), never with
// sleeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <limits>
#include <thread>

#include "engine_loop_harness.h"

namespace spate::test_engine {
namespace {

TEST(EngineLoop, RunsToMaxTokensWithFinishLength) {
  harness h;
  h.start();
  const auto prompt = words("hello");
  const int64_t id = h.submit_ok(prompt, 8);
  h.eng->wait_idle();

  const request_log r = h.log.get(id);
  expect_well_formed(r);
  EXPECT_EQ(r.kinds.back(), engine_event::kind::finished);
  EXPECT_EQ(r.reason, finish_reason::length);
  const auto want = expected_tokens(prompt, 8);
  ASSERT_EQ(want.size(), 8u);
  EXPECT_EQ(r.tokens, want);
  EXPECT_EQ(r.text, letters_of(want));
  EXPECT_EQ(r.usage.prompt_tokens, 5);
  EXPECT_EQ(r.metrics.itl_us.size(), 7u);  // gaps between 8 tokens
  EXPECT_EQ(r.metrics.n_preemptions, 0);

  const engine_stats s = h.eng->stats();
  EXPECT_EQ(s.n_finished, 1);
  EXPECT_EQ(s.generated_tokens, 8);
  EXPECT_EQ(s.prompt_tokens, 5);
  EXPECT_EQ(s.n_rejected, 0);
  EXPECT_EQ(s.n_steps, 8);  // one prefill, seven decodes
  EXPECT_EQ(h.exec.n_calls(), 8);
  EXPECT_EQ(s.n_blocks_total, 64);
  h.expect_drained();
}

TEST(EngineLoop, EosFinishesWithStopAndIsNotInTheText) {
  const auto prompt = words("abcd");
  harness h(small_config(), {}, /*eos_at_length=*/7);  // the 4th generated token is EOS
  h.start();
  const int64_t id = h.submit_ok(prompt, 20);
  h.eng->wait_idle();

  const request_log r = h.log.get(id);
  expect_well_formed(r);
  EXPECT_EQ(r.reason, finish_reason::stop);
  const auto want = expected_tokens(prompt, 20, 7);
  ASSERT_EQ(want.size(), 4u);
  ASSERT_EQ(want.back(), k_eos);
  EXPECT_EQ(r.tokens, want);
  EXPECT_EQ(r.text, letters_of(want));
  EXPECT_EQ(r.text.size(), 3u);
  EXPECT_EQ(h.eng->stats().generated_tokens, 4);
  h.expect_drained();
}

TEST(EngineLoop, CancelBeforeTheEngineStarts) {
  harness h;
  const int64_t id = h.submit_ok(words("cancel"), 10);
  h.eng->cancel(id);
  h.eng->cancel(12345);  // unknown ids are ignored
  h.start();
  h.eng->wait_idle();

  const request_log r = h.log.get(id);
  expect_well_formed(r);
  EXPECT_EQ(r.reason, finish_reason::abort);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.usage.prompt_tokens, 6);
  EXPECT_EQ(h.exec.n_calls(), 0);
  const engine_stats s = h.eng->stats();
  EXPECT_EQ(s.n_finished, 1);
  EXPECT_EQ(s.prompt_tokens, 6);
  EXPECT_EQ(s.generated_tokens, 0);
  h.expect_drained();
}

TEST(EngineLoop, CancelWhileWaitingBehindARunningStep) {
  harness h;
  h.start();
  h.exec.gate().close();
  const auto prompt_a = words("first");
  const int64_t a = h.submit_ok(prompt_a, 5);
  h.exec.gate().wait_parked();  // a's prefill is inside forward
  const int64_t b = h.submit_ok(words("second"), 5);
  h.eng->cancel(b);
  h.exec.gate().open();
  h.eng->wait_idle();

  const request_log rb = h.log.get(b);
  expect_well_formed(rb);
  EXPECT_EQ(rb.reason, finish_reason::abort);
  EXPECT_TRUE(rb.tokens.empty());
  const request_log ra = h.log.get(a);
  expect_well_formed(ra);
  EXPECT_EQ(ra.reason, finish_reason::length);
  EXPECT_EQ(ra.tokens, expected_tokens(prompt_a, 5));
  EXPECT_EQ(h.eng->stats().n_finished, 2);
  h.expect_drained();
}

TEST(EngineLoop, CancelMidGenerationStopsByTheNextStep) {
  harness h;
  h.start();
  h.exec.gate().close();
  const auto prompt = words("long");
  const int64_t id = h.submit_ok(prompt, 50);
  // Let three steps (prefill + 2 decodes) through; the fourth parks.
  for (int i = 0; i < 3; ++i) {
    h.exec.gate().wait_parked();
    h.exec.gate().pass_one();
  }
  h.exec.gate().wait_parked();
  h.eng->cancel(id);  // lands while step 4 runs; drained before step 5
  h.exec.gate().open();
  h.eng->wait_idle();

  const request_log r = h.log.get(id);
  expect_well_formed(r);
  EXPECT_EQ(r.reason, finish_reason::abort);
  const auto want = expected_tokens(prompt, 50);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(want.begin(), want.begin() + 4));
  EXPECT_EQ(h.exec.n_calls(), 4);
  EXPECT_EQ(h.eng->stats().generated_tokens, 4);
  h.expect_drained();
}

TEST(EngineLoop, FullQueueIsRefusedBeforeStart) {
  engine_config c = small_config();
  c.max_queued_requests = 2;
  harness h(c);
  const int64_t a = h.submit_ok(words("one"), 3);
  const int64_t b = h.submit_ok(words("two"), 3);
  const submit_result refused = h.submit(words("three"), 3);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.why, submit_result::refusal::queue_full);
  EXPECT_NE(refused.error.find("too many queued requests"), std::string::npos) << refused.error;
  EXPECT_EQ(h.eng->stats().n_rejected, 1);
  EXPECT_EQ(h.eng->stats().n_waiting, 2);

  h.start();
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(a).reason, finish_reason::length);
  EXPECT_EQ(h.log.get(b).reason, finish_reason::length);
  // The queue drained: room again.
  const int64_t c2 = h.submit_ok(words("four"), 3);
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(c2).tokens, expected_tokens(words("four"), 3));
  EXPECT_EQ(h.eng->stats().n_rejected, 1);
  h.expect_drained();
}

TEST(EngineLoop, FullQueueIsRefusedWhileTheEngineIsBusy) {
  engine_config c = small_config();
  c.max_queued_requests = 2;
  harness h(c);
  h.start();
  h.exec.gate().close();
  std::vector<int64_t> accepted{h.submit_ok(words("busy"), 3)};
  h.exec.gate().wait_parked();
  // The engine is held inside a step: nothing leaves the queue, so at most
  // max_queued_requests more are accepted before the refusal.
  submit_result refused;
  for (int i = 0; i <= c.max_queued_requests && refused.why == submit_result::refusal::none; ++i) {
    submit_result res = h.submit(words("queued"), 3);
    if (res.ok()) accepted.push_back(res.id);
    else refused = res;
  }
  EXPECT_EQ(refused.why, submit_result::refusal::queue_full);
  EXPECT_GE(accepted.size(), 2u);
  EXPECT_LE(accepted.size(), 3u);
  h.exec.gate().open();
  h.eng->wait_idle();
  for (int64_t id : accepted) {
    expect_well_formed(h.log.get(id));
    EXPECT_EQ(h.log.get(id).reason, finish_reason::length);
  }
  EXPECT_EQ(h.eng->stats().n_rejected, 1);
  h.expect_drained();
}

TEST(EngineLoop, RefusesWhatCanNeverRunOrIsInvalid) {
  harness h(small_config(), {/*n_blocks=*/4, /*block_size=*/4});  // 16 KV positions
  h.start();
  // Over max_model_len (64).
  submit_result r = h.submit(std::vector<int32_t>(10, word('a')), 60);
  EXPECT_EQ(r.why, submit_result::refusal::context_length);
  EXPECT_NE(r.error.find("exceeds the model length"), std::string::npos) << r.error;
  // Within max_model_len but over the whole KV cache: 10 + 10 tokens need 5 blocks.
  r = h.submit(std::vector<int32_t>(10, word('a')), 10);
  EXPECT_EQ(r.why, submit_result::refusal::context_length);
  EXPECT_NE(r.error.find("KV cache"), std::string::npos) << r.error;
  // Exactly the whole cache fits: 17 tokens, the last never fed back, 16 positions.
  const int64_t fits = h.submit_ok(std::vector<int32_t>(10, word('a')), 7);
  // Invalid requests.
  r = h.submit({word('a'), 999}, 3);
  EXPECT_EQ(r.why, submit_result::refusal::invalid);
  engine_request no_callback;
  no_callback.prompt = words("x");
  no_callback.params.max_tokens = 3;
  EXPECT_EQ(h.eng->submit(std::move(no_callback)).why, submit_result::refusal::invalid);
  engine_request no_max_tokens;
  no_max_tokens.prompt = words("x");
  no_max_tokens.on_event = h.log.callback();
  EXPECT_EQ(h.eng->submit(std::move(no_max_tokens)).why, submit_result::refusal::invalid);
  h.eng->wait_idle();

  EXPECT_EQ(h.log.get(fits).reason, finish_reason::length);
  EXPECT_EQ(h.log.get(fits).tokens, expected_tokens(std::vector<int32_t>(10, word('a')), 7));
  const engine_stats s = h.eng->stats();
  EXPECT_EQ(s.n_rejected, 5);
  EXPECT_EQ(s.n_finished, 1);
  h.expect_drained();
}

TEST(EngineLoop, StopAbortsRequestsInFlightAndRefusesLaterOnes) {
  harness h;
  h.start();
  h.exec.gate().close();
  const auto prompt_a = words("running");
  const int64_t a = h.submit_ok(prompt_a, 30);
  h.exec.gate().wait_parked();  // a's prefill is inside forward
  const int64_t b = h.submit_ok(words("waiting"), 30);
  std::thread stopper([&] { h.eng->stop(); });
  h.eng->wait_idle();  // returns once stop() has been called
  h.exec.gate().open();
  stopper.join();

  // The step that was running completes (a's first token), then everything aborts.
  const request_log ra = h.log.get(a);
  expect_well_formed(ra);
  EXPECT_EQ(ra.reason, finish_reason::abort);
  EXPECT_EQ(ra.tokens, expected_tokens(prompt_a, 1));
  const request_log rb = h.log.get(b);
  expect_well_formed(rb);
  EXPECT_EQ(rb.reason, finish_reason::abort);
  EXPECT_TRUE(rb.tokens.empty());
  EXPECT_EQ(h.log.n_callbacks_alive(), 0);

  const submit_result late = h.submit(words("late"), 3);
  EXPECT_EQ(late.why, submit_result::refusal::stopped);
  EXPECT_EQ(h.log.n_callbacks_alive(), 0);
  h.eng->stop();  // idempotent
  EXPECT_EQ(h.exec.n_calls(), 1);
  // The snapshot after stop() shows the aborts and the returned blocks.
  const engine_stats s = h.eng->stats();
  EXPECT_EQ(s.n_finished, 2);
  EXPECT_EQ(s.n_rejected, 1);
  EXPECT_EQ(s.n_blocks_free, s.n_blocks_total);
  EXPECT_EQ(s.n_running + s.n_waiting, 0);
}

TEST(EngineLoop, StopWithoutStartAbortsWhatWasSubmitted) {
  harness h;
  const int64_t id = h.submit_ok(words("never"), 3);
  h.eng->stop();
  const request_log r = h.log.get(id);
  expect_well_formed(r);
  EXPECT_EQ(r.reason, finish_reason::abort);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(h.log.n_callbacks_alive(), 0);
  EXPECT_EQ(h.submit(words("late"), 3).why, submit_result::refusal::stopped);
  EXPECT_EQ(h.eng->stats().n_finished, 1);
  EXPECT_EQ(h.exec.n_calls(), 0);
  h.expect_drained();
}

TEST(EngineLoop, ForwardFailureFailsThatStepAndTheEngineKeepsServing) {
  harness h;
  const auto prompt_a = words("alpha"), prompt_b = words("beta");
  const int64_t a = h.submit_ok(prompt_a, 4);
  const int64_t b = h.submit_ok(prompt_b, 4);
  h.exec.fail_at_call(1);  // the prefill step of both
  h.start();
  h.eng->wait_idle();
  for (int64_t id : {a, b}) {
    const request_log r = h.log.get(id);
    expect_well_formed(r);
    EXPECT_EQ(r.kinds, std::vector<engine_event::kind>{engine_event::kind::error});
    EXPECT_NE(r.error.find("injected failure"), std::string::npos) << r.error;
    EXPECT_EQ(r.reason, finish_reason::none);
  }
  EXPECT_EQ(h.log.get(a).usage.prompt_tokens, 5);
  EXPECT_EQ(h.log.get(b).usage.prompt_tokens, 4);
  h.expect_drained();

  const auto prompt_c = words("gamma");
  const int64_t c = h.submit_ok(prompt_c, 4);
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(c).reason, finish_reason::length);
  EXPECT_EQ(h.log.get(c).tokens, expected_tokens(prompt_c, 4));
  const engine_stats s = h.eng->stats();
  EXPECT_EQ(s.n_finished, 1);  // errors are not finished requests
  EXPECT_EQ(s.n_steps, h.exec.n_calls() - 1);
  EXPECT_EQ(s.generated_tokens, 4);
  h.expect_drained();
}

TEST(EngineLoop, ForwardFailureSparesRequestsOutsideTheStep) {
  harness h;
  h.start();
  h.exec.gate().close();
  const auto prompt_a = words("decoding"), prompt_b = words("failing");
  const int64_t a = h.submit_ok(prompt_a, 6);
  h.exec.gate().wait_parked();  // a's prefill
  h.exec.fail_prefill_of(prompt_b);
  const int64_t b = h.submit_ok(prompt_b, 6);  // prefilled in a step of its own (no chunked prefill)
  h.exec.gate().open();
  h.eng->wait_idle();

  const request_log rb = h.log.get(b);
  expect_well_formed(rb);
  EXPECT_EQ(rb.kinds.back(), engine_event::kind::error);
  EXPECT_TRUE(rb.tokens.empty());
  const request_log ra = h.log.get(a);
  expect_well_formed(ra);
  EXPECT_EQ(ra.reason, finish_reason::length);
  EXPECT_EQ(ra.tokens, expected_tokens(prompt_a, 6));
  h.expect_drained();
}

// Prompts sharing their first block, so prefix caching is exercised too.
std::vector<std::vector<int32_t>> preemption_prompts() {
  return {words("sharedab"), words("sharedcd"), words("sharedef"), words("xyzuvw"), words("sharedgh")};
}

TEST(EngineLoop, PreemptionKeepsEveryOutputAsAlone) {
  constexpr int32_t max_tokens = 12;
  const auto prompts = preemption_prompts();
  for (bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked prefill" : "prefill steps");
    engine_config c = small_config();
    c.sched.enable_chunked_prefill = chunked;
    c.sched.max_num_batched_tokens = chunked ? 8 : 64;
    // 12 blocks of 4: every request fits alone (20 positions = 5 blocks), all
    // five together need 25.
    harness h(c, {/*n_blocks=*/12, /*block_size=*/4});
    std::vector<int64_t> ids;
    for (const auto& p : prompts) ids.push_back(h.submit_ok(p, max_tokens));
    h.start();
    h.eng->wait_idle();

    int32_t n_preempted = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const request_log r = h.log.get(ids[i]);
      expect_well_formed(r);
      EXPECT_EQ(r.reason, finish_reason::length) << "request " << i;
      EXPECT_EQ(r.tokens, expected_tokens(prompts[i], max_tokens)) << "request " << i;
      n_preempted += r.metrics.n_preemptions;

      // The same request alone on a fresh engine.
      harness alone(c, {12, 4});
      alone.start();
      const int64_t id = alone.submit_ok(prompts[i], max_tokens);
      alone.eng->wait_idle();
      EXPECT_EQ(alone.log.get(id).tokens, r.tokens) << "request " << i;
      EXPECT_EQ(alone.eng->stats().n_preemptions, 0);
    }
    const engine_stats s = h.eng->stats();
    EXPECT_GT(s.n_preemptions, 0);
    EXPECT_EQ(s.n_preemptions, n_preempted);
    EXPECT_EQ(s.n_finished, 5);
    EXPECT_EQ(s.generated_tokens, 5 * max_tokens);
    EXPECT_GT(h.exec.max_batch_seqs(), 1);  // they did run together
    h.expect_drained();
  }
}

TEST(EngineLoop, PrefixCacheHitsReadTheRightKv) {
  harness h;
  h.start();
  const auto first = words("commonprefixone");
  const int64_t a = h.submit_ok(first, 3);
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(a).usage.cached_prompt_tokens, 0);
  // Shares 12 tokens (3 full blocks) with the first prompt.
  const auto second = words("commonprefixtwo");
  const int64_t b = h.submit_ok(second, 3);
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(b).usage.cached_prompt_tokens, 12);
  EXPECT_EQ(h.log.get(b).tokens, expected_tokens(second, 3));
  const engine_stats s = h.eng->stats();
  EXPECT_GE(s.prefix_cache_hits, 12);
  EXPECT_GE(s.prefix_cache_queries, s.prefix_cache_hits);
  h.expect_drained();
}

// A sliding-window model (every layer reads only the last kv_window
// positions): each sequence gives back the blocks before its window after
// every step, so two long requests that would not fit together with every
// block held run side by side without preemption, read only KV they wrote
// (the fake throws on a released block), and match greedy decoding of the
// windowed fake model. The same run without the window preempts.
TEST(EngineLoop, SlidingWindowReleasesBlocksBehindTheWindow) {
  constexpr int32_t max_tokens = 48, window = 8;
  const std::vector<std::vector<int32_t>> prompts = {words("slidingw"), words("windowed")};
  for (bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked prefill" : "prefill steps");
    engine_config c = small_config();
    c.sched.enable_chunked_prefill = chunked;
    c.sched.max_num_batched_tokens = chunked ? 4 : 64;
    // 16 blocks of 4: one request (8 + 48 positions, 14 blocks) fits alone,
    // two fit together only if the blocks behind the window are released.
    for (int32_t kv_window : {window, 0}) {
      SCOPED_TRACE("kv_window " + std::to_string(kv_window));
      harness h(c, {/*n_blocks=*/16, /*block_size=*/4, kv_window});
      std::vector<int64_t> ids;
      for (const auto& p : prompts) ids.push_back(h.submit_ok(p, max_tokens));
      h.start();
      h.eng->wait_idle();
      for (size_t i = 0; i < prompts.size(); ++i) {
        const request_log r = h.log.get(ids[i]);
        expect_well_formed(r);
        EXPECT_EQ(r.tokens, expected_tokens(prompts[i], max_tokens, 0, kv_window)) << "request " << i;
      }
      if (kv_window > 0) {
        EXPECT_EQ(h.eng->stats().n_preemptions, 0);
        EXPECT_EQ(h.exec.max_batch_seqs(), 2);
      } else {
        EXPECT_GT(h.eng->stats().n_preemptions, 0);
      }
      h.expect_drained();
    }
  }
}

// A block released behind the window stays cached: a later prompt with the
// same first block hits it and still reads the right KV.
TEST(EngineLoop, SlidingWindowReleasedBlocksStayCached) {
  constexpr int32_t window = 4;
  harness h(small_config(), {/*n_blocks=*/16, /*block_size=*/4, window});
  h.start();
  const auto first = words("slidingw");
  const int64_t a = h.submit_ok(first, 8);  // 15 positions: blocks 0 and 1 end up behind the window
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(a).tokens, expected_tokens(first, 8, 0, window));
  const auto second = words("slidxyzq");
  const int64_t b = h.submit_ok(second, 8);
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(b).usage.cached_prompt_tokens, 4);
  EXPECT_EQ(h.log.get(b).tokens, expected_tokens(second, 8, 0, window));
  h.expect_drained();
}

TEST(EngineLoop, StatsCountWhatRan) {
  harness h;
  h.start();
  const std::vector<std::pair<std::vector<int32_t>, int32_t>> runs = {
      {words("a"), 1}, {words("bb"), 5}, {words("ccc"), 9}, {words("dddd"), 2}, {words("eeeee"), 7}};
  std::vector<int64_t> ids;
  for (const auto& [p, n] : runs) ids.push_back(h.submit_ok(p, n));
  EXPECT_FALSE(h.submit(words("toolong"), 64).ok());
  h.eng->wait_idle();

  int64_t prompt_tokens = 0, generated = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const request_log r = h.log.get(ids[i]);
    expect_well_formed(r);
    EXPECT_EQ(r.tokens, expected_tokens(runs[i].first, runs[i].second));
    prompt_tokens += static_cast<int64_t>(runs[i].first.size());
    generated += runs[i].second;
  }
  const engine_stats s = h.eng->stats();
  EXPECT_EQ(s.n_finished, 5);
  EXPECT_EQ(s.prompt_tokens, prompt_tokens);
  EXPECT_EQ(s.generated_tokens, generated);
  EXPECT_EQ(s.n_rejected, 1);
  EXPECT_EQ(s.n_steps, h.exec.n_calls());
  EXPECT_GE(s.n_steps, 9);  // the longest request alone needs 9 steps
  EXPECT_GE(s.padding_waste_tokens, 0);
  h.expect_drained();
}

TEST(EngineLoop, WarmupRunsEveryBucketOnTheExecutor) {
  engine_config c = small_config();
  c.skip_warmup = false;
  c.warmup_max_s = 0.0;  // no time limit
  c.buckets.prompt_bs = {1, 2, 2};
  c.buckets.prompt_seq = {4, 8, 16};
  c.buckets.decode_bs = {1, 2, 4};
  c.buckets.decode_block = {2, 4, 8};
  struct report {
    int32_t pct, done, total;
  };
  std::vector<report> progress;
  c.on_warmup_progress = [&](int32_t pct, int32_t done, int32_t total) { progress.push_back({pct, done, total}); };
  harness h(c);
  h.start();

  const auto n_prompt = static_cast<int32_t>(make_buckets(c.buckets.prompt_bs, c.buckets.prompt_seq).size());
  const auto n_decode = static_cast<int32_t>(make_buckets(c.buckets.decode_bs, c.buckets.decode_block).size());
  const int32_t n_total = n_prompt + n_decode;
  ASSERT_EQ(n_prompt, 2 * 3);  // bs {1, 2} x seq {4, 8, 16}
  // Progress at every 10% mark reached (an odd total skips none it crosses).
  ASSERT_FALSE(progress.empty());
  int32_t last_pct = 0;
  for (const report& r : progress) {
    EXPECT_EQ(r.total, n_total);
    EXPECT_EQ(r.pct % 10, 0);
    EXPECT_GT(r.pct, last_pct);
    EXPECT_LE(r.pct, r.done * 100 / n_total);
    EXPECT_LT(r.done * 100 / n_total, r.pct + 10);
    last_pct = r.pct;
  }
  EXPECT_EQ(progress.back().pct, 100);
  EXPECT_EQ(progress.back().done, n_total);
  EXPECT_EQ(static_cast<int32_t>(progress.size()), n_total >= 10 ? 10 : static_cast<int32_t>(progress.size()));
  EXPECT_EQ(h.exec.n_calls(), n_total);  // one dummy step per bucket
  EXPECT_EQ(h.exec.n_invalid_batches(), 0);
  EXPECT_EQ(h.exec.n_reserve_calls(), 1);
  EXPECT_EQ(h.exec.reserved_tokens(), 2 * 16);  // the largest prompt bucket
  EXPECT_EQ(h.exec.reserved_rows(), 4);         // the largest batch size
  EXPECT_EQ(h.exec.reserved_ctx(), c.sched.max_model_len);

  // Warmup's dummy KV does not leak into requests; its blocks are back.
  const auto prompt = words("afterwarmup");
  const int64_t id = h.submit_ok(prompt, 6);
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(id).tokens, expected_tokens(prompt, 6));
  EXPECT_EQ(h.eng->stats().n_steps, h.exec.n_calls() - n_total);
  h.expect_drained();
}

TEST(EngineLoop, WarmupTimeLimitStillRunsTheSmallestBucketOfEachKind) {
  engine_config c = small_config();
  c.skip_warmup = false;
  c.warmup_max_s = 1e-9;  // spent before the first bucket ends
  c.buckets.prompt_bs = {1, 2, 2};
  c.buckets.prompt_seq = {4, 8, 16};
  c.buckets.decode_bs = {1, 2, 4};
  c.buckets.decode_block = {2, 4, 8};
  std::vector<std::array<int32_t, 3>> progress;
  c.on_warmup_progress = [&](int32_t pct, int32_t done, int32_t total) { progress.push_back({pct, done, total}); };
  harness h(c);
  h.start();
  const auto n_total = static_cast<int32_t>(make_buckets(c.buckets.prompt_bs, c.buckets.prompt_seq).size() +
                                            make_buckets(c.buckets.decode_bs, c.buckets.decode_block).size());
  ASSERT_GT(n_total, 4);
  EXPECT_EQ(h.exec.n_calls(), 2);         // the smallest prompt and decode bucket
  EXPECT_EQ(h.exec.max_batch_seqs(), 1);  // nothing larger ran
  EXPECT_EQ(h.exec.reserved_tokens(), 2 * 16);  // workspaces still sized for the largest
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), (std::array<int32_t, 3>{100, 2, n_total}));  // the service status ends at 100%
  const auto prompt = words("afterlimit");
  const int64_t id = h.submit_ok(prompt, 6);
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(id).tokens, expected_tokens(prompt, 6));
  h.expect_drained();
}

// A constraint that spells a fixed word sequence; can_end only after it
// (then finished), or `open`: any word forever and never complete.
class spell_constraint : public token_constraint {
 public:
  spell_constraint(std::vector<int32_t> word, bool open) : word_(std::move(word)), open_(open) {}
  void mask_logits(std::span<float> logits) override {
    for (size_t id = 0; id < logits.size(); ++id) {
      const auto t = static_cast<int32_t>(id);
      const bool word_token = t >= k_first_word && t < k_first_word + k_n_words;
      const bool ok = open_ ? word_token : (at_ < word_.size() && t == word_[at_]);
      if (!ok) logits[id] = -std::numeric_limits<float>::infinity();
    }
  }
  bool can_end() const override { return !open_ && at_ == word_.size(); }
  void accept(int32_t token) override {
    EXPECT_TRUE(open_ || (at_ < word_.size() && token == word_[at_])) << "token " << token << " was masked";
    ++at_;
  }
  bool finished() const override { return can_end(); }

 private:
  std::vector<int32_t> word_;
  bool open_;
  size_t at_ = 0;
};

struct spell_spec : constraint_spec {
  spell_spec(std::vector<int32_t> w, bool o) : word(std::move(w)), open(o) {}
  std::unique_ptr<token_constraint> start() const override { return std::make_unique<spell_constraint>(word, open); }
  std::vector<int32_t> word;
  bool open;
};

int64_t submit_constrained(harness& h, const std::vector<int32_t>& prompt, int32_t max_tokens,
                           std::shared_ptr<const constraint_spec> spec) {
  engine_request r;
  r.prompt = prompt;
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  r.params.constraint = std::move(spec);
  r.on_event = h.log.callback();
  const submit_result res = h.eng->submit(std::move(r));
  EXPECT_TRUE(res.ok()) << res.error;
  return res.id;
}

// The mask decides every token; a complete grammar ends the request with
// "stop"; an unconstrained neighbour in the same steps is unaffected, and the
// constrained output is the same alone and batched.
TEST(EngineLoop, ConstraintMasksEveryStepAndFinishesWithStop) {
  const auto want = words("cab");
  const auto spec = std::make_shared<spell_spec>(want, false);
  std::vector<int32_t> alone;
  {
    harness h;
    h.start();
    const int64_t id = submit_constrained(h, words("hello"), 20, spec);
    h.eng->wait_idle();
    const request_log r = h.log.get(id);
    expect_well_formed(r);
    EXPECT_EQ(r.reason, finish_reason::stop);
    EXPECT_EQ(r.text, "cab");
    alone = r.tokens;
    h.expect_drained();
  }
  harness h;
  h.exec.gate().close();
  h.start();
  const int64_t free_id = h.submit_ok(words("world"), 6);
  const int64_t id = submit_constrained(h, words("hello"), 20, spec);
  h.exec.gate().open();
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(id).tokens, alone);
  EXPECT_EQ(h.log.get(id).reason, finish_reason::stop);
  EXPECT_EQ(h.log.get(free_id).tokens, expected_tokens(words("world"), 6));
  h.expect_drained();
}

// End-of-generation is masked while the constraint cannot end: the fake
// model's EOS never comes out, and max_tokens gives "length".
TEST(EngineLoop, EosOnlyWhereTheConstraintCanEnd) {
  harness h(small_config(), {}, /*eos_at_length=*/7);
  h.start();
  const int64_t id = submit_constrained(h, words("abcd"), 10, std::make_shared<spell_spec>(std::vector<int32_t>{}, true));
  h.eng->wait_idle();
  const request_log r = h.log.get(id);
  EXPECT_EQ(r.reason, finish_reason::length);
  EXPECT_EQ(r.tokens.size(), 10u);
  EXPECT_EQ(std::count(r.tokens.begin(), r.tokens.end(), k_eos), 0);
  h.expect_drained();
}

}  // namespace
}  // namespace spate::test_engine
