// The engine's request bookkeeping (submit, cancel, finish, stats) and its
// loop (drain the inbox, schedule, forward, sample, publish). Warmup lives in
// engine_warmup.cpp; the class is declared in engine_impl.h.
#include <algorithm>
#include <cmath>
#include <spdlog/spdlog.h>
#include <stdexcept>

#include "engine/engine_impl.h"
#include "engine/ngram_proposer.h"
#include "util/trace.h"

namespace spate {
namespace {

uint64_t mix_seed(uint64_t base, uint64_t index) {
  uint64_t z = base + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The scheduler's configuration: the user's, plus what the engine derives
// (the executor's KV window, the speculative settings).
scheduler_config scheduler_config_of(const engine_config& cfg, int32_t kv_window) {
  scheduler_config c = cfg.sched;
  c.kv_window = kv_window;
  if (cfg.speculative.enabled()) {
    c.num_speculative_tokens = cfg.speculative.num_speculative_tokens;
    c.speculative_disable_by_batch_size = cfg.speculative.disable_by_batch_size;
    c.speculative_adaptive_k = cfg.speculative.adaptive_k;
  }
  return c;
}

// Checks the speculative settings (std::invalid_argument naming the key) and
// returns the proposer: the configured one, or an ngram_proposer.
std::shared_ptr<draft_proposer> make_proposer(const speculative_config& c) {
  if (!c.enabled()) return nullptr;
  auto fail = [](const std::string& what) { throw std::invalid_argument("speculative_config: " + what); };
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > k_max_speculative_tokens) {
    fail("num_speculative_tokens must be in [1, " + std::to_string(k_max_speculative_tokens) + "], got " +
         std::to_string(c.num_speculative_tokens));
  }
  if (c.disable_by_batch_size < 0) fail("disable_by_batch_size must be >= 0, got " + std::to_string(c.disable_by_batch_size));
  if (c.proposer) return c.proposer;
  if (c.kind != speculative_config::method::ngram) fail("the draft model was not loaded");
  if (c.prompt_lookup_min < 1) fail("prompt_lookup_min must be >= 1, got " + std::to_string(c.prompt_lookup_min));
  if (c.prompt_lookup_max < c.prompt_lookup_min) {
    fail("prompt_lookup_max (" + std::to_string(c.prompt_lookup_max) + ") must be >= prompt_lookup_min (" +
         std::to_string(c.prompt_lookup_min) + ")");
  }
  return std::make_shared<ngram_proposer>(c.prompt_lookup_min, c.prompt_lookup_max);
}

}  // namespace

void deliver(const event_callback& cb, const engine_event& ev) {
  try {
    cb(ev);
  } catch (const std::exception& e) {
    spdlog::error("event callback of request {} threw: {}", ev.request_id, e.what());
  } catch (...) {
    spdlog::error("event callback of request {} threw", ev.request_id);
  }
}

engine::impl::impl(forward_executor& exec, const tokenizer& tok, const engine_config& cfg)
    : exec_(exec), tok_(tok), cfg_(cfg), n_blocks_(exec.n_kv_blocks()), proposer_(make_proposer(cfg.speculative)),
      blocks_(n_blocks_, exec.block_size(), cfg.enable_prefix_caching, exec.n_state_slots()),
      sched_(scheduler_config_of(cfg, exec.kv_window()), blocks_, proposer_.get()) {
  for (auto [r, name] : {std::pair{&cfg_.buckets.prompt_bs, "prompt bs"}, {&cfg_.buckets.prompt_seq, "prompt seq"},
                         {&cfg_.buckets.decode_bs, "decode bs"}, {&cfg_.buckets.decode_block, "decode block"}}) {
    if (auto err = validate(*r, name); !err.empty()) throw std::invalid_argument("bucket config: " + err);
  }
  if (cfg_.max_queued_requests < 1) throw std::invalid_argument("max_queued_requests must be >= 1");
  if (proposer_ && blocks_.recurrent())
    throw std::invalid_argument("speculative decoding is not supported for a model with recurrent layers (a rejected draft "
                                "cannot be taken back out of their state)");
  prompt_buckets_ = make_buckets(cfg_.buckets.prompt_bs, cfg_.buckets.prompt_seq);
  decode_buckets_ = make_buckets(cfg_.buckets.decode_bs, cfg_.buckets.decode_block);
  local_stats_.n_blocks_total = n_blocks_;
  local_stats_.n_blocks_free = n_blocks_;
  shared_stats_ = local_stats_;
  open_disk_tier();
}

void engine::impl::start() {
  log_buckets();
  if (cfg_.skip_warmup) {
    spdlog::info("Skipping warmup (skip_warmup)");
  } else {
    warmup();
    if (cfg_.sched.auto_batched_tokens() && cfg_.sched.enable_chunked_prefill) sched_.set_max_num_batched_tokens(measure_prefill_budget());
  }
  blocks_.set_track_committed(disk_ != nullptr);  // from here on: warmup's dummy blocks are not written
  started_ = true;
  thread_ = std::thread([this] { thread_main(); });
}

submit_result engine::impl::submit(engine_request r) {
  submit_result res;
  const int32_t n_prompt = static_cast<int32_t>(r.prompt.size());
  if (r.embed != pooling_type::none) r.params.max_tokens = 1;  // nothing is generated; the prompt needs a free position
  if (!r.params.max_tokens) {
    res.error = "max_tokens must be set";
  } else if (!r.on_event) {
    res.error = "no event callback";
  } else {
    for (int32_t t : r.prompt) {
      if (t < 0 || t >= exec_.n_vocab()) {
        res.error = "prompt token id " + std::to_string(t) + " out of range";
        break;
      }
    }
    // check_admissible reads only immutable configuration: safe off the engine thread.
    if (res.error.empty()) {
      res.error = sched_.check_admissible(n_prompt, *r.params.max_tokens);
      if (!res.error.empty()) res.why = submit_result::refusal::context_length;
    } else {
      res.why = submit_result::refusal::invalid;
    }
  }
  if (!res.error.empty()) {
    if (res.why == submit_result::refusal::none) res.why = submit_result::refusal::invalid;
    std::lock_guard lk(mu_);
    ++shared_stats_.n_rejected;
    return res;
  }
  // Built outside the lock (the sequence scans the vocabulary); the id is
  // burned if the request is then refused.
  const int64_t id = next_id_.fetch_add(1);
  auto st = std::make_unique<request_state>(id, std::move(r.prompt), r.params, mix_seed(cfg_.seed, static_cast<uint64_t>(id)),
                                            tok_, blocks_.pool(), blocks_.state_pool(), std::move(r.on_event));
  // request_state only stores a pointer to the pool; blocks are taken on the engine thread.
  st->submitted = clock_type::now();
  st->embed = r.embed;
  st->ss.hidden = r.embed != pooling_type::none;
  st->ss.max_len = n_prompt + *r.params.max_tokens;
  st->ss.speculate = r.params.speculative && !st->ss.hidden;
  st->ss.adapter = r.adapter;
  st->ss.cache_salt = r.cache_salt;
  std::lock_guard lk(mu_);
  if (stop_) {
    res.error = "the engine is stopped";
    res.why = submit_result::refusal::stopped;
  } else if (n_queued_ >= cfg_.max_queued_requests) {
    res.error = "too many queued requests (" + std::to_string(cfg_.max_queued_requests) + "); try again later";
    res.why = submit_result::refusal::queue_full;
  }
  if (!res.error.empty()) {
    ++shared_stats_.n_rejected;
    return res;
  }
  inbox_.push_back(std::move(st));
  idle_published_ = false;
  ++n_queued_;
  ++shared_stats_.n_waiting;
  cv_.notify_one();
  res.id = id;
  return res;
}

void engine::impl::cancel(int64_t id) {
  std::lock_guard lk(mu_);
  cancels_.push_back(id);
  cv_.notify_one();
}

engine_stats engine::impl::stats() const {
  engine_stats s;
  {
    std::lock_guard lk(mu_);
    s = shared_stats_;
  }
  if (disk_) {  // the I/O thread's counters move while the engine sleeps: read them now
    const kv_disk_stats d = disk_->stats();
    s.kv_disk_read_bytes = d.read_bytes;
    s.kv_disk_written_bytes = d.written_bytes;
    s.kv_disk_evictions = d.n_evictions;
    s.kv_disk_errors = d.n_errors;
    s.kv_disk_dropped = d.n_dropped;
    s.kv_disk_usage_bytes = d.usage_bytes;
  }
  return s;
}

void engine::impl::wait_idle() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [&] { return idle_published_ || stop_; });
}

