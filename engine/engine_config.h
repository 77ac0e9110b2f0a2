// How the serving engine is configured: scheduling, buckets, queue bound,
// seeds and the liveness hooks. Plain data, read once at start-up by the
// command line (which maps its flags and environment onto these fields).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/buckets.h"
#include "engine/engine_api.h"  // k_max_speculative_tokens

namespace spate {

// The defaults of max_num_batched_tokens when it is 0 ("auto"), the one place
// they live (the command line, the config file and warmup read them here):
// - without chunked prefill, k_default_batched_tokens keeps a burst of prompts
//   from being prefilled in long steps, so the first prompts of a burst get
//   their first token early (TTFT) and running streams wait one short prefill
//   step between tokens (ITL), at the same prefill rate (spate_bench pp64 to
//   pp256 are within noise of each other); a longer prompt still runs, alone
//   in its step;
// - with chunked prefill, the engine measures the budget after warmup
//   (engine::impl::measure_prefill_budget, logged as "Chunked prefill budget:
//   ..."), and k_default_chunked_batched_tokens is the chunk when warmup is
//   skipped: small enough that a mixed step stays within a few decode steps on
//   a small CPU (perf/scripts/bench_serving.sh --scenario chunked, 8 decoding streams and
//   a 2,000-token prompt, mixed-step ITL p99 60-67 ms with 24, 73-100 ms with
//   32; 16 gave longer TTFTs). A step with nobody decoding may then take
//   k_default_batched_tokens (idle_prefill_budget).
inline constexpr int32_t k_default_batched_tokens = 128;
inline constexpr int32_t k_default_chunked_batched_tokens = 24;

struct scheduler_config {
  int32_t max_num_seqs = 256;             // running sequences at most
  // Prompt tokens per step (the running sequences' decodes come on top);
  // >= 0, 0 = auto (above; resolved by the scheduler, auto_batched_tokens()).
  int32_t max_num_batched_tokens = 0;
  int32_t max_model_len = 2048;           // prompt + max_tokens at most
  bool enable_chunked_prefill = true;  // prompts split into chunks that share steps with decodes
  // Chunked prefill: the prompt-token budget of a step in which no running
  // request is decoding (nobody's tokens wait on it), when above
  // max_num_batched_tokens. 0: max_num_batched_tokens always, except with an
  // auto budget, where it is k_default_batched_tokens.
  int32_t idle_prefill_budget = 0;
  // Prefill steps that may delay running decodes. 1 (default): while both
  // have work, prefill and decode steps alternate; measured on the serving
  // throughput workload (perf/engine_serving_bench) this roughly halved the
  // inter-token p99 of 2 (one prefill step instead of two between tokens) at
  // the same tokens/s and no worse TTFT.
  int32_t max_prefill_steps_in_row = 1;
  // Speculative decoding (copied from engine_config::speculative by the
  // engine): draft tokens per decode (0: off), and the running-request count
  // above which no drafts are proposed (0: never turned off).
  int32_t num_speculative_tokens = 0;
  int32_t speculative_disable_by_batch_size = 0;
  bool speculative_adaptive_k = false;  // per-request draft length (engine/draft_length.h); false: always k
  // Positions a query reads back (forward_executor::kv_window(); set by the
  // engine, not a user option). > 0: after each step a sequence releases its
  // leading blocks that no later query reads. 0: blocks stay until the end.
  int32_t kv_window = 0;

  bool auto_batched_tokens() const { return max_num_batched_tokens == 0; }
};

class draft_proposer;

// Speculative decoding (--speculative-config, vLLM's keys). Every decode of a
// request that allows it carries up to num_speculative_tokens draft tokens,
// verified by the target model in the same forward; the output is exactly
// what plain decoding gives (engine.cpp, verify_drafts).
struct speculative_config {
  enum class method { none, ngram, draft_model };
  method kind = method::none;
  int32_t num_speculative_tokens = 0;  // k in [1, k_max_speculative_tokens] when on
  int32_t prompt_lookup_min = 5;       // ngram: shortest suffix searched for, >= 1
  int32_t prompt_lookup_max = 5;       // ngram: longest suffix, >= prompt_lookup_min
  int32_t disable_by_batch_size = 0;   // no drafts while more requests than this run (0: never)
  bool adaptive_k = false;             // per-request draft length from its acceptance (engine/draft_length.h; `spate serve` defaults it on)
  // The draft_model proposer (built by the command line), or a test's own;
  // null with method ngram: the engine builds an ngram_proposer.
  std::shared_ptr<draft_proposer> proposer;
  bool enabled() const { return kind != method::none; }
};

// The prefix cache's disk tier (engine/kv_disk_store.h): full prompt blocks
// are written behind to files under dir and reloaded, instead of recomputed,
// by later requests (also after a restart) whose prefix misses memory.
inline constexpr uint64_t k_default_kv_disk_bytes = 10ull << 30;  // --kv-cache-disk-bytes when --kv-cache-dir is given
struct kv_disk_config {
  std::string dir;                              // "": no disk tier
  uint64_t max_bytes = k_default_kv_disk_bytes; // bound on this model's files (LRU eviction beyond)
  // Identity of the model's weights (model/model_identity.h); with the
  // executor's kv_format_id() it names the subdirectory the blocks go to, so
  // other models (or formats) never see them. 0: the tier stays off.
  uint64_t model_id = 0;
  // Blocks waiting to be written at most (more are dropped), and the most one
  // read brings into memory at once (a longer run is read in batches).
  uint64_t max_queue_bytes = 128ull << 20;
};

struct engine_config {
  scheduler_config sched;                // max_model_len, budget, chunked prefill, ...
  bool enable_prefix_caching = true;
  kv_disk_config kv_disk;                // off unless kv_disk.dir is set (needs prefix caching)
  int32_t max_queued_requests = 4096;    // submitted but not yet running; submit() rejects beyond (room for a
                                         // 2048-input embeddings request, OpenAI's maximum, with others waiting)
  bucket_config buckets;
  speculative_config speculative;
  // No dummy forward per bucket before serving. With chunked prefill and an
  // auto budget (sched.max_num_batched_tokens 0), warmup also times a 1-token
  // step and two prefill steps and sets the budget so that a step's prompt
  // chunk costs about four 1-token steps (about a decode step of a dozen
  // streams, so a mixed step stays within a few decode steps, bounding
  // inter-token latency); skipped, the budget is
  // k_default_chunked_batched_tokens.
  bool skip_warmup = false;
  // Warmup runs a bucket only if its predicted cost (from the smallest
  // bucket of its kind, which always runs) fits in what is left of this many
  // seconds. A big model's prompt buckets take seconds each, and on the CPU
  // executor nothing is compiled per bucket. <= 0: every bucket.
  double warmup_max_s = 5.0;
  uint64_t seed = 0;                     // base of per-request seeds for requests without one
  // Liveness hook (e.g. the systemd watchdog): called on the engine thread
  // after every loop iteration, and at least every heartbeat_interval_us while
  // idle. A wedged engine stops calling it. Must not block. 0 / empty: off.
  int64_t heartbeat_interval_us = 0;
  std::function<void()> on_heartbeat;
  // Warmup progress (calling thread of start()), at every 10%: (percent,
  // buckets done, buckets total).
  std::function<void(int32_t, int32_t, int32_t)> on_warmup_progress;
};

}  // namespace spate
