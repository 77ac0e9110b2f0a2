// The serving engine on the real model: greedy outputs are token-for-token
// the same alone, batched, padded, chunked, with and without prefix-cache
// hits and under preemption; admission rejects what can never fit; cancel
// and completion return every block. No timing assertions.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "engine/engine_api.h"
#include "engine/engine_config.h"
#include "model/model_executor.h"
#include "model_fixture.h"

namespace spate::testing {
namespace {

struct outcome {
  std::vector<int32_t> tokens;
  std::string text;
  finish_reason reason = finish_reason::none;
  std::string error;
  request_usage usage;
  bool done = false;
};

// Collects events per request; waits for completion.
class collector {
 public:
  event_callback callback(size_t index) {
    return [this, index](const engine_event& ev) {
      std::lock_guard lk(mu_);
      outcome& o = out_[index];
      switch (ev.type) {
        case engine_event::kind::tokens:
          o.tokens.insert(o.tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
          o.text += ev.text;
          ++n_token_events_;
          break;
        case engine_event::kind::finished:
          o.reason = ev.reason;
          o.usage = ev.usage;
          o.done = true;
          break;
        case engine_event::kind::error:
          o.error = ev.error;
          o.done = true;
          break;
      }
      cv_.notify_all();
    };
  }
  void wait_done(size_t n) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] {
      size_t k = 0;
      for (auto& [i, o] : out_) k += o.done;
      return k == n;
    });
  }
  void wait_tokens(size_t index, size_t n) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return out_[index].tokens.size() >= n || out_[index].done; });
  }
  outcome get(size_t index) {
    std::lock_guard lk(mu_);
    return out_[index];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<size_t, outcome> out_;
  int64_t n_token_events_ = 0;
};

struct test_request {
  test_request(std::vector<int32_t> prompt_, int32_t max_tokens_, float temperature_ = 0.0f,
               std::optional<uint64_t> seed_ = std::nullopt)
      : prompt(std::move(prompt_)), max_tokens(max_tokens_), temperature(temperature_), seed(seed_) {}
  std::vector<int32_t> prompt;
  int32_t max_tokens = 16;
  float temperature = 0.0f;
  std::optional<uint64_t> seed;
};

const std::vector<test_request>& requests() {
  static const std::vector<test_request> r = [] {
    const tokenizer& tok = *shared_model().tok;
    const std::string sys = "<|im_start|>system\nYou are a helpful assistant who answers briefly and precisely.<|im_end|>\n";
    std::vector<test_request> v;
    v.push_back({tok.encode("The capital of France is", true), 20});
    v.push_back({tok.encode(sys + "<|im_start|>user\nWrite a short poem about rain.<|im_end|>\n<|im_start|>assistant\n", true), 24});
    v.push_back({tok.encode("def quicksort(xs):\n    if len(xs) <= 1:\n        return xs\n", true), 18});
    v.push_back({tok.encode(sys + "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n", true), 16});
    v.push_back({tok.encode("1, 1, 2, 3, 5, 8, 13,", true), 12});
    v.push_back({tok.encode(sys + "<|im_start|>user\nName three colors.<|im_end|>\n<|im_start|>assistant\n", true), 20});
    v.push_back({tok.encode("Hello", true), 10, 0.8f, 7});  // seeded sampling
    return v;
  }();
  return r;
}

// An engine configuration plus the executor's, for the real model.
struct test_config : engine_config {
  executor_config exec;
};

// The real model's executor and an engine over it (base-from-member: the
// executor is built first and outlives the engine).
struct executor_holder {
  explicit executor_holder(const executor_config& c) : exec(shared_model(), c) {}
  model_executor exec;
};
class model_engine : private executor_holder, public engine {
 public:
  explicit model_engine(const test_config& c) : executor_holder(c.exec), engine(exec, *shared_model().tok, c) {}
};