void engine::impl::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    cv_.notify_one();
    idle_cv_.notify_all();
  }
  if (thread_.joinable()) {
    thread_.join();
  } else if (!started_) {
    // No engine thread ever ran: what was submitted finishes here.
    abort_all();
  }
}

void engine::impl::thread_main() {
  trace::set_thread_name("engine");
  for (;;) {
    {
      std::unique_lock lk(mu_);
      auto has_work = [&] { return stop_ || !inbox_.empty() || !cancels_.empty() || !disk_done_.empty() || !sched_.idle(); };
      if (cfg_.heartbeat_interval_us > 0 && cfg_.on_heartbeat) {
        // Idle: wake up for the heartbeat only.
        while (!has_work()) {
          if (!cv_.wait_for(lk, std::chrono::microseconds(cfg_.heartbeat_interval_us), has_work)) {
            lk.unlock();
            cfg_.on_heartbeat();
            lk.lock();
          }
        }
      } else {
        cv_.wait(lk, has_work);
      }
      if (stop_) break;
    }
    drain_inbox();
    if (!sched_.idle()) step();
    publish_stats();
    if (cfg_.on_heartbeat) cfg_.on_heartbeat();
  }
  abort_all();
}

// Every request still in flight (or in the inbox) finishes as aborted, its
// blocks return to the pool, and the stats snapshot shows it.
void engine::impl::abort_all() {
  drain_inbox();
  std::vector<request_state*> left;
  for (auto& [id, r] : live_) left.push_back(r.get());
  for (auto* r : left) finish_request(*r, finish_reason::abort);
  publish_stats();
}

