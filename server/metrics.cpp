#include "server/metrics.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <mutex>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "engine/engine_api.h"

namespace spate {
namespace {

constexpr auto k_relaxed = std::memory_order_relaxed;

// Raises a cumulative counter to v, never lowering it: two scrapes racing with
// snapshots of different ages must not make a counter go backwards.
void raise_to(std::atomic<uint64_t>& c, int64_t v) {
  const uint64_t u = v > 0 ? static_cast<uint64_t>(v) : 0;
  uint64_t cur = c.load(k_relaxed);
  while (cur < u && !c.compare_exchange_weak(cur, u, k_relaxed)) {
  }
}

// A sample value as Prometheus clients print it: shortest round-trip decimal,
// with ".0" on integral values ("1.0", "0.005", "2560.0"), "+Inf", "-Inf", "NaN".
std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// Label values escape backslash, double quote and newline.
std::string escape_label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

using labels = std::vector<std::pair<std::string_view, std::string>>;

class metrics_writer_impl {
 public:
  explicit metrics_writer_impl(std::string model_name) : model_name_(std::move(model_name)) {}
  void set_model(std::string model_name) { model_name_ = std::move(model_name); }

  // Starts (or, for a family an earlier model wrote, continues) a family:
  // several models' samples share one # HELP / # TYPE block.
  void family(std::string_view name, std::string_view type, std::string_view help) {
    for (size_t i = 0; i < blocks_.size(); ++i) {
      if (blocks_[i].first == name) {
        current_ = i;
        return;
      }
    }
    blocks_.emplace_back(std::string(name), std::string());
    current_ = blocks_.size() - 1;
    std::string& out_ = blocks_[current_].second;
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;  // help texts below contain no backslash or newline
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void sample(std::string_view name, const labels& extra, const std::string& value) {
    std::string& out_ = blocks_[current_].second;
    out_ += name;
    labels all;
    if (!model_name_.empty()) all.emplace_back("model_name", model_name_);
    all.insert(all.end(), extra.begin(), extra.end());
    if (!all.empty()) {
      out_ += '{';
      for (size_t i = 0; i < all.size(); ++i) {
        if (i) out_ += ',';
        out_ += all[i].first;
        out_ += "=\"";
        out_ += escape_label(all[i].second);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  void counter(std::string_view name, std::string_view help, uint64_t v) {
    family(name, "counter", help);
    sample(name, {}, std::to_string(v));
  }
  void gauge(std::string_view name, std::string_view help, double v) {
    family(name, "gauge", help);
    sample(name, {}, format_value(v));
  }
  void hist(std::string_view name, std::string_view help, const histogram& h) {
    family(name, "histogram", help);
    const histogram::snapshot s = h.snap();
    const std::string bucket = std::string(name) + "_bucket";
    const auto& bounds = h.upper_bounds();
    for (size_t i = 0; i < bounds.size(); ++i) sample(bucket, {{"le", format_value(bounds[i])}}, std::to_string(s.cumulative[i]));
    sample(bucket, {{"le", "+Inf"}}, std::to_string(s.count));
    sample(std::string(name) + "_sum", {}, format_value(s.sum));
    sample(std::string(name) + "_count", {}, std::to_string(s.count));
  }
  // A histogram from per-bucket (non-cumulative) counts, the last one +Inf.
  template <size_t N, class Bounds>
  void counts_hist(std::string_view name, std::string_view help, const Bounds& bounds,
                   const std::array<std::atomic<uint64_t>, N>& counts, double sum) {
    family(name, "histogram", help);
    const std::string bucket = std::string(name) + "_bucket";
    uint64_t acc = 0;
    for (size_t i = 0; i < bounds.size(); ++i) {
      acc += counts[i].load(k_relaxed);
      sample(bucket, {{"le", format_value(static_cast<double>(bounds[i]))}}, std::to_string(acc));
    }
    acc += counts[N - 1].load(k_relaxed);
    sample(bucket, {{"le", "+Inf"}}, std::to_string(acc));
    sample(std::string(name) + "_sum", {}, format_value(sum));
    sample(std::string(name) + "_count", {}, std::to_string(acc));
  }
  std::string take() {
    std::string out;
    for (auto& b : blocks_) out += b.second;
    blocks_.clear();
    return out;
  }

 private:
  std::string model_name_;
  std::vector<std::pair<std::string, std::string>> blocks_;  // family name, its text
  size_t current_ = 0;
};

constexpr std::array<std::string_view, 3> k_success_reasons = {"stop", "length", "abort"};
constexpr std::array<std::string_view, 4> k_reject_reasons = {"invalid", "context_length", "queue_full", "other"};
constexpr std::array<std::string_view, 4> k_apis = {"openai", "anthropic", "ollama", "tgi"};
constexpr std::array<std::string_view, 4> k_unload_reasons = {"idle", "capacity", "memory", "request"};

}  // namespace

class metrics_writer : public metrics_writer_impl {
 public:
  using metrics_writer_impl::metrics_writer_impl;
};

histogram::histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && !(bounds_[i] > bounds_[i - 1])))
      throw std::invalid_argument("histogram bounds must be finite and strictly increasing");
  }
  counts_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, k_relaxed);
}

