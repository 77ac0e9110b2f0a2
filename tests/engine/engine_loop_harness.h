// Test harness for the engine-loop tests: an event log that records what
// each request received, checks of the event contract, and `harness`, which
// owns a fake executor, the tiny tokenizer and an engine over them.
//
// Thread-safety: event_log's members may be called from any thread (the
// engine calls its callbacks on the engine thread); harness is used by the
// test's thread.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "engine/engine_config.h"
#include "fake_executor.h"

namespace spate::test_engine {

// Everything one request received, in order.
struct request_log {
  std::vector<engine_event::kind> kinds;
  std::vector<int32_t> tokens;
  std::string text;
  finish_reason reason = finish_reason::none;
  std::string error;
  request_usage usage;
  request_metrics metrics;
  int32_t n_token_events = 0;
  std::vector<float> embedding;
  bool done() const { return !kinds.empty() && kinds.back() != engine_event::kind::tokens; }
};

// Records the events of every request (keyed by request id: events may come
// before submit() returns the id). Any thread.
class event_log {
 public:
  event_callback callback() {
    return [this, alive = alive_](const engine_event& ev) {
      std::lock_guard lk(mu_);
      request_log& r = logs_[ev.request_id];
      r.kinds.push_back(ev.type);
      switch (ev.type) {
        case engine_event::kind::tokens:
          r.tokens.insert(r.tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
          r.text += ev.text;
          ++r.n_token_events;
          break;
        case engine_event::kind::finished:
          r.reason = ev.reason;
          r.usage = ev.usage;
          r.metrics = ev.metrics;
          r.embedding = ev.embedding;
          break;
        case engine_event::kind::error:
          r.error = ev.error;
          r.usage = ev.usage;
          break;
      }
      cv_.notify_all();
    };
  }
  // Blocks until request id has had n token events or its terminal event.
  void wait_token_events(int64_t id, int32_t n) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return logs_[id].n_token_events >= n || logs_[id].done(); });
  }
  request_log get(int64_t id) {
    std::lock_guard lk(mu_);
    return logs_[id];
  }
  // Callbacks the engine still holds (copies of callback() not yet destroyed).
  long n_callbacks_alive() const { return alive_.use_count() - 1; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, request_log> logs_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

// Tokens events, then exactly one finished or error event, nothing after.
inline void expect_well_formed(const request_log& r) {
  ASSERT_FALSE(r.kinds.empty());
  for (size_t i = 0; i + 1 < r.kinds.size(); ++i) EXPECT_EQ(r.kinds[i], engine_event::kind::tokens) << "event " << i;
  EXPECT_NE(r.kinds.back(), engine_event::kind::tokens);
  // One token per step and event; with speculative decoding a step may bring several.
  EXPECT_GE(r.n_token_events, r.tokens.empty() ? 0 : 1);
  EXPECT_LE(r.n_token_events, static_cast<int32_t>(r.tokens.size()));
  EXPECT_EQ(r.usage.completion_tokens, static_cast<int32_t>(r.tokens.size()));
}

// The text of word tokens ("a".."z"); other tokens render as nothing.
inline std::string letters_of(const std::vector<int32_t>& tokens) {
  std::string s;
  for (int32_t t : tokens) {
    if (t >= k_first_word && t < k_first_word + k_n_words) s += static_cast<char>('a' + (t - k_first_word));
  }
  return s;
}

inline engine_config small_config() {
  engine_config c;
  c.skip_warmup = true;
  c.sched.max_model_len = 64;
  c.sched.max_num_batched_tokens = 64;
  c.sched.enable_chunked_prefill = false;  // whole prompts, each in a step of its own
  c.max_queued_requests = 64;
  c.seed = 1;
  return c;
}

struct kv_shape {
  int32_t n_blocks = 64;
  int32_t block_size = 4;
  int32_t kv_window = 0;  // the fake model's sliding window (0: reads everything)
  int32_t n_state_slots = 0;  // > 0: the fake has recurrent state (fake_executor's recurrent mode)
};

// A fake executor, the tiny tokenizer and an engine over them. The destructor
// opens the gate first, so a failed assertion never leaves the engine thread
// parked while the engine joins it.
struct harness {
  explicit harness(const engine_config& cfg = small_config(), kv_shape kv = {}, int32_t eos_at_length = 0)
      : tok(tiny_vocab()), exec(tok.n_vocab(), kv.n_blocks, kv.block_size, eos_at_length, kv.kv_window, kv.n_state_slots),
        eng(std::make_unique<engine>(exec, tok, cfg)) {}
  ~harness() {
    exec.gate().open();
    eng.reset();
  }

  // Starts the engine (warmup included, unless skipped).
  void start() {
    eng->start();
    unwritten_reads_after_start = exec.n_unwritten_reads();
    state_mismatches_after_start = exec.n_state_mismatches();  // warmup's dummy states start at n_past > 0
  }

  // Greedy request whose events go to log.
  submit_result submit(const std::vector<int32_t>& prompt, int32_t max_tokens) {
    sampling_params p;
    p.temperature = 0.0f;
    return submit(prompt, max_tokens, p);
  }
  // Request with these sampling parameters (max_tokens set here).
  submit_result submit(const std::vector<int32_t>& prompt, int32_t max_tokens, sampling_params p) {
    engine_request r;
    r.prompt = prompt;
    r.params = std::move(p);
    r.params.max_tokens = max_tokens;
    r.on_event = log.callback();
    return eng->submit(std::move(r));
  }
  // Embedding request whose events go to log.
  submit_result submit_embed(const std::vector<int32_t>& prompt, pooling_type pooling) {
    engine_request r;
    r.prompt = prompt;
    r.embed = pooling;
    r.on_event = log.callback();
    return eng->submit(std::move(r));
  }
  int64_t submit_ok(const std::vector<int32_t>& prompt, int32_t max_tokens) {
    const submit_result res = submit(prompt, max_tokens);
    EXPECT_TRUE(res.ok()) << res.error;
    return res.id;
  }

  // Every block back in the pool and nothing running or waiting.
  void expect_drained() const {
    const engine_stats s = eng->stats();
    EXPECT_EQ(s.n_blocks_free, s.n_blocks_total);
    EXPECT_EQ(s.n_running, 0);
    EXPECT_EQ(s.n_waiting, 0);
    EXPECT_EQ(s.kv_usage, 0.0);
    EXPECT_EQ(log.n_callbacks_alive(), 0);
    EXPECT_EQ(exec.n_invalid_batches(), 0);
    EXPECT_EQ(exec.n_unwritten_reads(), unwritten_reads_after_start);  // requests read only KV they wrote
    EXPECT_EQ(exec.n_state_mismatches(), state_mismatches_after_start);  // recurrent: every state was the sequence's own
  }

  tokenizer tok;
  fake_executor exec;
  event_log log;  // outlives the engine, whose callbacks point at it
  std::unique_ptr<engine> eng;
  int64_t unwritten_reads_after_start = 0;
  int64_t state_mismatches_after_start = 0;
};

}  // namespace spate::test_engine
