// The engine's public API: what a caller submits (engine_request with its
// sampling_params), what it gets back (submit_result, then engine_events), the
// engine-wide counters (engine_stats), and the engine itself. Includes no
// engine internals: the protocol and server layers include only this header.
//
// The engine is one owner thread that runs steps over and over: each step it
// drains the inbox (new requests, cancellations), asks the scheduler for the
// next step, runs one forward pass on the device executor, samples, and
// publishes events through each request's callback. Only the engine thread
// touches the scheduler, the KV block manager and the block pool. When there
// is nothing to do it sleeps on a condition variable (no polling).
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

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace spate {

class tokenizer;
class forward_executor;
struct engine_config;

// Constrained decoding (structured outputs, tool calls): a per-request
// automaton over the generated tokens, supplied by the protocol layer (the
// engine knows no grammars). The engine masks every step's logits with it
// before any sampling stage, so greedy and sampled decoding alike only pick
// allowed tokens, and a request's mask depends on its own tokens alone
// (batch invariance).
//
// Thread-safety: a token_constraint is used by one thread at a time: the
// engine thread, or one of the executor's threads while the step's rows are
// masked and sampled in parallel (a task per request). Different requests'
// constraints run concurrently, so whatever they share (a mask cache) must
// lock. Its calls must not throw.
class token_constraint {
 public:
  virtual ~token_constraint() = default;
  // Sets to -infinity the logits of every token that may not come next,
  // including all tokens without text (end-of-generation tokens: the engine
  // lets them through itself where can_end()). logits.size() == n_vocab.
  virtual void mask_logits(std::span<float> logits) = 0;
  // The output so far is complete: end-of-generation may come next.
  virtual bool can_end() const = 0;
  // Consumes a sampled token that the last mask allowed (never called with
  // end-of-generation tokens).
  virtual void accept(int32_t token) = 0;
  // Nothing may follow: the engine ends the request with finish_reason stop.
  virtual bool finished() const = 0;
};

// Immutable and shared between requests: starts one automaton per request
// (each of n choices gets its own). start() is called on the engine thread.
class constraint_spec {
 public:
  virtual ~constraint_spec() = default;
  virtual std::unique_ptr<token_constraint> start() const = 0;
};

// Per-request sampling parameters (the OpenAI / vLLM field set).
//
// Contract: the caller fills a sampling_params from the request (absent fields
// keep the defaults below) and calls validate() with the model's vocabulary
// size before submitting; the sampler and stop matcher assume a validated struct.
struct sampling_params {
  // Softmax temperature, [0, 2]. 0 (or anything below 1e-5, as in vLLM) means greedy argmax.
  float temperature = 1.0f;
  // Keep only the k most likely tokens. -1 and 0 both disable it.
  int32_t top_k = -1;
  // Nucleus sampling: keep the smallest most-likely set with cumulative probability >= top_p. (0, 1].
  float top_p = 1.0f;
  // Drop tokens whose probability is below min_p * (probability of the most likely token). [0, 1].
  float min_p = 0.0f;
  // Applied to tokens seen in prompt or output: positive logits divided, negative multiplied. (0, 2].
  float repetition_penalty = 1.0f;
  // Subtracted once from the logit of every token that occurs in the generated output. [-2, 2].
  float presence_penalty = 0.0f;
  // Subtracted per occurrence in the generated output. [-2, 2].
  float frequency_penalty = 0.0f;
  // RNG seed; when empty the engine supplies a per-request seed.
  std::optional<uint64_t> seed;
  // Maximum number of generated tokens (>= 1); empty means "until the context is full".
  std::optional<int32_t> max_tokens;
  // End-of-generation tokens and stop_token_ids are masked until this many tokens were generated.
  int32_t min_tokens = 0;
  // Stop strings: generation ends when the output text contains one; the stop string itself and
  // everything after it are not returned. Must be non-empty strings.
  std::vector<std::string> stop;
  // Additional token ids that end generation (the token itself is not part of the text).
  std::vector<int32_t> stop_token_ids;
  // Keep generating past the model's end-of-generation tokens (stop/stop_token_ids still apply).
  bool ignore_eos = false;
  // Added to the raw logits of the given token ids, each value in [-100, 100]. Duplicate ids add up.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Number of top alternatives to return with each token, [0, 20]; empty means no logprobs at all.
  std::optional<int32_t> logprobs;
  // Constrained decoding; null means unconstrained.
  std::shared_ptr<const constraint_spec> constraint;
  // May use speculative decoding when the engine has it on (the output is the
  // same either way; false opts out, e.g. to compare speeds).
  bool speculative = true;
  // Locally typical sampling (TGI's typical_p): keep the smallest set of tokens, ordered by how
  // close their surprisal -log p is to the entropy, holding >= typical_p of the mass. (0, 1];
  // 1 disables it.
  float typical_p = 1.0f;
  // Kirchenbauer et al.'s green-list watermark (TGI's watermark): before the penalties,
  // watermark_delta is added to the logits of the "green" tokens, a watermark_gamma fraction of
  // the vocabulary chosen by a hash of the previous token (sampler.h, watermark_green). Depends
  // only on this sequence's tokens. gamma in (0, 1), delta in [0, 100].
  bool watermark = false;
  double watermark_gamma = 0.5;
  float watermark_delta = 2.0f;
};

// Upper bound on sampling_params::logprobs (OpenAI's limit).
inline constexpr int32_t max_top_logprobs = 20;

// Returns "" when p is acceptable for a model with n_vocab tokens, otherwise a message that names
// the first offending field, its allowed range and the value given,
// e.g. "temperature must be in [0, 2], got -1". NaN is rejected for every float field.
std::string validate(const sampling_params& p, int32_t n_vocab);

enum class finish_reason { none, stop, length, abort, error };
const char* finish_reason_name(finish_reason r);  // "stop", "length", "abort", "error", or "" for none

struct request_usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // prompt tokens served by the prefix cache (memory or disk tier) at first admission
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
  int32_t stop_index = -1;         // finished with reason stop by a stop string: its index in params.stop; else -1
  request_usage usage;             // finished and error
  request_metrics metrics;         // finished
  std::string error;               // error: message
  std::vector<float> embedding;    // finished, for an embedding request: the pooled, L2-normalized vector
};