test_config base_config(int32_t n_blocks, int32_t block_size = 16) {
  test_config c;
  c.exec.n_threads = 2;
  c.exec.block_size = block_size;
  c.exec.kv_cache_bytes =
      static_cast<uint64_t>(n_blocks) * kv_cache::bytes_per_block(shared_model().config, block_size, kernels::kv_dtype::f16);
  c.sched.max_model_len = 512;
  c.skip_warmup = true;
  return c;
}

engine_request make(const test_request& t, event_callback cb) {
  engine_request r;
  r.prompt = t.prompt;
  r.params.temperature = t.temperature;
  r.params.seed = t.seed;
  r.params.max_tokens = t.max_tokens;
  r.on_event = std::move(cb);
  return r;
}

void expect_all_blocks_free(engine& e) {
  e.wait_idle();
  const engine_stats s = e.stats();
  EXPECT_EQ(s.n_blocks_free, s.n_blocks_total);
  EXPECT_EQ(s.n_running, 0);
  EXPECT_EQ(s.n_waiting, 0);
}

// Runs the given requests submitted together; returns outcomes in order.
std::vector<outcome> run_together(const test_config& cfg, const std::vector<test_request>& reqs, engine_stats* stats = nullptr) {
  collector col;  // outlives the engine, whose destructor may still deliver events
  model_engine e(cfg);
  e.start();
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto sr = e.submit(make(reqs[i], col.callback(i)));
    EXPECT_TRUE(sr.ok()) << sr.error;
  }
  col.wait_done(reqs.size());
  expect_all_blocks_free(e);
  if (stats) *stats = e.stats();
  std::vector<outcome> out;
  for (size_t i = 0; i < reqs.size(); ++i) out.push_back(col.get(i));
  return out;
}

// Each request alone (reference), computed once.
const std::vector<outcome>& alone() {
  static const std::vector<outcome> a = [] {
    std::vector<outcome> v;
    for (const auto& r : requests()) {
      auto cfg = base_config(256);
      cfg.enable_prefix_caching = false;
      v.push_back(run_together(cfg, {r})[0]);
    }
    return v;
  }();
  return a;
}

void expect_same_as_alone(const std::vector<outcome>& got, const char* what) {
  const auto& ref = alone();
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(got[i].error.empty()) << what << " #" << i << ": " << got[i].error;
    EXPECT_EQ(got[i].tokens, ref[i].tokens) << what << " #" << i;
    EXPECT_EQ(got[i].text, ref[i].text) << what << " #" << i;
    EXPECT_EQ(got[i].reason, ref[i].reason) << what << " #" << i;
  }
}

TEST(Engine, AloneRequestsProduceTokens) {
  for (const auto& o : alone()) {
    EXPECT_TRUE(o.error.empty());
    EXPECT_FALSE(o.tokens.empty());
    EXPECT_NE(o.reason, finish_reason::none);
    EXPECT_EQ(o.usage.completion_tokens, static_cast<int32_t>(o.tokens.size()));
  }
}

TEST(Engine, BatchedMatchesAlone) {
  auto cfg = base_config(256);
  cfg.enable_prefix_caching = false;
  expect_same_as_alone(run_together(cfg, requests()), "batched");
}

