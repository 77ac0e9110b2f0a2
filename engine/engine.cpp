#include "engine/engine_api.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <chrono>
#include <spdlog/spdlog.h>
#include <stdexcept>

#include "engine/buckets.h"
#include "engine/engine_config.h"
#include "engine/kv_block_manager.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "model/forward_executor.h"

namespace spate {
namespace {

using clock_type = std::chrono::steady_clock;

int64_t us_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
}

uint64_t mix_seed(uint64_t base, uint64_t index) {
  uint64_t z = base + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void deliver(const event_callback& cb, const engine_event& ev) {
  try {
    cb(ev);
  } catch (const std::exception& e) {
    spdlog::error("event callback of request {} threw: {}", ev.request_id, e.what());
  } catch (...) {
    spdlog::error("event callback of request {} threw", ev.request_id);
  }
}

}  // namespace

// The engine's state and loop. Engine-thread state is touched only by the
// engine thread (and by the constructor / warmup before it starts); the shared
// state is guarded by mu_.
class engine::impl {
 public:
  impl(forward_executor& exec, const tokenizer& tok, const engine_config& cfg);
  void start();
  submit_result submit(engine_request r);
  void cancel(int64_t id);
  engine_stats stats() const;
  void wait_idle();
  void stop();
  const engine_config& config() const { return cfg_; }

 private:
  struct request_state;
  void warmup();
  void thread_main();
  void drain_inbox();
  void step();
  void account_padding(scheduler_output& out);
  void finish_request(request_state& r, finish_reason why);
  void fail_request(request_state& r, const std::string& msg);
  void publish_stats();