// Called on the engine thread; must not block.
using event_callback = std::function<void(const engine_event&)>;

// How an embedding request's hidden states become one vector (llama.cpp's
// and vLLM's pooling types): the mean over the prompt, the first token's
// (cls) or the last token's.
enum class pooling_type { none, mean, cls, last };
const char* pooling_name(pooling_type p);  // "none", "mean", "cls", "last"

struct engine_request {
  std::vector<int32_t> prompt;   // non-empty token ids in [0, n_vocab)
  sampling_params params;        // validated; max_tokens set (ignored for embeddings)
  event_callback on_event;       // required
  // Not none: an embedding request. The prompt runs once (no prefix-cache
  // reuse, chunked like any prompt, batched with other requests), no token is
  // generated, and `finished` (reason stop, usage with 0 completion tokens)
  // carries the pooled, L2-normalized final-normed hidden state.
  pooling_type embed = pooling_type::none;
  // A LoRA adapter: the executor's slot (forward_seq::adapter), -1 for the
  // base model. cache_salt keys this request's prefix-cache blocks apart from
  // other adapters' (and the base's, 0): each adapter load gets its own.
  int32_t adapter = -1;
  uint64_t cache_salt = 0;
};

struct submit_result {
  // Why a request was refused, so a server can pick the status code.
  enum class refusal { none, invalid, context_length, queue_full, stopped };
  int64_t id = -1;     // >= 0 when accepted
  std::string error;   // why not, when id < 0
  refusal why = refusal::none;
  bool ok() const { return id >= 0; }
};

// Bucket upper bounds (tokens, "le") of the tokens-per-step histogram in
// engine_stats (vLLM's spate:iteration_tokens_total); a last bucket is +Inf.
inline constexpr std::array<int64_t, 13> k_step_token_bounds = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};

// Upper bound on speculative decoding's draft tokens per decode.
inline constexpr int32_t k_max_speculative_tokens = 16;

struct engine_stats {
  int32_t n_running = 0;
  int32_t n_waiting = 0;            // in the scheduler's waiting queue or the inbox
  int32_t n_blocks_total = 0;
  int32_t n_blocks_free = 0;        // including evictable cached blocks
  double kv_usage = 0.0;            // 1 - free / total
  int64_t prefix_cache_queries = 0; // tokens
  int64_t prefix_cache_hits = 0;    // tokens (blocks reloaded from the disk tier count too)
  // The prefix cache's disk tier (engine_config::kv_disk; all 0 when off):
  // blocks reloaded from disk, blocks of prompts that missed memory and were
  // not reloaded (recomputed), bytes of block files read (verified) and
  // written, files evicted to stay within the bound, errors (bad files found,
  // failed reads and writes), and the bytes of the files on disk now.
  int64_t kv_disk_hits = 0;
  int64_t kv_disk_misses = 0;
  int64_t kv_disk_read_bytes = 0;
  int64_t kv_disk_written_bytes = 0;
  int64_t kv_disk_evictions = 0;
  int64_t kv_disk_errors = 0;
  int64_t kv_disk_dropped = 0;      // blocks not written: writing off (full or read-only disk) or the queue full
  int64_t kv_disk_usage_bytes = 0;  // a gauge
  int64_t n_preemptions = 0;
  int64_t n_steps = 0;
  int64_t prompt_tokens = 0;        // prompt tokens of finished requests
  int64_t generated_tokens = 0;     // tokens sampled
  int64_t padding_waste_tokens = 0; // padded minus real tokens over all steps
  int64_t n_finished = 0;
  int64_t n_rejected = 0;
  // Tokens per engine step (the real tokens of each forward pass): counts per
  // bucket of k_step_token_bounds (not cumulative; the last is +Inf) and the sum.
  std::array<int64_t, k_step_token_bounds.size() + 1> step_tokens_buckets{};
  int64_t step_tokens_sum = 0;
  // Speculative decoding (vLLM's spec_decode counters): decodes that carried
  // drafts, draft tokens proposed, drafts accepted, and accepted per draft
  // position (index 0: the first draft of a decode).
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
  std::array<int64_t, k_max_speculative_tokens> spec_accepted_per_pos{};
};

class engine {
 public:
  // Sizes the block pool from the executor's KV storage and builds the
  // scheduler. Throws std::invalid_argument whose message names the
  // engine_config field (e.g. "max_queued_requests must be >= 1") when a value
  // is invalid; the command line maps field names to its flags. The executor
  // and the tokenizer must outlive the engine.
  engine(forward_executor& exec, const tokenizer& tok, const engine_config& cfg);
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
  // reflects it (e.g. all blocks back in the pool), or until stop() has been
  // called. Requests submitted before start() keep it waiting until they ran.
  // Any thread except the engine thread (not from a callback).
  void wait_idle();

  // Stops the engine thread after the current step (idempotent, blocking);
  // requests still in flight finish with reason abort. Without start() (or
  // when its warmup threw) their abort events run on the calling thread.
  // Not concurrently with start().
  void stop();

  const engine_config& config() const;

  // The most requests submit() ever holds waiting (engine_config's
  // max_queued_requests): a group larger than this can never be admitted at once.
  int32_t max_queued_requests() const;

 private:
  class impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace spate