// The quantized KV caches (and f32): each request's outcome alone equals its outcome batched with the
// others, with chunked prefill, and with prefix caching (blocks reused across requests), per dtype.
TEST(Engine, KvDtypesBatchedChunkedAndPrefixCachedMatchAlone) {
  for (kernels::kv_dtype dt : {kernels::kv_dtype::f32, kernels::kv_dtype::q8_0, kernels::kv_dtype::fp8_e5m2}) {
    SCOPED_TRACE(kernels::kv_dtype_name(dt));
    auto cfg = base_config(256);
    cfg.exec.kv_dtype = dt;
    cfg.exec.kv_cache_bytes = 256ull * kv_cache::bytes_per_block(shared_model().config, 16, dt);
    cfg.enable_prefix_caching = false;
    std::vector<outcome> alone_dt;
    for (const auto& r : requests()) alone_dt.push_back(run_together(cfg, {r})[0]);
    auto check = [&](const std::vector<outcome>& got, const char* what) {
      ASSERT_EQ(got.size(), alone_dt.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(got[i].error.empty()) << what << " #" << i << ": " << got[i].error;
        EXPECT_FALSE(got[i].tokens.empty()) << what << " #" << i;
        EXPECT_EQ(got[i].tokens, alone_dt[i].tokens) << what << " #" << i;
      }
    };
    check(run_together(cfg, requests()), "batched");
    auto chunked = cfg;
    chunked.sched.enable_chunked_prefill = true;
    chunked.sched.max_num_batched_tokens = 13;
    check(run_together(chunked, requests()), "chunked");
    auto cached = cfg;
    cached.enable_prefix_caching = true;
    auto twice = requests();
    twice.insert(twice.end(), requests().begin(), requests().end());
    const std::vector<outcome> got = run_together(cached, twice);
    const auto half = got.begin() + static_cast<std::ptrdiff_t>(requests().size());
    check(std::vector<outcome>(got.begin(), half), "prefix caching, first");
    check(std::vector<outcome>(half, got.end()), "prefix caching, again");
  }
}

TEST(Engine, PaddedToBucketsWithWarmupMatchesAlone) {
  auto cfg = base_config(256);
  cfg.skip_warmup = false;
  cfg.buckets.prompt_bs = {1, 2, 4};
  cfg.buckets.prompt_seq = {16, 32, 64};
  cfg.buckets.decode_bs = {1, 4, 8};
  cfg.buckets.decode_block = {2, 8, 16};
  engine_stats st;
  expect_same_as_alone(run_together(cfg, requests(), &st), "padded");
  EXPECT_GT(st.padding_waste_tokens, 0);
}

TEST(Engine, ChunkedPrefillMatchesAlone) {
  auto cfg = base_config(256);
  cfg.sched.enable_chunked_prefill = true;
  cfg.sched.max_num_batched_tokens = 13;
  expect_same_as_alone(run_together(cfg, requests()), "chunked");
}

TEST(Engine, PrefixCacheHitsMatchAloneAndCachingOff) {
  for (bool caching : {true, false}) {
    auto cfg = base_config(256);
    cfg.enable_prefix_caching = caching;
    collector col;  // outlives the engine, whose destructor may still deliver events
    model_engine e(cfg);
    e.start();
    // One at a time, so later requests find the shared system prompt cached.
    const auto& reqs = requests();
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(e.submit(make(reqs[i], col.callback(i))).ok());
      col.wait_done(i + 1);
    }
    // And the whole set again: every prompt is now cached.
    for (size_t i = 0; i < reqs.size(); ++i) ASSERT_TRUE(e.submit(make(reqs[i], col.callback(100 + i))).ok());
    col.wait_done(2 * reqs.size());
    expect_all_blocks_free(e);
    std::vector<outcome> first, second;
    for (size_t i = 0; i < reqs.size(); ++i) {
      first.push_back(col.get(i));
      second.push_back(col.get(100 + i));
    }
    expect_same_as_alone(first, caching ? "prefix cache, sequential" : "no cache, sequential");
    expect_same_as_alone(second, caching ? "prefix cache, repeated" : "no cache, repeated");
    const engine_stats st = e.stats();
    if (caching) {
      EXPECT_GT(st.prefix_cache_hits, 0);
      EXPECT_GT(col.get(100 + 1).usage.cached_prompt_tokens, 0);
    } else {
      EXPECT_EQ(st.prefix_cache_hits, 0);
    }
  }
}

TEST(Engine, PreemptionUnderATinyKvBudgetMatchesAlone) {
  for (bool chunked : {false, true}) {
    auto cfg = base_config(12);  // 192 positions for ~7 x 40
    cfg.sched.enable_chunked_prefill = chunked;
    cfg.sched.max_num_batched_tokens = chunked ? 32 : 8192;
    engine_stats st;
    expect_same_as_alone(run_together(cfg, requests(), &st), chunked ? "preempted, chunked" : "preempted");
    EXPECT_GT(st.n_preemptions, 0);
  }
}

