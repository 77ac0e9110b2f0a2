// Prometheus metrics of the server: counters, gauges and fixed-bucket
// histograms, rendered in the text exposition format (version 0.0.4) for
// GET /metrics. Names mirror vLLM's with the "spate:" prefix; every series
// carries a model_name label (omitted when the name is empty).
//
// Thread-safety: every member function may be called from any thread at any
// time (I/O threads, the engine thread in event callbacks, the scraper).
// Recording is lock-free (relaxed atomics) and never blocks. A scrape is not an
// atomic snapshot across series: a request finishing during a scrape may show
// in one series and not yet in another. Within one histogram the _count always
// equals the +Inf bucket; _sum may lag by the observations in flight.
//
// Series (seconds unless noted):
//   gauges, set from engine_stats by update_from_engine() at scrape time:
//     spate:num_requests_running, spate:num_requests_waiting,
//     spate:kv_cache_usage_perc (0..1)
//   counters from engine_stats (update_from_engine):
//     spate:prefix_cache_queries_total, spate:prefix_cache_hits_total (tokens),
//     the prefix cache's disk tier (0 without --kv-cache-dir):
//     spate:kv_disk_hits_total, spate:kv_disk_misses_total (blocks),
//     spate:kv_disk_read_bytes_total, spate:kv_disk_written_bytes_total,
//     spate:kv_disk_evictions_total (files), spate:kv_disk_errors_total,
//     spate:kv_disk_dropped_blocks_total (blocks not written),
//     and the gauge spate:kv_disk_usage_bytes,
//     spate:num_preemptions_total, spate:padding_waste_tokens_total (tokens),
//     spate:engine_steps_total
//   counters recorded by the server:
//     spate:prompt_tokens_total                (observe_finished)
//     spate:generation_tokens_total            (count_generated_tokens: every
//       token the engine generated, cancelled requests included, as vLLM)
//     spate:request_success_total{finished_reason="stop|length|abort"} (observe_finished)
//     spate:request_cancelled_total    (count_cancelled: the client went away)
//     spate:request_rejected_total{reason="invalid|context_length|queue_full|other"} (count_rejected)
//     spate:request_errors_total       (count_error: the engine failed a request)
//     spate:api_requests_total{api="openai|anthropic|ollama"} (count_api_request:
//       generation requests by the API they came through, refused ones included)
//   histograms (observe_finished):
//     spate:time_to_first_token_seconds, spate:inter_token_latency_seconds,
//     spate:e2e_request_latency_seconds, spate:request_queue_time_seconds,
//     spate:request_prefill_time_seconds (first scheduled -> first token),
//     spate:request_decode_time_seconds (first token -> last token),
//     spate:request_prompt_tokens, spate:request_generation_tokens (tokens)
//   histograms of request parameters (observe_request_params), vLLM's buckets:
//     spate:request_params_n (1, 2, 5, 10, 20),
//     spate:request_params_max_tokens (1, 2, 5, 10, 20, 50... up to max_model_len)
//   histogram from engine_stats (update_from_engine):
//     spate:iteration_tokens_total (tokens per engine step)
//   speculative decoding counters from engine_stats (update_from_engine),
//   rendered when set_num_speculative_tokens(k > 0) was called:
//     spate:spec_decode_num_drafts_total (decodes that carried drafts),
//     spate:spec_decode_num_draft_tokens_total,
//     spate:spec_decode_num_accepted_tokens_total,
//     spate:spec_decode_num_accepted_tokens_per_pos_total{position="0".."k-1"}
//   the model's loading (model_registry: set_loaded, observe_load, count_unload):
//     spate:models_loaded (gauge, 1 while loaded: sum() counts the loaded models),
//     spate:model_load_seconds (histogram: weights, KV cache, warmup),
//     spate:model_unloads_total{reason="idle|capacity|memory|request"}
//   info gauge of a base model's LoRA adapters (set_lora_info, value: Unix time):
//     spate:lora_requests_info{running_lora_adapters, waiting_lora_adapters, max_lora}
//   info gauge (set_cache_config, value 1):
//     spate:cache_config_info{block_size, cache_dtype, enable_prefix_caching,
//                             num_cpu_blocks, num_gpu_blocks, kv_cache_memory_bytes}
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spate {

struct engine_stats;
struct engine_event;
class metrics_writer;

// A histogram with fixed upper bounds (le) plus the implicit +Inf bucket.
// observe() is lock-free; NaN observations are dropped.
class histogram {
 public:
  // Precondition: upper_bounds finite and strictly increasing (checked; throws
  // std::invalid_argument otherwise).
  explicit histogram(std::vector<double> upper_bounds);

  void observe(double v);

  struct snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf last (== count)
    double sum = 0.0;
    uint64_t count = 0;
  };
  snapshot snap() const;
  const std::vector<double>& upper_bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0.0};
};