void histogram::observe(double v) {
  if (std::isnan(v)) return;
  // Bucket i counts v <= bounds_[i] (Prometheus "le"); past the last bound, +Inf.
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  counts_[i].fetch_add(1, k_relaxed);
  sum_.fetch_add(v, k_relaxed);
}

histogram::snapshot histogram::snap() const {
  snapshot s;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t acc = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    acc += counts_[i].load(k_relaxed);
    s.cumulative[i] = acc;
  }
  s.count = acc;
  s.sum = sum_.load(k_relaxed);
  return s;
}

// Time to first token: from 1 ms (cached prompt, tiny model) to 40+ minutes (long queue).
const std::vector<double>& ttft_buckets_s() {
  static const std::vector<double> b = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,   0.75,
                                        1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
  return b;
}

// Gaps between consecutive tokens of one request: 1 ms (small model, small batch) to 80 s (preempted).
const std::vector<double>& itl_buckets_s() {
  static const std::vector<double> b = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
                                        0.4,   0.5,    0.75,  1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0};
  return b;
}

// End-to-end latency and queue time: 1 ms (an immediately scheduled request) to about two hours.
const std::vector<double>& request_latency_buckets_s() {
  static const std::vector<double> b = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1,  0.3,  0.5,   0.8,   1.0,   1.5,   2.0,
                                        2.5,   5.0,   10.0, 15.0,  20.0, 30.0, 40.0, 50.0,  60.0,  120.0, 240.0, 480.0,
                                        960.0, 1920.0, 7680.0};
  return b;
}

std::vector<double> one_two_five_buckets(double max_value) {
  std::vector<double> v;
  for (double decade = 1; decade <= max_value; decade *= 10) {
    for (double m : {1.0, 2.0, 5.0})
      if (m * decade <= max_value) v.push_back(m * decade);
  }
  return v;
}

// Token counts per request: 1-2-5 steps from 1 to 1,000,000.
const std::vector<double>& token_count_buckets() {
  static const std::vector<double> b = one_two_five_buckets(1e6);
  return b;
}