// Speculative decoding (prompt lookup) on the real model: every request's
// tokens are the alone ones, greedy and seeded-sampled, batched, chunked and
// preempted; an input-grounded prompt gets drafts accepted and the same
// tokens as with speculation off.
test_config with_ngram(test_config c) {
  c.speculative.kind = speculative_config::method::ngram;
  c.speculative.num_speculative_tokens = 4;
  c.speculative.prompt_lookup_min = 1;
  c.speculative.prompt_lookup_max = 3;
  return c;
}

TEST(Engine, SpeculativeNgramMatchesAlone) {
  engine_stats st;
  expect_same_as_alone(run_together(with_ngram(base_config(256)), requests(), &st), "speculative");
  EXPECT_GT(st.spec_num_drafts, 0);
  auto chunked = with_ngram(base_config(256));
  chunked.sched.enable_chunked_prefill = true;
  chunked.sched.max_num_batched_tokens = 13;
  expect_same_as_alone(run_together(chunked, requests()), "speculative, chunked");
  auto tiny = with_ngram(base_config(12));
  expect_same_as_alone(run_together(tiny, requests(), &st), "speculative, preempted");
  EXPECT_GT(st.n_preemptions, 0);

  const tokenizer& tok = *shared_model().tok;
  const test_request grounded(
      tok.encode("<|im_start|>user\nRepeat this text exactly: The quick brown fox jumps over the lazy dog while the "
                 "cat sleeps on the warm mat by the door.<|im_end|>\n<|im_start|>assistant\n", true), 40);
  const auto plain = run_together(base_config(256), {grounded})[0];
  for (const auto& cfg : {with_ngram(base_config(256)), tiny}) {
    const auto got = run_together(cfg, {grounded, requests()[0], requests()[6]}, &st);
    EXPECT_EQ(got[0].tokens, plain.tokens);
    EXPECT_EQ(got[0].text, plain.text);
    EXPECT_GT(st.spec_num_accepted_tokens, 0);
  }
}

TEST(Engine, ManyRequestsWithATinyKvBudgetAllFinish) {
  auto cfg = base_config(8, 8);  // 64 positions
  std::vector<test_request> many;
  const tokenizer& tok = *shared_model().tok;
  for (int i = 0; i < 16; ++i) many.push_back({tok.encode("Count: " + std::to_string(i) + ",", true), 8 + i % 5});
  engine_stats st;
  const auto out = run_together(cfg, many, &st);
  for (const auto& o : out) {
    EXPECT_TRUE(o.error.empty()) << o.error;
    EXPECT_TRUE(o.done);
    EXPECT_FALSE(o.tokens.empty());
  }
  EXPECT_EQ(st.n_finished, 16);
}

TEST(Engine, AdmissionRejectsWhatCanNeverFit) {
  auto cfg = base_config(2);
  cfg.sched.max_model_len = 64;
  cfg.max_queued_requests = 2;
  collector col;  // outlives the engine, whose destructor may still deliver events
  model_engine e(cfg);
  e.start();
  test_request too_long{std::vector<int32_t>(60, 42), 10};
  auto r1 = e.submit(make(too_long, col.callback(0)));
  EXPECT_FALSE(r1.ok());
  EXPECT_NE(r1.error.find("exceeds the model length"), std::string::npos) << r1.error;
  test_request too_big{std::vector<int32_t>(30, 42), 10};  // 39 positions > 2 blocks of 16
  auto r2 = e.submit(make(too_big, col.callback(1)));
  EXPECT_FALSE(r2.ok());
  EXPECT_NE(r2.error.find("cannot hold request"), std::string::npos) << r2.error;
  test_request bad_token{{-1, 5}, 4};
  EXPECT_FALSE(e.submit(make(bad_token, col.callback(2))).ok());
  // What fits still runs.
  test_request fits{std::vector<int32_t>(10, 42), 4};
  ASSERT_TRUE(e.submit(make(fits, col.callback(3))).ok());
  col.wait_done(1);
  expect_all_blocks_free(e);
  EXPECT_EQ(e.stats().n_rejected, 3);
}

