// Request scheduler: vLLM-style waiting and running queues over the KV block
// manager. Each step it picks which sequences run and how many new tokens each
// brings, within a token budget (max_num_batched_tokens) and a sequence cap
// (max_num_seqs), allocating KV blocks and preempting (recompute) the newest
// running requests when blocks run out.
//
// Two step shapes:
//  - chunked prefill on: mixed steps. Running requests first (decodes and
//    unfinished prompt chunks, in admission order), then new requests from the
//    waiting queue with the remaining budget; a prompt is split into chunks of
//    at most the remaining budget.
//  - chunked prefill off: each step is either a prefill step (only requests
//    admitted now, whole prompts) or a decode step (one token per running
//    request). Prefill steps run while requests wait, at most
//    max_prefill_steps_in_row in a row while decodes wait.
// The budget (max_num_batched_tokens) bounds the PROMPT tokens of a step
// (whole prompts, or chunks); the decodes of all running sequences come on top
// of it (at most max_num_seqs), so every running sequence advances every decode
// or mixed step and the number running is capped by max_num_seqs only. A step
// carries at most budget + n_running tokens.
// A prompt longer than the budget still runs when it is alone in its step.
//
// Speculative decoding (num_speculative_tokens > 0 and a proposer): a decode
// of a request that allows it brings its last token plus up to k draft tokens
// from the proposer, which count against the budget. Drafts are added after
// every running request got its tokens, from what budget and free blocks are
// left (they never cause a preemption), and never reach past the request's
// max_len; none are proposed while more than speculative_disable_by_batch_size
// requests run. With speculative_adaptive_k, each request asks for fewer
// drafts (or none for a while) after rejections (engine/draft_length.h). After the forward the engine verifies the drafts and calls
// on_verified(), which keeps the KV of the accepted ones and shrinks the
// block table at its end.
//
// A request joins at the first step after it is added; preempted requests
// return to the front of the waiting queue with their blocks freed and are
// recomputed later (their tokens, prompt and generated, are prefilled again;
// the owner keeps the sampler state, so the output is unchanged).
//
// Recurrent models (kv_block_manager::recurrent()): a sequence also holds a
// working state slot from admission to finish or preemption; a prefill chunk
// that does not reach the end of the tokens ends on a block boundary, and a
// prefill reaching the end is cut at the tokens' last block boundary (the
// tail runs in the next step), so that checkpoints can be taken there; no
// draft tokens (a rejected draft cannot be taken back out of a state). After
// schedule() and after on_step_done() the engine runs the manager's state_ops.
//
// Thread-safety: none; only the engine thread uses it. The scheduler never
// owns sched_seq objects: the caller keeps them alive until finish().
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "engine/buckets.h"
#include "engine/engine_config.h"
#include "model/forward_batch.h"
#include "engine/draft_length.h"
#include "engine/draft_proposer.h"
#include "engine/kv_block_manager.h"

namespace spate {

// The scheduler's view of one request. tokens points at the owner's vector
// (prompt then generated), which grows by one after each sampling step.
struct sched_seq {
  // state_pool: the recurrent state slots' pool (kv_block_manager::state_pool; null: none).
  sched_seq(int64_t id_, const std::vector<int32_t>* tokens_, block_pool& pool, block_pool* state_pool = nullptr)
      : id(id_), tokens(tokens_), blocks(pool), state(state_pool ? *state_pool : pool) {}
  int64_t id;
  const std::vector<int32_t>* tokens;
  int32_t n_cached = 0;    // positions whose KV is computed
  block_table blocks;
  block_table state;       // recurrent models: its working state slot (one entry while it holds blocks)
  prefix_state prefix;
  int32_t n_preemptions = 0;
  bool hidden = false;     // an embedding request: every position's hidden state, no prefix reuse, no logits
  int32_t max_len = 0;     // prompt + max_tokens: positions stay below max_len - 1 (0: max_model_len)
  bool speculate = false;  // decodes may carry draft tokens
  int32_t adapter = -1;    // LoRA slot (forward_seq::adapter); -1: the base model
  uint64_t cache_salt = 0; // separates its prefix-cache blocks (an adapter's KV differs from the base's)
  std::vector<int32_t> spec_tokens;  // the step's last token, then its drafts (a decode with drafts)
  draft_length draft_len;            // how many drafts the next decode asks for (adaptive k)
  enum class state { none, waiting, running, finished } where = state::none;

