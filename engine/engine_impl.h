// The engine's implementation class (internal to the engine library; the
// public face is engine/engine_api.h). engine.cpp holds the request
// bookkeeping and the loop, engine_warmup.cpp the bucket logging and warmup,
// engine_deliver.cpp what follows a forward (pooling, sampling, verifying
// drafts, delivering events), engine_disk.cpp the prefix cache's disk tier.
//
// Thread-safety: engine-thread state is touched only by the engine thread
// (and by the constructor and warmup, before that thread starts); the shared
// state is guarded by mu_.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/buckets.h"
#include "engine/engine_api.h"
#include "engine/engine_config.h"
#include "engine/kv_block_manager.h"
#include "engine/kv_disk_store.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "model/forward_executor.h"

namespace spate {

inline int64_t us_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
}

// Calls cb(ev); a throw is logged and swallowed (callbacks must not throw).
void deliver(const event_callback& cb, const engine_event& ev);

class engine::impl {
 public:
  // Validates the bucket and queue configuration (std::invalid_argument
  // naming the field) and builds the buckets, block manager and scheduler.
  impl(forward_executor& exec, const tokenizer& tok, const engine_config& cfg);
  void start();
  submit_result submit(engine_request r);
  void cancel(int64_t id);
  engine_stats stats() const;
  void wait_idle();
  void stop();
  const engine_config& config() const { return cfg_; }

 private:
  using clock_type = std::chrono::steady_clock;
  struct request_state;

  // engine_warmup.cpp. Caller's thread, before the engine thread starts.
  void log_buckets() const;
  void warmup();
  // One dummy forward of n_seqs sequences with n_past cached and n_new new
  // positions each, clamped to max_model_len and the free blocks (skipped
  // when not even one sequence fits); its blocks are freed again. The new
  // tokens are one repeated token, or with text_like a fixed pseudo-random
  // sequence, so that a mixture-of-experts model routes them as it routes
  // text (one repeated token sends every row to the same k experts).
  void run_warmup_step(int32_t n_seqs, int32_t n_past, int32_t n_new, std::vector<float>& logits,
                       bool text_like = false);
  // Times 1-token and text-like prefill steps (best of up to 5) and returns
  // the prompt-token budget whose compute costs about four 1-token steps, at
  // least k_min_auto_prefill_budget prompt tokens (chunked prefill with an
  // auto budget: scheduler_config::max_num_batched_tokens 0).
  int32_t measure_prefill_budget();
  static constexpr int32_t k_min_auto_prefill_budget = 40;

  // engine.cpp. Engine thread.
  void thread_main();
  void abort_all();
  void drain_inbox();
  void step();
  void note_first_scheduled(const scheduler_output& out);
  // engine_deliver.cpp. Engine thread, after the forward.
  void sample_and_deliver(const scheduler_output& out);
  void count_speculation(const scheduled_seq& q, int32_t n_accepted);
  // Pools the step's hidden rows into each embedding request; finishes those whose prompt is done.
  void pool_embeddings(const scheduler_output& out);
  void count_step_tokens(int64_t n_tokens);
  // Runs the block manager's queued state_ops on the executor (recurrent models).
  void run_state_ops();
  void account_padding(scheduler_output& out);
  // engine_disk.cpp, the prefix cache's disk tier. open_disk_tier: the
  // constructor; the rest: the engine thread.
  void open_disk_tier();
  // For a request arriving: queues a read of the blocks after its memory hit
  // that are on disk. True when it did: the request then waits, outside the
  // scheduler, until install_disk_reads() puts them in the cache.
  bool start_disk_read(request_state& r);
  // Puts the blocks read so far into the cache (copying their KV in) and
  // hands their requests to the scheduler, which finds them cached.
  void install_disk_reads();
  // Queues the blocks the step newly cached to be written (copying their KV out).
  void save_committed_blocks();
  void finish_request(request_state& r, finish_reason why);
  void fail_request(request_state& r, const std::string& msg);
  void publish_stats();

  forward_executor& exec_;
  const tokenizer& tok_;
  engine_config cfg_;
  int32_t n_blocks_ = 0;  // KV blocks in the pool
  std::shared_ptr<draft_proposer> proposer_;  // null: no speculative decoding
  kv_block_manager blocks_;
  scheduler sched_;
  std::vector<bucket> prompt_buckets_, decode_buckets_;
  std::vector<float> hidden_;  // the step's hidden rows (embedding requests)

  // Engine-thread state.
  std::unordered_map<int64_t, std::unique_ptr<request_state>> live_;
  std::vector<float> logits_;
  engine_stats local_stats_;
  bool warned_prompt_overflow_ = false, warned_decode_overflow_ = false;

  // Shared state, under mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<request_state>> inbox_;
  std::vector<int64_t> cancels_;
  int32_t n_queued_ = 0;  // inbox + scheduler waiting
  bool stop_ = false;
  bool idle_published_ = true;  // no request in flight as of the last snapshot
  std::condition_variable idle_cv_;
  engine_stats shared_stats_;
  std::thread thread_;
  bool started_ = false;  // the engine thread was started; set by start() on its caller's thread
  std::atomic<int64_t> next_id_{0};

  // The disk tier. disk_done_ is under mu_ (filled by the store's I/O thread);
  // the rest is engine-thread state.
  struct disk_read {
    int64_t id = 0;
    std::vector<kv_disk_block> blocks;
    std::vector<std::vector<uint8_t>> payloads;  // the leading blocks read and verified
  };
  std::vector<disk_read> disk_done_;
  int32_t n_disk_loading_ = 0;  // requests waiting for a read
  int64_t n_disk_hits_ = 0, n_disk_misses_ = 0;
  std::vector<prefix_key> disk_keys_, disk_parents_;  // scratch
  // Declared last: destroyed first (writes the queued blocks, joins its I/O
  // thread, whose callbacks use mu_ and disk_done_). Null: no disk tier.
  std::unique_ptr<kv_disk_store> disk_;
};

// One request from submit() to its terminal event; owned by the inbox, then
// by live_ (engine thread).
struct engine::impl::request_state {
  request_state(int64_t id, std::vector<int32_t> prompt, const sampling_params& p, uint64_t seed, const tokenizer& tok,
                block_pool& pool, block_pool* state_pool, event_callback cb)
      : seq(id, std::move(prompt), p, *p.max_tokens, seed, tok), ss(id, &seq.tokens(), pool, state_pool), on_event(std::move(cb)) {}
  sequence seq;
  sched_seq ss;
  event_callback on_event;
  pooling_type embed = pooling_type::none;  // an embedding request (ss.hidden), pooled in pooled
  std::vector<float> pooled;                // mean: the running sum; cls/last: the row so far
  clock_type::time_point submitted{}, first_scheduled{}, last_token{};
  bool scheduled_once = false;
  bool disk_loading = false;    // waiting for a disk read (not in the scheduler)
  int32_t n_disk_wanted = 0;    // blocks of its prompt that missed memory, when its read was queued
  bool disk_more = false;       // its read is one batch of more blocks on disk
  request_usage usage;
  request_metrics metrics;
};

}  // namespace spate