TEST(Engine, CancelFreesBlocks) {
  auto cfg = base_config(64);
  cfg.sched.max_num_seqs = 1;
  collector col;  // outlives the engine, whose destructor may still deliver events
  model_engine e(cfg);
  e.start();
  test_request long_one{requests()[1].prompt, 400};
  long_one.prompt.resize(40);
  test_request waiting_one{requests()[0].prompt, 400};
  auto a = e.submit(make(long_one, col.callback(0)));
  auto b = e.submit(make(waiting_one, col.callback(1)));
  ASSERT_TRUE(a.ok() && b.ok());
  col.wait_tokens(0, 2);
  e.cancel(b.id);  // still waiting behind a (max_num_seqs 1)
  e.cancel(a.id);  // running
  e.cancel(12345); // unknown: ignored
  col.wait_done(2);
  EXPECT_EQ(col.get(0).reason, finish_reason::abort);
  EXPECT_EQ(col.get(1).reason, finish_reason::abort);
  EXPECT_LT(col.get(0).tokens.size(), 400u);
  expect_all_blocks_free(e);
  // The engine keeps serving.
  ASSERT_TRUE(e.submit(make(requests()[4], col.callback(2))).ok());
  col.wait_done(3);
  EXPECT_EQ(col.get(2).tokens, alone()[4].tokens);
  expect_all_blocks_free(e);
}

TEST(Engine, SubmitAndCancelFromManyThreads) {
  auto cfg = base_config(24);
  cfg.sched.enable_chunked_prefill = true;
  cfg.sched.max_num_batched_tokens = 24;
  collector col;  // outlives the engine, whose destructor may still deliver events
  model_engine e(cfg);
  e.start();
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        const size_t index = static_cast<size_t>(t * 10 + i);
        test_request r{requests()[static_cast<size_t>(i)].prompt, 6};
        auto sr = e.submit(make(r, col.callback(index)));
        ASSERT_TRUE(sr.ok()) << sr.error;
        if (i % 2 == 1) e.cancel(sr.id);
      }
    });
  }
  for (auto& th : threads) th.join();
  col.wait_done(15);
  expect_all_blocks_free(e);
  for (int t = 0; t < 3; ++t) {
    for (int i = 0; i < 5; ++i) {
      const outcome o = col.get(static_cast<size_t>(t * 10 + i));
      EXPECT_TRUE(o.error.empty()) << o.error;
      // Not cancelled: the same tokens as alone (a prefix of them, at max_tokens 6).
      if (i % 2 == 0) {
        const auto& ref = alone()[static_cast<size_t>(i)].tokens;
        ASSERT_LE(o.tokens.size(), ref.size());
        EXPECT_TRUE(std::equal(o.tokens.begin(), o.tokens.end(), ref.begin()));
      }
    }
  }
}

TEST(Engine, FullInboxRejects) {
  auto cfg = base_config(64);
  cfg.max_queued_requests = 2;
  collector col;  // outlives the engine, whose destructor may still deliver events
  model_engine e(cfg);  // not started: nothing leaves the inbox
  EXPECT_TRUE(e.submit(make(requests()[4], col.callback(0))).ok());
  EXPECT_TRUE(e.submit(make(requests()[4], col.callback(1))).ok());
  auto r = e.submit(make(requests()[4], col.callback(2)));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("too many queued requests"), std::string::npos) << r.error;
}

TEST(Engine, StopAbortsRequestsInFlight) {
  auto cfg = base_config(64);
  collector col;  // outlives the engine, whose destructor may still deliver events
  model_engine e(cfg);
  e.start();
  test_request long_one{requests()[0].prompt, 400};
  ASSERT_TRUE(e.submit(make(long_one, col.callback(0))).ok());
  col.wait_tokens(0, 1);
  e.stop();
  col.wait_done(1);
  EXPECT_EQ(col.get(0).reason, finish_reason::abort);
  EXPECT_FALSE(e.submit(make(requests()[4], col.callback(1))).ok());
}

}  // namespace
}  // namespace spate::testing