// Bucket bounds of the server's histograms (documented in metrics.cpp).
const std::vector<double>& ttft_buckets_s();
const std::vector<double>& itl_buckets_s();
const std::vector<double>& request_latency_buckets_s();
const std::vector<double>& token_count_buckets();
// vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50... while <= max_value.
std::vector<double> one_two_five_buckets(double max_value);

class server_metrics {
 public:
  // max_model_len: the top of spate:request_params_max_tokens's buckets
  // (<= 0: 1,000,000).
  explicit server_metrics(std::string model_name = "", int32_t max_model_len = 0);
  ~server_metrics();
  server_metrics(const server_metrics&) = delete;
  server_metrics& operator=(const server_metrics&) = delete;

  // Sets the gauges and the engine-side counters from a stats snapshot
  // (engine::stats()); call right before render_prometheus().
  void update_from_engine(const engine_stats& s);

  // Records a finished request (event type finished): its usage (prompt
  // tokens; generated tokens in spate:request_generation_tokens), its reason (stop, length or abort; an error reason is
  // counted by count_error() instead) and its timings: queue time (when it was
  // scheduled), TTFT (when it produced a token), every inter-token gap, and
  // e2e_s, the server-side latency from receipt to finish in seconds.
  void observe_finished(const engine_event& finished_event, double e2e_s);

  // n_tokens tokens the engine generated (a tokens event), whether or not the
  // request later finishes (a cancelled one counts too).
  void count_generated_tokens(int64_t n_tokens);
  // The parameters of a request whose every choice finished or failed; call
  // once per request (one cancelled because its client went away is not
  // observed). Observes n once per prompt and max_tokens once per choice, as
  // vLLM observes n per request and max_tokens per finished sequence.
  // n_prompts: the prompts of a completions request (n choices each);
  // max_tokens: each choice's effective limit (the default filled in).
  void observe_request_params(int32_t n_prompts, int32_t n, int32_t max_tokens);

  // A request whose client went away before it finished (cancelled by the server).
  void count_cancelled();
  // A request refused before it reached the engine. reason is "invalid",
  // "context_length" or "queue_full"; anything else is counted as "other".
  void count_rejected(std::string_view reason);
  // A request the engine failed (event type error).
  void count_error();
  // A generation request that came through api: "openai", "anthropic" or "ollama".
  void count_api_request(std::string_view api);

  // The KV cache configuration shown as spate:cache_config_info's labels
  // (label name, value), in order. Set when the model loads.
  void set_cache_config(std::vector<std::pair<std::string, std::string>> labels);
  // Speculative decoding's k (0: off, no spec_decode series). Set when the model loads.
  void set_num_speculative_tokens(int32_t k);

  // The model's loading (model_registry.h).
  void set_loaded(bool loaded);
  void observe_load(double seconds);
  // reason: idle, capacity, memory or request (anything else is not counted).
  void count_unload(std::string_view reason);
  // spate:lora_requests_info (vLLM's): the adapters of this base model with
  // running requests and with waiting ones (comma-separated), its adapter
  // slots; the value is the Unix time of the update.
  void set_lora_info(std::string running, std::string waiting, int32_t max_lora, double unix_s);

  // The text exposition format, one family per # HELP / # TYPE block.
  std::string render_prometheus() const;
  // Several models' series (each with its model_name), one block per family.
  static std::string render_all(const std::vector<server_metrics*>& all);

 private:
  void render_into(metrics_writer& w) const;
  struct state;
  std::string model_name_;
  std::unique_ptr<state> s_;
};

}  // namespace spate