struct server_metrics::state {
  explicit state(int32_t max_model_len)
      : max_tokens_param(one_two_five_buckets(max_model_len > 0 ? static_cast<double>(max_model_len) : 1e6)) {}
  std::atomic<double> running{0}, waiting{0}, kv_usage{0};
  std::atomic<uint64_t> prefix_queries{0}, prefix_hits{0}, preemptions{0}, padding_waste{0}, steps{0};
  std::atomic<uint64_t> disk_hits{0}, disk_misses{0}, disk_read_bytes{0}, disk_written_bytes{0}, disk_evictions{0},
      disk_errors{0}, disk_dropped{0};
  std::atomic<double> disk_usage{0};
  std::atomic<uint64_t> prompt_tokens{0}, generation_tokens{0};
  std::array<std::atomic<uint64_t>, k_success_reasons.size()> success{};
  std::atomic<uint64_t> cancelled{0}, errors{0};
  std::array<std::atomic<uint64_t>, k_reject_reasons.size()> rejected{};
  histogram ttft{ttft_buckets_s()};
  histogram itl{itl_buckets_s()};
  histogram e2e{request_latency_buckets_s()};
  histogram queue{request_latency_buckets_s()};
  histogram prefill{request_latency_buckets_s()};
  histogram decode{request_latency_buckets_s()};
  histogram prompt_len{token_count_buckets()};
  histogram generation_len{token_count_buckets()};
  histogram n_param{{1, 2, 5, 10, 20}};  // vLLM's request_params_n buckets
  histogram max_tokens_param;
  std::array<std::atomic<uint64_t>, k_step_token_bounds.size() + 1> step_tokens{};
  std::atomic<uint64_t> step_tokens_sum{0};
  std::array<std::atomic<uint64_t>, k_apis.size()> api_requests{};
  std::atomic<double> loaded{0};
  histogram load_seconds{{0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300}};
  std::array<std::atomic<uint64_t>, k_unload_reasons.size()> unloads{};
  mutable std::mutex config_mu;                                    // guards cache_config (set at a model's load)
  std::vector<std::pair<std::string, std::string>> cache_config;
  std::vector<std::pair<std::string, std::string>> lora_info;  // empty: no LoRA
  double lora_info_time = 0;
  std::atomic<int32_t> n_spec_tokens{0};
  std::atomic<uint64_t> spec_drafts{0}, spec_draft_tokens{0}, spec_accepted{0};
  std::array<std::atomic<uint64_t>, k_max_speculative_tokens> spec_accepted_per_pos{};
};

server_metrics::server_metrics(std::string model_name, int32_t max_model_len)
    : model_name_(std::move(model_name)), s_(std::make_unique<state>(max_model_len)) {}

server_metrics::~server_metrics() = default;

void server_metrics::update_from_engine(const engine_stats& st) {
  s_->running.store(st.n_running, k_relaxed);
  s_->waiting.store(st.n_waiting, k_relaxed);
  s_->kv_usage.store(std::clamp(st.kv_usage, 0.0, 1.0), k_relaxed);
  raise_to(s_->prefix_queries, st.prefix_cache_queries);
  raise_to(s_->prefix_hits, st.prefix_cache_hits);
  raise_to(s_->disk_hits, st.kv_disk_hits);
  raise_to(s_->disk_misses, st.kv_disk_misses);
  raise_to(s_->disk_read_bytes, st.kv_disk_read_bytes);
  raise_to(s_->disk_written_bytes, st.kv_disk_written_bytes);
  raise_to(s_->disk_evictions, st.kv_disk_evictions);
  raise_to(s_->disk_errors, st.kv_disk_errors);
  raise_to(s_->disk_dropped, st.kv_disk_dropped);
  s_->disk_usage.store(static_cast<double>(st.kv_disk_usage_bytes), k_relaxed);
  raise_to(s_->preemptions, st.n_preemptions);
  raise_to(s_->padding_waste, st.padding_waste_tokens);
  raise_to(s_->steps, st.n_steps);
  for (size_t i = 0; i < st.step_tokens_buckets.size(); ++i) raise_to(s_->step_tokens[i], st.step_tokens_buckets[i]);
  raise_to(s_->step_tokens_sum, st.step_tokens_sum);
  raise_to(s_->spec_drafts, st.spec_num_drafts);
  raise_to(s_->spec_draft_tokens, st.spec_num_draft_tokens);
  raise_to(s_->spec_accepted, st.spec_num_accepted_tokens);
  for (size_t i = 0; i < st.spec_accepted_per_pos.size(); ++i) raise_to(s_->spec_accepted_per_pos[i], st.spec_accepted_per_pos[i]);
}

void server_metrics::set_num_speculative_tokens(int32_t k) {
  s_->n_spec_tokens = std::clamp<int32_t>(k, 0, static_cast<int32_t>(s_->spec_accepted_per_pos.size()));
}