  forward_executor& exec_;
  const tokenizer& tok_;
  engine_config cfg_;
  int32_t n_blocks_ = 0;
  kv_block_manager blocks_;
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

struct engine::impl::request_state {
  request_state(int64_t id, std::vector<int32_t> prompt, const sampling_params& p, uint64_t seed, const tokenizer& tok,
                block_pool& pool, event_callback cb)
      : seq(id, std::move(prompt), p, *p.max_tokens, seed, tok), ss(id, &seq.tokens(), pool), on_event(std::move(cb)) {}
  sequence seq;
  sched_seq ss;
  event_callback on_event;
  clock_type::time_point submitted{}, first_scheduled{}, last_token{};
  bool scheduled_once = false;
  request_usage usage;
  request_metrics metrics;
};

engine::impl::impl(forward_executor& exec, const tokenizer& tok, const engine_config& cfg)
    : exec_(exec), tok_(tok), cfg_(cfg), n_blocks_(exec.n_kv_blocks()),
      blocks_(n_blocks_, exec.block_size(), cfg.enable_prefix_caching), sched_(cfg.sched, blocks_) {
  for (auto [r, name] : {std::pair{&cfg_.buckets.prompt_bs, "prompt bs"}, {&cfg_.buckets.prompt_seq, "prompt seq"},
                         {&cfg_.buckets.decode_bs, "decode bs"}, {&cfg_.buckets.decode_block, "decode block"}}) {
    if (auto err = validate(*r, name); !err.empty()) throw std::invalid_argument("bucket config: " + err);
  }
  if (cfg_.max_queued_requests < 1) throw std::invalid_argument("max_queued_requests must be >= 1");
  prompt_buckets_ = make_buckets(cfg_.buckets.prompt_bs, cfg_.buckets.prompt_seq);
  decode_buckets_ = make_buckets(cfg_.buckets.decode_bs, cfg_.buckets.decode_block);
  local_stats_.n_blocks_total = n_blocks_;
  local_stats_.n_blocks_free = n_blocks_;
  shared_stats_ = local_stats_;
}

void engine::impl::start() {
  spdlog::info("Prompt bucket config (min, step, max_warmup) {}", describe(cfg_.buckets.prompt_bs, cfg_.buckets.prompt_seq, "seq"));
  spdlog::info("Generated {} prompt buckets: {}", prompt_buckets_.size(), describe(prompt_buckets_));
  spdlog::info("Decode bucket config (min, step, max_warmup) {}", describe(cfg_.buckets.decode_bs, cfg_.buckets.decode_block, "block"));
  spdlog::info("Generated {} decode buckets: {}", decode_buckets_.size(), describe(decode_buckets_));
  if (cfg_.skip_warmup) {
    spdlog::info("Skipping warmup (skip_warmup)");
  } else {
    warmup();
  }
  thread_ = std::thread([this] { thread_main(); });
}

void engine::impl::warmup() {
  const auto t0 = clock_type::now();
  const int32_t block_size = exec_.block_size();
  const int32_t max_ctx = cfg_.sched.max_model_len;
  // Workspaces for the largest bucket of either kind, so steady state allocates nothing.
  int64_t max_tokens = 1, max_rows = 1;
  for (const auto& b : prompt_buckets_) {
    max_tokens = std::max<int64_t>(max_tokens, static_cast<int64_t>(b.bs) * b.len);
    max_rows = std::max<int64_t>(max_rows, b.bs);
  }
  for (const auto& b : decode_buckets_) {
    max_tokens = std::max<int64_t>(max_tokens, b.bs);
    max_rows = std::max<int64_t>(max_rows, b.bs);
  }
  exec_.reserve(max_tokens, max_rows, max_ctx);

  block_pool& pool = blocks_.pool();
  std::vector<int32_t> dummy;
  std::vector<float> logits;
  auto run_dummy = [&](int32_t n_seqs, int32_t n_past, int32_t n_new) {
    // Clamp to the model length and the cache so any configuration warms up.
    n_new = std::max(1, std::min(n_new, max_ctx));
    n_past = std::max(0, std::min(n_past, max_ctx - n_new));
    const int64_t per_seq = kv_block_manager::blocks_for(n_past + n_new, block_size);
    n_seqs = static_cast<int32_t>(std::max<int64_t>(1, std::min<int64_t>(n_seqs, pool.n_free() / std::max<int64_t>(1, per_seq))));
    if (per_seq > pool.n_free()) return;
    dummy.assign(static_cast<size_t>(n_new), 1 % exec_.n_vocab());
    std::vector<block_table> tables;
    forward_batch b;
    tables.reserve(static_cast<size_t>(n_seqs));
    for (int32_t i = 0; i < n_seqs; ++i) {
      tables.emplace_back(pool);
      tables.back().grow_to(n_past + n_new, block_size);
    }
    for (int32_t i = 0; i < n_seqs; ++i) b.seqs.push_back({dummy, n_past, tables[static_cast<size_t>(i)].ids(), 1});
    logits.resize(static_cast<size_t>(n_seqs) * static_cast<size_t>(exec_.n_vocab()));
    exec_.forward(b, logits.data());
  };
  const auto n_total = static_cast<int32_t>(prompt_buckets_.size() + decode_buckets_.size());
  for (size_t i = 0; i < prompt_buckets_.size(); ++i) {
    const auto& b = prompt_buckets_[i];
    spdlog::info("[Warmup][Prompt][{}/{}] batch_size:{} seq_len:{}", i + 1, prompt_buckets_.size(), b.bs, b.len);
    run_dummy(b.bs, 0, b.len);
    if (cfg_.on_warmup_progress) cfg_.on_warmup_progress(static_cast<int32_t>(i + 1), n_total);
  }
  for (size_t i = 0; i < decode_buckets_.size(); ++i) {
    const auto& b = decode_buckets_[i];
    spdlog::info("[Warmup][Decode][{}/{}] batch_size:{} num_blocks:{}", i + 1, decode_buckets_.size(), b.bs, b.len);
    const int32_t blocks_per_seq = std::max(1, b.len / b.bs);
    run_dummy(b.bs, blocks_per_seq * block_size - 1, 1);
    if (cfg_.on_warmup_progress) cfg_.on_warmup_progress(static_cast<int32_t>(prompt_buckets_.size() + i + 1), n_total);
  }
  spdlog::info("Warmup finished in {:.2f} s ({} prompt + {} decode buckets)",
               std::chrono::duration<double>(clock_type::now() - t0).count(), prompt_buckets_.size(), decode_buckets_.size());
}

submit_result engine::impl::submit(engine_request r) {
  submit_result res;
  const int32_t n_prompt = static_cast<int32_t>(r.prompt.size());
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
                                            tok_, blocks_.pool(), std::move(r.on_event));
  // request_state only stores a pointer to the pool; blocks are taken on the engine thread.
  st->submitted = clock_type::now();
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
  std::lock_guard lk(mu_);
  return shared_stats_;
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
  if (thread_.joinable()) thread_.join();
}

void engine::impl::thread_main() {
  for (;;) {
    {
      std::unique_lock lk(mu_);
      auto has_work = [&] { return stop_ || !inbox_.empty() || !cancels_.empty() || !sched_.idle(); };
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
  // Every request still in flight (or in the inbox) finishes as aborted, and
  // its blocks return to the pool.
  drain_inbox();
  std::vector<request_state*> left;
  for (auto& [id, r] : live_) left.push_back(r.get());
  for (auto* r : left) finish_request(*r, finish_reason::abort);
}

void engine::impl::drain_inbox() {
  std::deque<std::unique_ptr<request_state>> fresh;
  std::vector<int64_t> cancels;
  {
    std::lock_guard lk(mu_);
    fresh.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (auto& r : fresh) {
    request_state& rs = *r;
    const int64_t id = rs.seq.id();
    live_.emplace(id, std::move(r));
    sched_.add(rs.ss);
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
  scheduler_output out = sched_.schedule();
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
  const auto now0 = clock_type::now();
  for (const auto& q : out.seqs) {
    auto& r = *live_.at(q.seq->id);
    if (!r.scheduled_once) {
      r.scheduled_once = true;
      r.first_scheduled = now0;
      r.metrics.queue_us = us_between(r.submitted, now0);
      r.usage.cached_prompt_tokens = std::min(q.n_past, r.seq.n_prompt());
    }
  }
  const forward_batch batch = out.to_batch();
  const size_t n_vocab = static_cast<size_t>(exec_.n_vocab());
  logits_.resize(static_cast<size_t>(out.n_logit_rows()) * n_vocab);
  try {
    exec_.forward(batch, logits_.data());
  } catch (const std::exception& e) {
    spdlog::error("forward failed: {}", e.what());
    for (const auto& q : out.seqs) fail_request(*live_.at(q.seq->id), std::string("internal error: ") + e.what());
    return;
  }
  ++local_stats_.n_steps;
  sched_.on_step_done(out);

  const auto now = clock_type::now();
  size_t row = 0;
  std::vector<request_state*> done;
  for (const auto& q : out.seqs) {
    if (!q.samples) continue;
    auto& r = *live_.at(q.seq->id);
    std::string delta;
    const auto res = r.seq.sample_next(std::span<float>(logits_.data() + row++ * n_vocab, n_vocab), delta);
    ++local_stats_.generated_tokens;
    if (r.seq.n_generated() == 1) {
      r.metrics.ttft_us = us_between(r.submitted, now);
    } else {
      r.metrics.itl_us.push_back(us_between(r.last_token, now));
    }
    r.last_token = now;
    if (!r.seq.finished() && r.seq.n_tokens() >= cfg_.sched.max_model_len) r.seq.finish_with(finish_reason::length);
    engine_event ev;
    ev.type = engine_event::kind::tokens;
    ev.request_id = r.seq.id();
    ev.token_ids.push_back(res.token);
    if (r.seq.params().logprobs) ev.logprobs.push_back({res.token, res.logprob, res.top_logprobs});
    ev.text = std::move(delta);
    deliver(r.on_event, ev);
    if (r.seq.finished()) done.push_back(&r);
  }
  for (auto* r : done) finish_request(*r, r->seq.finish());
}

void engine::impl::finish_request(request_state& r, finish_reason why) {
  const int64_t id = r.seq.id();
  sched_.finish(r.ss);
  r.usage.prompt_tokens = r.seq.n_prompt();
  r.usage.completion_tokens = r.seq.n_generated();
  r.metrics.n_preemptions = r.ss.n_preemptions;
  local_stats_.prompt_tokens += r.seq.n_prompt();
  ++local_stats_.n_finished;
  engine_event ev;
  ev.type = engine_event::kind::finished;
  ev.request_id = id;
  ev.reason = why;
  ev.usage = r.usage;
  ev.metrics = std::move(r.metrics);
  auto cb = std::move(r.on_event);
  live_.erase(id);  // r is gone from here on
  deliver(cb, ev);
}

void engine::impl::fail_request(request_state& r, const std::string& msg) {
  const int64_t id = r.seq.id();
  sched_.finish(r.ss);
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
  std::lock_guard lk(mu_);
  n_queued_ = sched_.n_waiting() + static_cast<int32_t>(inbox_.size());
  const int64_t rejected = shared_stats_.n_rejected;
  shared_stats_ = local_stats_;
  shared_stats_.n_waiting = n_queued_;
  shared_stats_.n_rejected = rejected;
  if (inbox_.empty() && sched_.idle() && live_.empty() && cancels_.empty()) {
    idle_published_ = true;
    idle_cv_.notify_all();
  }
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

}  // namespace spate