  int32_t n_tokens() const { return static_cast<int32_t>(tokens->size()); }
};

// seq is valid until its request finishes; after the forward, when pooling
// may already have finished an embedding request of this step, use id and
// hidden (copies) instead of dereferencing seq.
struct scheduled_seq {
  sched_seq* seq = nullptr;
  int64_t id = 0;       // seq->id
  bool hidden = false;  // seq->hidden
  int32_t n_past = 0;   // positions already cached before this step
  int32_t n_new = 0;    // tokens computed this step
  bool samples = false; // the step reaches the last token: sample the next one
  int32_t n_draft = 0;  // draft tokens after the last one (seq->spec_tokens); n_new == 1 + n_draft
};

struct scheduler_output {
  std::vector<scheduled_seq> seqs;
  int64_t n_tokens = 0;       // sum of n_new
  int32_t n_prefill_seqs = 0; // seqs with n_new > 1 or not sampling
  bool prefill_step = false;  // any prefill work in the step
  int32_t n_preempted = 0;    // requests preempted while scheduling this step
  // Filled by the engine: the bucket the step is padded to (none: beyond the
  // largest, runs unpadded) and the padding waste in tokens (padded - real).
  std::optional<bucket> padded_to;
  int64_t n_padding_tokens = 0;
  int32_t n_logit_rows() const {
    int32_t n = 0;
    for (const auto& s : seqs) n += s.samples && !s.hidden ? 1 + s.n_draft : 0;
    return n;
  }
  int64_t n_hidden_rows() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += s.hidden ? s.n_new : 0;
    return n;
  }
  // The forward batch for the model runner; spans point into the sequences.
  forward_batch to_batch() const;
};

class scheduler {
 public:
  // proposer: where draft tokens come from (null: no speculation); must
  // outlive the scheduler.
  scheduler(const scheduler_config& cfg, kv_block_manager& kv, draft_proposer* proposer = nullptr);

  const scheduler_config& config() const { return cfg_; }
  // Sets max_num_batched_tokens (>= 1). Before scheduling starts (engine start-up).
  void set_max_num_batched_tokens(int32_t n);

  // "" when a request of n_prompt tokens generating up to max_tokens can ever
  // run (fits max_model_len and the whole KV cache), else the reason.
  std::string check_admissible(int32_t n_prompt, int32_t max_tokens) const;

  // Queues s at the back of the waiting queue. Precondition: s.where == none,
  // s holds no blocks, s.n_cached == 0, check_admissible passed.
  void add(sched_seq& s);

  // Plans the next step. Output may be empty (nothing to run).
  scheduler_output schedule();

  // After the forward of out: marks the computed positions cached, registers
  // full blocks in the prefix cache and, with a kv_window, releases each
  // sequence's leading blocks that no later query reads. Call before
  // sampling appends.
  // Sequences with drafts (n_draft > 0) are skipped: see on_verified.
  void on_step_done(const scheduler_output& out);

  // After the engine verified q's drafts and appended the tokens it keeps:
  // positions up to the last token and the n_accepted drafts that matched
  // stay cached; the blocks grown for the rest are released (the table
  // shrinks at its end). Precondition: q.n_draft > 0, q.seq still running.
  void on_verified(const scheduled_seq& q, int32_t n_accepted);

  // Removes s from its queue and frees its blocks (cached blocks stay
  // reusable). Idempotent.
  void finish(sched_seq& s);

  int32_t n_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t n_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  sched_seq* front_waiting() const { return waiting_.empty() ? nullptr : waiting_.front(); }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  int64_t n_preemptions() const { return n_preemptions_; }

 private:
  void preempt(sched_seq& s);
  void release_outside_window(sched_seq& s);
  // Admits waiting requests into out while budget and blocks allow.
  void admit_waiting(scheduler_output& out, int64_t& budget, bool chunked);
  void schedule_running(scheduler_output& out, int64_t& budget, bool chunked);
  void push(scheduler_output& out, sched_seq& s, int32_t n_new);
  // After the running requests got their tokens (so drafts only take blocks
  // and budget nobody else in the step needs): adds drafts to the step's
  // decodes, in order, while budget remains.
  void add_drafts(scheduler_output& out, int64_t& budget);
  // Asks the proposer for s's drafts (into s.spec_tokens) and grows s's table
  // for them while free blocks allow; returns how many drafts run.
  int32_t plan_drafts(sched_seq& s, int64_t budget);
  void commit_cached(sched_seq& s, bool prompt_end = false);
  // Recurrent models: n_new (computed after n_past positions) cut so the step ends on a block boundary (see above).
  int32_t align_to_blocks(const sched_seq& s, int32_t n_past, int32_t n_new) const;

  scheduler_config cfg_;
  kv_block_manager& kv_;
  draft_proposer* proposer_;
  std::deque<sched_seq*> waiting_;
  std::vector<sched_seq*> running_;  // admission order; preemption takes from the back
  int32_t prefill_in_row_ = 0;
  int64_t n_preemptions_ = 0;
};

}  // namespace spate