void server_metrics::set_cache_config(std::vector<std::pair<std::string, std::string>> labels) {
  std::lock_guard lock(s_->config_mu);
  s_->cache_config = std::move(labels);
}

void server_metrics::observe_finished(const engine_event& e, double e2e_s) {
  const int32_t n_prompt = std::max(0, e.usage.prompt_tokens);
  const int32_t n_gen = std::max(0, e.usage.completion_tokens);
  s_->prompt_tokens.fetch_add(static_cast<uint64_t>(n_prompt), k_relaxed);
  switch (e.reason) {
    case finish_reason::stop: s_->success[0].fetch_add(1, k_relaxed); break;
    case finish_reason::length: s_->success[1].fetch_add(1, k_relaxed); break;
    case finish_reason::abort: s_->success[2].fetch_add(1, k_relaxed); break;
    case finish_reason::error: s_->errors.fetch_add(1, k_relaxed); break;
    case finish_reason::none: break;
  }
  s_->prompt_len.observe(n_prompt);
  s_->generation_len.observe(n_gen);
  const auto secs = [](int64_t us) { return static_cast<double>(std::max<int64_t>(us, 0)) * 1e-6; };
  // A request aborted while waiting was never scheduled and has no queue time or TTFT.
  if (n_gen > 0 || e.metrics.queue_us > 0) s_->queue.observe(secs(e.metrics.queue_us));
  if (n_gen > 0) {
    s_->ttft.observe(secs(e.metrics.ttft_us));
    s_->prefill.observe(secs(e.metrics.ttft_us - e.metrics.queue_us));
  }
  int64_t decode_us = 0;
  for (int64_t gap : e.metrics.itl_us) {
    s_->itl.observe(secs(gap));
    decode_us += std::max<int64_t>(gap, 0);
  }
  if (n_gen > 0) s_->decode.observe(secs(decode_us));
  s_->e2e.observe(std::max(0.0, e2e_s));
}

void server_metrics::count_generated_tokens(int64_t n_tokens) {
  if (n_tokens > 0) s_->generation_tokens.fetch_add(static_cast<uint64_t>(n_tokens), k_relaxed);
}

void server_metrics::observe_request_params(int32_t n_prompts, int32_t n, int32_t max_tokens) {
  for (int32_t p = 0; p < n_prompts; ++p) {
    s_->n_param.observe(n);
    for (int32_t c = 0; c < n; ++c) s_->max_tokens_param.observe(max_tokens);
  }
}

void server_metrics::count_cancelled() { s_->cancelled.fetch_add(1, k_relaxed); }

void server_metrics::count_rejected(std::string_view reason) {
  size_t i = k_reject_reasons.size() - 1;  // "other"
  for (size_t j = 0; j < k_reject_reasons.size(); ++j)
    if (k_reject_reasons[j] == reason) i = j;
  s_->rejected[i].fetch_add(1, k_relaxed);
}

void server_metrics::count_error() { s_->errors.fetch_add(1, k_relaxed); }

void server_metrics::set_lora_info(std::string running, std::string waiting, int32_t max_lora, double unix_s) {
  std::lock_guard lock(s_->config_mu);
  s_->lora_info = {{"running_lora_adapters", std::move(running)}, {"waiting_lora_adapters", std::move(waiting)},
                   {"max_lora", std::to_string(max_lora)}};
  s_->lora_info_time = unix_s;
}

void server_metrics::count_api_request(std::string_view api) {
  for (size_t i = 0; i < k_apis.size(); ++i)
    if (k_apis[i] == api) s_->api_requests[i].fetch_add(1, k_relaxed);
}

void server_metrics::set_loaded(bool loaded) { s_->loaded.store(loaded ? 1.0 : 0.0, k_relaxed); }

void server_metrics::observe_load(double seconds) { s_->load_seconds.observe(seconds); }

void server_metrics::count_unload(std::string_view reason) {
  for (size_t i = 0; i < k_unload_reasons.size(); ++i)
    if (k_unload_reasons[i] == reason) s_->unloads[i].fetch_add(1, k_relaxed);
}