void engine::impl::drain_inbox() {
  std::deque<std::unique_ptr<request_state>> fresh;
  std::vector<int64_t> cancels;
  {
    std::lock_guard lk(mu_);
    fresh.swap(inbox_);
    cancels.swap(cancels_);
  }
  install_disk_reads();
  for (auto& r : fresh) {
    request_state& rs = *r;
    const int64_t id = rs.seq.id();
    live_.emplace(id, std::move(r));
    if (!start_disk_read(rs)) sched_.add(rs.ss);
  }
  for (int64_t id : cancels) {
    auto it = live_.find(id);
    if (it != live_.end()) finish_request(*it->second, finish_reason::abort);
  }
}

void engine::impl::account_padding(scheduler_output& out) {
  if (out.seqs.empty()) return;
  const auto n_seqs = static_cast<int32_t>(out.seqs.size());
  if (out.prefill_step) {
    int32_t longest = 0;
    for (const auto& q : out.seqs) longest = std::max(longest, q.n_new);
    out.padded_to = find_bucket(prompt_buckets_, n_seqs, longest);
    if (out.padded_to) {
      out.n_padding_tokens = static_cast<int64_t>(out.padded_to->bs) * out.padded_to->len - out.n_tokens;
    } else if (!warned_prompt_overflow_) {
      warned_prompt_overflow_ = true;
      spdlog::warn("prefill step (batch_size:{} seq_len:{}) is beyond the largest prompt bucket; running it unpadded", n_seqs, longest);
    }
  } else {
    int32_t n_blocks = 0;
    for (const auto& q : out.seqs) n_blocks += q.seq->blocks.n_blocks();
    out.padded_to = find_bucket(decode_buckets_, n_seqs, n_blocks);
    if (out.padded_to) {
      out.n_padding_tokens = out.padded_to->bs - out.n_tokens;
    } else if (!warned_decode_overflow_) {
      warned_decode_overflow_ = true;
      spdlog::warn("decode step (batch_size:{} num_blocks:{}) is beyond the largest decode bucket; running it unpadded", n_seqs, n_blocks);
    }
  }
  local_stats_.padding_waste_tokens += out.n_padding_tokens;
}

