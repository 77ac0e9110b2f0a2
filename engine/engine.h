// The serving engine: one owner thread that runs step() over and over.
//
// Each step it drains the inbox (new requests, cancellations), asks the
// scheduler for the next step, runs one forward pass on the device executor
// (thread_pool), samples, and publishes events through each request's
// callback. Only the engine thread touches the scheduler, the KV block manager
// and the block pool. When there is nothing to do it sleeps on a condition
// variable (no polling).
//
// Thread-safety: submit(), cancel(), stats(), wait_idle() and stop() may be
// called from any thread. Event callbacks run on the engine thread, one at a
// time; they must not block or throw (a throw is logged and ignored) and may
// call only submit()/cancel()/stats() on the engine (these take the inbox
// lock briefly). The engine never waits on a consumer.
//
// Events per request: zero or more `tokens`, then exactly one `finished`
// (reason stop, length or abort) or `error`, after which the callback is
// destroyed. Per-request timings (queue time, TTFT, inter-token gaps) come
// with `finished`; engine-wide counters through stats().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/buckets.h"
#include "engine/kv_block_manager.h"
#include "engine/model_runner.h"
#include "engine/sampling_params.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "kernels/ops.h"

namespace spate {

struct loaded_model;

struct engine_config {
  int32_t n_threads = 1;                 // device executor threads
  int32_t block_size = 16;               // tokens per KV block
  uint64_t kv_cache_bytes = 2ull << 30;  // KV budget
  kernels::kv_dtype kv_dtype = kernels::kv_dtype::f16;
  scheduler_config sched;                // max_model_len, budget, chunked prefill, ...
  bool enable_prefix_caching = true;
  int32_t max_queued_requests = 1024;    // submitted but not yet running; submit() rejects beyond
  bucket_config buckets;
  bool skip_warmup = false;              // SPATE_SKIP_WARMUP, read by the CLI layer
  uint64_t seed = 0;                     // base of per-request seeds for requests without one
  // Liveness hook (e.g. the systemd watchdog): called on the engine thread
  // after every loop iteration, and at least every heartbeat_interval_us while
  // idle. A wedged engine stops calling it. Must not block. 0 / empty: off.
  int64_t heartbeat_interval_us = 0;
  std::function<void()> on_heartbeat;
  // Warmup progress (calling thread of start()): (buckets done, buckets total).
  std::function<void(int32_t, int32_t)> on_warmup_progress;
};

struct request_usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // prompt tokens served by the prefix cache at first admission
};

struct request_metrics {
  int64_t queue_us = 0;              // submit -> first scheduled
  int64_t ttft_us = 0;               // submit -> first token
  std::vector<int64_t> itl_us;       // gaps between consecutive tokens
  int32_t n_preemptions = 0;
};

// Per sampled token, when the request asked for logprobs: the token's
// log-probability and the n most likely alternatives (sampler.h defines the
// distribution).
struct token_logprob {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};

struct engine_event {
  enum class kind { tokens, finished, error };
  kind type = kind::tokens;
  int64_t request_id = 0;
  std::vector<int32_t> token_ids;  // tokens: the new token(s) of this step
  std::string text;                // tokens: text delta (may be empty while held back)
  std::vector<token_logprob> logprobs;  // tokens: one per token id when requested, else empty
  finish_reason reason = finish_reason::none;  // finished
  request_usage usage;             // finished and error
  request_metrics metrics;         // finished
  std::string error;               // error: message
};

// Called on the engine thread; must not block.
using event_callback = std::function<void(const engine_event&)>;

struct engine_request {
  std::vector<int32_t> prompt;   // non-empty token ids in [0, n_vocab)
  sampling_params params;        // validated; max_tokens set
  event_callback on_event;       // required
};

struct submit_result {
  // Why a request was refused, so a server can pick the status code.
  enum class refusal { none, invalid, context_length, queue_full, stopped };
  int64_t id = -1;     // >= 0 when accepted
  std::string error;   // why not, when id < 0
  refusal why = refusal::none;
  bool ok() const { return id >= 0; }
};

struct engine_stats {
  int32_t n_running = 0;
  int32_t n_waiting = 0;            // in the scheduler's waiting queue or the inbox
  int32_t n_blocks_total = 0;
  int32_t n_blocks_free = 0;        // including evictable cached blocks
  double kv_usage = 0.0;            // 1 - free / total
  int64_t prefix_cache_queries = 0; // tokens
  int64_t prefix_cache_hits = 0;    // tokens
  int64_t n_preemptions = 0;
  int64_t n_steps = 0;
  int64_t prompt_tokens = 0;        // prompt tokens of finished requests
  int64_t generated_tokens = 0;     // tokens sampled
  int64_t padding_waste_tokens = 0; // padded minus real tokens over all steps
  int64_t n_finished = 0;
  int64_t n_rejected = 0;
};

class engine {
 public:
  // Builds the KV cache (logging its budget and block count) and the runner.
  // Throws std::runtime_error when the budget is smaller than one block or a
  // config value is invalid. The model must outlive the engine.
  engine(const loaded_model& m, const engine_config& cfg);
  ~engine();  // stop()
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  // Logs the buckets, runs warmup (unless skipped) and starts the engine
  // thread. Blocking; call once, before submit().
  void start();

  // Queues a request. Returns its id, or an error when it can never fit
  // (max_model_len, whole KV cache), the inbox is full, or the engine stopped.
  // Never blocks on the engine's work. The request's events start after the
  // next step begins.
  submit_result submit(engine_request r);

  // Cancels a request: it finishes with reason abort by the next step and its
  // blocks are freed. Unknown or finished ids are ignored. Any thread.
  void cancel(int64_t id);

  // Snapshot, published after every step. Any thread.
  engine_stats stats() const;

  // Blocks until every submitted request has finished and the stats snapshot
  // reflects it (e.g. all blocks back in the pool). Any thread except the
  // engine thread (not from a callback).
  void wait_idle();

  // Stops the engine thread after the current step (idempotent, blocking);
  // requests still in flight finish with reason abort.
  void stop();

  const engine_config& config() const { return cfg_; }
  int32_t n_kv_blocks() const { return n_blocks_; }

  // Runs one dummy forward per bucket (engine thread or before start()).
  void warmup();

 private:
  struct request_state;
  void thread_main();
  void drain_inbox();
  void step();
  void account_padding(scheduler_output& out);
  void finish_request(request_state& r, finish_reason why);
  void fail_request(request_state& r, const std::string& msg);
  void publish_stats();

  const loaded_model& model_;
  engine_config cfg_;
  int32_t n_blocks_ = 0;
  thread_pool pool_;
  std::unique_ptr<kv_cache> kv_;
  kv_block_manager blocks_;
  model_runner runner_;
  scheduler sched_;
  std::vector<bucket> prompt_buckets_, decode_buckets_;

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
  std::atomic<int64_t> next_id_{0};
};

}  // namespace spate