std::string server_metrics::render_prometheus() const {
  metrics_writer w(model_name_);
  render_into(w);
  return w.take();
}

std::string server_metrics::render_all(const std::vector<server_metrics*>& all) {
  metrics_writer w("");
  for (const server_metrics* m : all) {
    w.set_model(m->model_name_);
    m->render_into(w);
  }
  return w.take();
}

void server_metrics::render_into(metrics_writer& w) const {
  const state& s = *s_;
  w.gauge("spate:num_requests_running", "Number of requests in the running batch.", s.running.load(k_relaxed));
  w.gauge("spate:num_requests_waiting", "Number of requests waiting to be scheduled.", s.waiting.load(k_relaxed));
  w.gauge("spate:kv_cache_usage_perc", "Fraction of KV cache blocks in use (0 to 1).", s.kv_usage.load(k_relaxed));
  w.counter("spate:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
            s.prefix_queries.load(k_relaxed));
  w.counter("spate:prefix_cache_hits_total", "Prompt tokens served by the prefix cache.", s.prefix_hits.load(k_relaxed));
  w.counter("spate:kv_disk_hits_total", "KV blocks reloaded from the prefix cache's disk tier (--kv-cache-dir).",
            s.disk_hits.load(k_relaxed));
  w.counter("spate:kv_disk_misses_total", "KV blocks of prompts that missed memory and the disk tier (recomputed).",
            s.disk_misses.load(k_relaxed));
  w.counter("spate:kv_disk_read_bytes_total", "Bytes of block files read and verified by the disk tier.",
            s.disk_read_bytes.load(k_relaxed));
  w.counter("spate:kv_disk_written_bytes_total", "Bytes of block files written by the disk tier.",
            s.disk_written_bytes.load(k_relaxed));
  w.counter("spate:kv_disk_evictions_total", "Block files deleted to stay within --kv-cache-disk-bytes.",
            s.disk_evictions.load(k_relaxed));
  w.counter("spate:kv_disk_errors_total", "Disk tier errors: bad block files (corrupt, truncated, foreign) and failed reads or writes.",
            s.disk_errors.load(k_relaxed));
  w.counter("spate:kv_disk_dropped_blocks_total",
            "Blocks not written to the disk tier: writing is off (full or read-only disk) or 128 MiB already wait to be written.",
            s.disk_dropped.load(k_relaxed));
  w.gauge("spate:kv_disk_usage_bytes", "Bytes of the disk tier's block files.", s.disk_usage.load(k_relaxed));
  w.counter("spate:num_preemptions_total", "Requests preempted (recomputed later) for lack of KV cache blocks.",
            s.preemptions.load(k_relaxed));
  w.counter("spate:padding_waste_tokens_total", "Padded minus real tokens over all forward passes (bucket padding).",
            s.padding_waste.load(k_relaxed));
  w.counter("spate:engine_steps_total", "Engine steps (forward passes) run.", s.steps.load(k_relaxed));
  w.counter("spate:prompt_tokens_total", "Prompt tokens of finished requests.", s.prompt_tokens.load(k_relaxed));
  w.counter("spate:generation_tokens_total", "Generated tokens, cancelled requests included.",
            s.generation_tokens.load(k_relaxed));

  w.family("spate:request_success_total", "counter", "Requests finished, by finish reason.");
  for (size_t i = 0; i < k_success_reasons.size(); ++i)
    w.sample("spate:request_success_total", {{"finished_reason", std::string(k_success_reasons[i])}},
             std::to_string(s.success[i].load(k_relaxed)));
  w.counter("spate:request_cancelled_total", "Requests cancelled because the client went away.",
            s.cancelled.load(k_relaxed));
  w.family("spate:request_rejected_total", "counter", "Requests refused before reaching the engine, by reason.");
  for (size_t i = 0; i < k_reject_reasons.size(); ++i)
    w.sample("spate:request_rejected_total", {{"reason", std::string(k_reject_reasons[i])}},
             std::to_string(s.rejected[i].load(k_relaxed)));
  w.counter("spate:request_errors_total", "Requests that failed in the engine.", s.errors.load(k_relaxed));
  w.family("spate:api_requests_total", "counter", "Generation requests by the API they came through.");
  for (size_t i = 0; i < k_apis.size(); ++i)
    w.sample("spate:api_requests_total", {{"api", std::string(k_apis[i])}}, std::to_string(s.api_requests[i].load(k_relaxed)));

  w.hist("spate:time_to_first_token_seconds", "Time from submission to the engine to the first generated token.", s.ttft);
  w.hist("spate:inter_token_latency_seconds", "Time between consecutive generated tokens of a request.", s.itl);
  w.hist("spate:e2e_request_latency_seconds", "Time from receipt to the end of a request.", s.e2e);
  w.hist("spate:request_queue_time_seconds", "Time a request waited before it was first scheduled.", s.queue);
  w.hist("spate:request_prefill_time_seconds", "Time from a request's first scheduling to its first token.", s.prefill);
  w.hist("spate:request_decode_time_seconds", "Time from a request's first token to its last.", s.decode);
  w.hist("spate:request_prompt_tokens", "Prompt length of finished requests, in tokens.", s.prompt_len);
  w.hist("spate:request_generation_tokens", "Generated tokens of finished requests.", s.generation_len);
  w.hist("spate:request_params_n", "Histogram of the n request parameter.", s.n_param);
  w.hist("spate:request_params_max_tokens", "Histogram of the max_tokens request parameter.", s.max_tokens_param);
  w.counts_hist("spate:iteration_tokens_total", "Tokens per engine step.", k_step_token_bounds, s.step_tokens,
                 static_cast<double>(s.step_tokens_sum.load(k_relaxed)));
  w.gauge("spate:models_loaded", "1 while the model is loaded (sum() counts the loaded models).", s.loaded.load(k_relaxed));
  w.hist("spate:model_load_seconds", "Time to load the model (weights, KV cache, warmup).", s.load_seconds);
  w.family("spate:model_unloads_total", "counter", "Unloads of the model, by reason (idle, capacity, memory, request).");
  for (size_t i = 0; i < k_unload_reasons.size(); ++i)
    w.sample("spate:model_unloads_total", {{"reason", std::string(k_unload_reasons[i])}}, std::to_string(s.unloads[i].load(k_relaxed)));
  const int32_t n_spec_tokens = s.n_spec_tokens.load(k_relaxed);
  if (n_spec_tokens > 0) {
    w.counter("spate:spec_decode_num_drafts_total", "Decodes that carried speculative draft tokens.", s.spec_drafts.load(k_relaxed));
    w.counter("spate:spec_decode_num_draft_tokens_total", "Draft tokens proposed.", s.spec_draft_tokens.load(k_relaxed));
    w.counter("spate:spec_decode_num_accepted_tokens_total", "Draft tokens accepted.", s.spec_accepted.load(k_relaxed));
    w.family("spate:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Draft tokens accepted, by position in the draft.");
    for (int32_t i = 0; i < n_spec_tokens; ++i)
      w.sample("spate:spec_decode_num_accepted_tokens_per_pos_total", {{"position", std::to_string(i)}},
               std::to_string(s.spec_accepted_per_pos[static_cast<size_t>(i)].load(k_relaxed)));
  }
  std::lock_guard lock(s.config_mu);
  if (!s.cache_config.empty()) {
    w.family("spate:cache_config_info", "gauge", "Information of the KV cache configuration.");
    labels l;
    for (const auto& [k, v] : s.cache_config) l.emplace_back(k, v);
    w.sample("spate:cache_config_info", l, "1.0");
  }
  if (!s.lora_info.empty()) {
    w.family("spate:lora_requests_info", "gauge", "Running and waiting LoRA adapters of the model, and its adapter slots.");
    labels l;
    for (const auto& [k, v] : s.lora_info) l.emplace_back(k, v);
    w.sample("spate:lora_requests_info", l, format_value(s.lora_info_time));
  }
}

}  // namespace spate