void engine::impl::step() {
  // Profiler spans (util/trace.h): the step, and inside it schedule, forward
  // (the runner adds layer groups and ops), sample and deliver.
  trace::scoped_span step_span("step", "engine");
  scheduler_output out;
  {
    trace::scoped_span span("schedule", "engine");
    out = sched_.schedule();
  }
  run_state_ops();  // admitted sequences' working states: zeroed or copied from a checkpoint
  local_stats_.n_preemptions += out.n_preempted;
  if (out.seqs.empty()) {
    // With no preemption this means nothing runs and the head of the queue
    // cannot be admitted, which admission checks rule out; fail it rather
    // than spin.
    if (out.n_preempted == 0 && sched_.n_running() == 0) {
      if (sched_seq* head = sched_.front_waiting()) {
        fail_request(*live_.at(head->id), "the request cannot be scheduled in the KV cache");
      }
    }
    return;
  }
  account_padding(out);
  step_span.add("prefill", out.prefill_step ? 1 : 0);
  step_span.add("batch_size", static_cast<int64_t>(out.seqs.size()));
  step_span.add("tokens", out.n_tokens);
  step_span.add("bucket_bs", out.padded_to ? out.padded_to->bs : 0);
  step_span.add("bucket_len", out.padded_to ? out.padded_to->len : 0);
  step_span.add("kv_blocks_used", blocks_.n_total_blocks() - blocks_.n_free_blocks());
  note_first_scheduled(out);
  const forward_batch batch = out.to_batch();
  logits_.resize(static_cast<size_t>(out.n_logit_rows()) * static_cast<size_t>(exec_.n_vocab()));
  hidden_.resize(static_cast<size_t>(out.n_hidden_rows()) * static_cast<size_t>(exec_.n_embd()));
  try {
    trace::scoped_span span("forward", "engine");
    exec_.forward(batch, logits_.data(), hidden_.data());
  } catch (const std::exception& e) {
    spdlog::error("forward failed: {}", e.what());
    for (const auto& q : out.seqs) fail_request(*live_.at(q.id), std::string("internal error: ") + e.what());
    return;
  }
  ++local_stats_.n_steps;
  count_step_tokens(out.n_tokens);
  sched_.on_step_done(out);
  run_state_ops();  // checkpoints of this step's states, before sampling can finish a sequence
  pool_embeddings(out);
  sample_and_deliver(out);
  save_committed_blocks();
}

void engine::impl::run_state_ops() {
  for (const state_op& op : blocks_.take_state_ops()) {
    if (op.src == state_op::k_zero_state) {
      exec_.zero_state(op.dst);
    } else {
      exec_.copy_state(op.src, op.dst);
    }
    if (op.release >= 0) blocks_.release_state(op.release);
  }
}

void engine::impl::count_step_tokens(int64_t n_tokens) {
  const auto& b = k_step_token_bounds;
  const size_t i = static_cast<size_t>(std::lower_bound(b.begin(), b.end(), n_tokens) - b.begin());
  ++local_stats_.step_tokens_buckets[i];
  local_stats_.step_tokens_sum += n_tokens;
}

// Queue time and prefix-cache hits are taken when a request is first scheduled.
void engine::impl::note_first_scheduled(const scheduler_output& out) {
  const auto now = clock_type::now();
  for (const auto& q : out.seqs) {
    auto& r = *live_.at(q.id);
    if (!r.scheduled_once) {
      r.scheduled_once = true;
      r.first_scheduled = now;
      r.metrics.queue_us = us_between(r.submitted, now);
      r.usage.cached_prompt_tokens = std::min(q.n_past, r.seq.n_prompt());
    }
  }
}

