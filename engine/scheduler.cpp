#include "engine/scheduler.h"

#include <algorithm>
#include <stdexcept>

namespace spate {

forward_batch scheduler_output::to_batch() const {
  forward_batch b;
  b.seqs.reserve(seqs.size());
  for (const auto& s : seqs) {
    forward_seq f;
    if (s.n_draft > 0) {
      f.tokens = std::span<const int32_t>(s.seq->spec_tokens).first(static_cast<size_t>(s.n_new));
    } else {
      f.tokens = std::span<const int32_t>(*s.seq->tokens).subspan(static_cast<size_t>(s.n_past), static_cast<size_t>(s.n_new));
    }
    f.n_past = s.n_past;
    f.block_table = s.seq->blocks.ids();
    f.n_logits = s.samples && !s.hidden ? 1 + s.n_draft : 0;
    f.hidden = s.hidden;
    f.adapter = s.seq->adapter;
    f.state_slot = s.seq->state.ids().empty() ? -1 : s.seq->state.ids()[0];
    b.seqs.push_back(f);
  }
  return b;
}

scheduler::scheduler(const scheduler_config& cfg, kv_block_manager& kv, draft_proposer* proposer)
    : cfg_(cfg), kv_(kv), proposer_(proposer) {
  if (cfg_.max_num_seqs < 1) throw std::invalid_argument("max_num_seqs must be >= 1");
  if (cfg_.max_num_batched_tokens < 0) throw std::invalid_argument("max_num_batched_tokens must be >= 0 (0 = auto)");
  if (cfg_.auto_batched_tokens()) {
    cfg_.max_num_batched_tokens = cfg_.enable_chunked_prefill ? k_default_chunked_batched_tokens : k_default_batched_tokens;
    if (cfg_.enable_chunked_prefill && cfg_.idle_prefill_budget == 0) cfg_.idle_prefill_budget = k_default_batched_tokens;
  }
  if (cfg_.max_model_len < 2) throw std::invalid_argument("max_model_len must be >= 2");
  cfg_.max_prefill_steps_in_row = std::max(1, cfg_.max_prefill_steps_in_row);
}

void scheduler::set_max_num_batched_tokens(int32_t n) {
  if (n < 1) throw std::invalid_argument("max_num_batched_tokens must be >= 1");
  cfg_.max_num_batched_tokens = n;
}

std::string scheduler::check_admissible(int32_t n_prompt, int32_t max_tokens) const {
  if (n_prompt < 1) return "the prompt is empty";
  if (max_tokens < 1) return "max_tokens must be >= 1";
  const int64_t total = static_cast<int64_t>(n_prompt) + max_tokens;
  if (total > cfg_.max_model_len) {
    return "prompt (" + std::to_string(n_prompt) + " tokens) plus max_tokens (" + std::to_string(max_tokens) +
           ") exceeds the model length of " + std::to_string(cfg_.max_model_len);
  }
  // The last generated token is never fed back, so total - 1 positions need KV.
  const int64_t need = kv_block_manager::blocks_for(total - 1, kv_.block_size());
  if (need > kv_.n_total_blocks()) {
    return "the KV cache (" + std::to_string(kv_.n_total_blocks()) + " blocks of " + std::to_string(kv_.block_size()) +
           " tokens) cannot hold request of " + std::to_string(total) + " tokens (needs " + std::to_string(need) +
           " blocks); increase kv_cache_bytes";
  }
  return "";
}

void scheduler::add(sched_seq& s) {
  s.where = sched_seq::state::waiting;
  waiting_.push_back(&s);
}

void scheduler::push(scheduler_output& out, sched_seq& s, int32_t n_new) {
  scheduled_seq q;
  q.seq = &s;
  q.id = s.id;
  q.hidden = s.hidden;
  q.n_past = s.n_cached;
  q.n_new = n_new;
  q.samples = s.n_cached + n_new == s.n_tokens();
  if (n_new > 1 || !q.samples) {
    ++out.n_prefill_seqs;
    out.prefill_step = true;
  }
  out.n_tokens += n_new;
  out.seqs.push_back(q);
}

void scheduler::preempt(sched_seq& s) {
  kv_.free(s.blocks, s.prefix, &s.state);
  s.n_cached = 0;
  ++s.n_preemptions;
  ++n_preemptions_;
  s.where = sched_seq::state::waiting;
  waiting_.push_front(&s);
}

int32_t scheduler::plan_drafts(sched_seq& s, int64_t budget) {
  const int32_t max_len = s.max_len > 0 ? std::min(s.max_len, cfg_.max_model_len) : cfg_.max_model_len;
  // The step writes positions n_cached (the last token) .. n_cached + n_draft;
  // the request never needs a position at or beyond max_len - 1.
  const int64_t bs = kv_.block_size();
  const int64_t room = (static_cast<int64_t>(s.blocks.n_blocks()) + kv_.n_free_blocks()) * bs - (s.n_cached + 1);
  // A lone stream's step is bound by reading the weights, so its drafts are
  // nearly free: the adaptive length only applies while several sequences run.
  const bool adaptive = cfg_.speculative_adaptive_k && running_.size() > 1;
  const int32_t k = adaptive ? s.draft_len.next(cfg_.num_speculative_tokens) : cfg_.num_speculative_tokens;
  const int64_t limit = std::min<int64_t>({k, budget, max_len - 1 - s.n_tokens(), room});
  if (limit <= 0) return 0;
  s.spec_tokens.assign(1, s.tokens->back());
  int32_t n = proposer_->propose(s.id, *s.tokens, static_cast<int32_t>(limit), s.spec_tokens);
  n = std::clamp<int32_t>(n, 0, static_cast<int32_t>(limit));
  s.spec_tokens.resize(static_cast<size_t>(1 + n));
  if (n > 0 && !kv_.grow(s.blocks, static_cast<int64_t>(s.n_cached) + 1 + n)) return 0;  // room said it fits
  return n;
}

void scheduler::add_drafts(scheduler_output& out, int64_t& budget) {
  const bool speculating = proposer_ && cfg_.num_speculative_tokens > 0 &&
                           !kv_.recurrent() && (cfg_.speculative_disable_by_batch_size <= 0 ||
                            static_cast<int32_t>(running_.size()) <= cfg_.speculative_disable_by_batch_size);
  if (!speculating) return;
  for (scheduled_seq& q : out.seqs) {
    if (budget <= 0) break;
    if (q.n_new != 1 || !q.samples || q.hidden || !q.seq->speculate) continue;
    q.n_draft = plan_drafts(*q.seq, budget);
    q.n_new += q.n_draft;
    out.n_tokens += q.n_draft;
    budget -= q.n_draft;
  }
}

void scheduler::schedule_running(scheduler_output& out, int64_t& budget, bool chunked) {
  for (size_t i = 0; i < running_.size();) {
    sched_seq& s = *running_[i];
    int32_t n_new = s.n_tokens() - s.n_cached;
    // A decode (one token) always runs and does not use the budget, which
    // bounds the prompt tokens of the step; a prompt chunk takes what is left.
    const bool decode = n_new == 1;
    if (!decode) {
      if (budget <= 0) {
        ++i;
        continue;
      }
      if (chunked) n_new = static_cast<int32_t>(std::min<int64_t>(n_new, budget));
      n_new = align_to_blocks(s, s.n_cached, n_new);
    }
    bool self_preempted = false;
    while (!kv_.grow(s.blocks, static_cast<int64_t>(s.n_cached) + n_new)) {
      sched_seq* victim = running_.back();
      running_.pop_back();
      preempt(*victim);
      ++out.n_preempted;
      if (victim == &s) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    push(out, s, n_new);
    if (!decode) budget -= n_new;
    ++i;
  }
}

void scheduler::admit_waiting(scheduler_output& out, int64_t& budget, bool chunked) {
  while (!waiting_.empty() && static_cast<int32_t>(running_.size()) < cfg_.max_num_seqs && budget > 0) {
    sched_seq& s = *waiting_.front();
    const std::span<const int32_t> toks(*s.tokens);
    const int32_t n_hit = s.hidden ? 0 : kv_.probe(toks, s.cache_salt);
    int32_t n_new = s.n_tokens() - n_hit;
    if (chunked) {
      n_new = static_cast<int32_t>(std::min<int64_t>(n_new, budget));
    } else if (n_new > budget && !out.seqs.empty()) {
      break;  // a whole prompt over the budget runs only alone
    }
    n_new = align_to_blocks(s, n_hit, n_new);
    const int32_t got = kv_.admit(toks, n_hit + n_new, s.blocks, s.prefix, !s.hidden, s.cache_salt,
                                  kv_.recurrent() ? &s.state : nullptr);
    if (got < 0) break;  // not enough blocks (or state slots): FIFO, wait for running requests
    s.n_cached = got;
    waiting_.pop_front();
    s.where = sched_seq::state::running;
    running_.push_back(&s);
    push(out, s, n_new);
    budget -= n_new;
  }
}

scheduler_output scheduler::schedule() {
  scheduler_output out;
  int64_t budget = cfg_.max_num_batched_tokens;
  if (cfg_.enable_chunked_prefill) {
    const bool decoding = std::any_of(running_.begin(), running_.end(),
                                      [](const sched_seq* s) { return s->n_tokens() - s->n_cached == 1; });
    if (!decoding) budget = std::max<int64_t>(budget, cfg_.idle_prefill_budget);
    schedule_running(out, budget, true);
    add_drafts(out, budget);
    if (out.n_preempted == 0) admit_waiting(out, budget, true);
    return out;
  }
  // Prefill or decode step.
  const bool can_admit = !waiting_.empty() && static_cast<int32_t>(running_.size()) < cfg_.max_num_seqs;
  if (can_admit && (running_.empty() || prefill_in_row_ < cfg_.max_prefill_steps_in_row)) {
    const bool delays_decodes = !running_.empty();
    admit_waiting(out, budget, false);
    if (!out.seqs.empty()) {
      if (delays_decodes) ++prefill_in_row_;
      return out;
    }
  }
  prefill_in_row_ = 0;
  schedule_running(out, budget, false);  // every running sequence decodes
  add_drafts(out, budget);
  return out;
}

int32_t scheduler::align_to_blocks(const sched_seq& s, int32_t n_past, int32_t n_new) const {
  if (!kv_.recurrent() || n_new <= 1) return n_new;
  const int32_t bs = kv_.block_size();
  const int32_t end = n_past + n_new;
  // Short of the end: back to the last boundary inside the chunk. At the end:
  // back to the tokens' last boundary, the tail in a step of its own.
  const int32_t boundary = end < s.n_tokens() ? end / bs * bs : (end % bs == 0 ? end : end / bs * bs);
  return boundary > n_past ? boundary - n_past : n_new;
}

void scheduler::on_step_done(const scheduler_output& out) {
  for (const auto& q : out.seqs) {
    sched_seq& s = *q.seq;
    if (s.where != sched_seq::state::running || q.n_draft > 0) continue;
    s.n_cached = q.n_past + q.n_new;
    const bool prefill = q.n_new > 1 || !q.samples;
    commit_cached(s, prefill && s.n_cached == s.n_tokens() / kv_.block_size() * kv_.block_size());
  }
}

void scheduler::on_verified(const scheduled_seq& q, int32_t n_accepted) {
  sched_seq& s = *q.seq;
  if (cfg_.speculative_adaptive_k) s.draft_len.on_verified(q.n_draft, n_accepted, cfg_.num_speculative_tokens);
  s.n_cached = q.n_past + 1 + std::clamp(n_accepted, 0, q.n_draft);
  s.blocks.shrink_to(static_cast<int32_t>(kv_block_manager::blocks_for(s.n_cached, kv_.block_size())));
  commit_cached(s);
}

void scheduler::commit_cached(sched_seq& s, bool prompt_end) {
  kv_.commit(std::span<const int32_t>(*s.tokens), s.n_cached, s.blocks, s.prefix, s.cache_salt, &s.state, prompt_end);
  release_outside_window(s);  // after commit: just-completed blocks are registered first
}

void scheduler::release_outside_window(sched_seq& s) {
  if (cfg_.kv_window <= 0) return;
  // The next query is at position n_cached and reads (n_cached - kv_window, n_cached].
  const int64_t first_read = static_cast<int64_t>(s.n_cached) + 1 - cfg_.kv_window;
  if (first_read <= 0) return;
  s.blocks.release_front(static_cast<int32_t>(first_read / kv_.block_size()));
}

void scheduler::finish(sched_seq& s) {
  if (s.where == sched_seq::state::running) {
    running_.erase(std::find(running_.begin(), running_.end(), &s));
  } else if (s.where == sched_seq::state::waiting) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &s));
  }
  kv_.free(s.blocks, s.prefix, &s.state);
  s.where = sched_seq::state::finished;
  if (proposer_) proposer_->release(s.id);
}

}  // namespace spate