void engine::impl::finish_request(request_state& r, finish_reason why) {
  const int64_t id = r.seq.id();
  sched_.finish(r.ss);
  if (r.disk_loading) --n_disk_loading_;  // its read's result is dropped (install_disk_reads finds no request)
  r.usage.prompt_tokens = r.seq.n_prompt();
  r.usage.completion_tokens = r.seq.n_generated();
  r.metrics.n_preemptions = r.ss.n_preemptions;
  local_stats_.prompt_tokens += r.seq.n_prompt();
  ++local_stats_.n_finished;
  engine_event ev;
  ev.type = engine_event::kind::finished;
  ev.request_id = id;
  ev.reason = why;
  if (why == finish_reason::stop) {
    if (const auto i = r.seq.stop_index()) ev.stop_index = static_cast<int32_t>(*i);
  }
  ev.usage = r.usage;
  ev.metrics = std::move(r.metrics);
  if (r.embed != pooling_type::none && why == finish_reason::stop) ev.embedding = std::move(r.pooled);
  auto cb = std::move(r.on_event);
  live_.erase(id);  // r is gone from here on
  deliver(cb, ev);
}

void engine::impl::fail_request(request_state& r, const std::string& msg) {
  const int64_t id = r.seq.id();
  sched_.finish(r.ss);
  if (r.disk_loading) --n_disk_loading_;  // its read's result is dropped (install_disk_reads finds no request)
  engine_event ev;
  ev.type = engine_event::kind::error;
  ev.request_id = id;
  ev.error = msg;
  ev.usage.prompt_tokens = r.seq.n_prompt();
  ev.usage.completion_tokens = r.seq.n_generated();
  auto cb = std::move(r.on_event);
  live_.erase(id);
  deliver(cb, ev);
}

void engine::impl::publish_stats() {
  local_stats_.n_running = sched_.n_running();
  local_stats_.n_blocks_free = blocks_.n_free_blocks();
  local_stats_.kv_usage = 1.0 - static_cast<double>(local_stats_.n_blocks_free) / static_cast<double>(n_blocks_);
  local_stats_.prefix_cache_queries = blocks_.stats().n_query_tokens;
  local_stats_.prefix_cache_hits = blocks_.stats().n_hit_tokens;
  local_stats_.kv_disk_hits = n_disk_hits_;
  local_stats_.kv_disk_misses = n_disk_misses_;
  std::lock_guard lk(mu_);
  n_queued_ = sched_.n_waiting() + n_disk_loading_ + static_cast<int32_t>(inbox_.size());
  const int64_t rejected = shared_stats_.n_rejected;
  shared_stats_ = local_stats_;
  shared_stats_.n_waiting = n_queued_;
  shared_stats_.n_rejected = rejected;
  if (inbox_.empty() && sched_.idle() && live_.empty() && cancels_.empty()) {
    idle_published_ = true;
    idle_cv_.notify_all();
  }
}

const char* pooling_name(pooling_type p) {
  switch (p) {
    case pooling_type::mean: return "mean";
    case pooling_type::cls: return "cls";
    case pooling_type::last: return "last";
    case pooling_type::none: break;
  }
  return "none";
}

// The public face forwards to the implementation.
engine::engine(forward_executor& exec, const tokenizer& tok, const engine_config& cfg)
    : impl_(std::make_unique<impl>(exec, tok, cfg)) {}
engine::~engine() { impl_->stop(); }
void engine::start() { impl_->start(); }
submit_result engine::submit(engine_request r) { return impl_->submit(std::move(r)); }
void engine::cancel(int64_t id) { impl_->cancel(id); }
engine_stats engine::stats() const { return impl_->stats(); }
void engine::wait_idle() { impl_->wait_idle(); }
void engine::stop() { impl_->stop(); }
const engine_config& engine::config() const { return impl_->config(); }

int32_t engine::max_queued_requests() const { return impl_->config().max_queued_requests; }

}  // namespace spate
