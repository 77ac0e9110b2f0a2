#include "server/model_registry.h"

#include <algorithm>
#include <spdlog/spdlog.h>

#include "engine/engine_api.h"
#include "protocol/ollama_request.h"
#include "server/metrics.h"
#include "server/model_registry_entry.h"

namespace spate {

namespace {

using clock_type = std::chrono::steady_clock;

// Counters of engine_stats summed over a model's engines (each load starts a
// new engine at zero; the Prometheus counters must not go down).
void add_counters(engine_stats& into, const engine_stats& s) {
  into.prefix_cache_queries += s.prefix_cache_queries;
  into.prefix_cache_hits += s.prefix_cache_hits;
  into.kv_disk_hits += s.kv_disk_hits;
  into.kv_disk_misses += s.kv_disk_misses;
  into.kv_disk_read_bytes += s.kv_disk_read_bytes;
  into.kv_disk_written_bytes += s.kv_disk_written_bytes;
  into.kv_disk_evictions += s.kv_disk_evictions;
  into.kv_disk_errors += s.kv_disk_errors;
  into.kv_disk_dropped += s.kv_disk_dropped;
  into.n_preemptions += s.n_preemptions;
  into.n_steps += s.n_steps;
  into.prompt_tokens += s.prompt_tokens;
  into.generated_tokens += s.generated_tokens;
  into.padding_waste_tokens += s.padding_waste_tokens;
  into.n_finished += s.n_finished;
  into.n_rejected += s.n_rejected;
  for (size_t i = 0; i < into.step_tokens_buckets.size(); ++i) into.step_tokens_buckets[i] += s.step_tokens_buckets[i];
  into.step_tokens_sum += s.step_tokens_sum;
  into.spec_num_drafts += s.spec_num_drafts;
  into.spec_num_draft_tokens += s.spec_num_draft_tokens;
  into.spec_num_accepted_tokens += s.spec_num_accepted_tokens;
  for (size_t i = 0; i < into.spec_accepted_per_pos.size(); ++i) into.spec_accepted_per_pos[i] += s.spec_accepted_per_pos[i];
}

api::api_error not_found(std::string_view id) {
  return api::api_error{404, "The model '" + std::string(id) + "' does not exist", "not_found_error", "model", "model_not_found"};
}

api::api_error load_failed(const std::string& id, const std::string& why) {
  return api::api_error{500, "The model '" + id + "' cannot be loaded: " + why, "server_error", "model", "model_load_failed"};
}

}  // namespace

const char* model_status_name(model_status s) {
  switch (s) {
    case model_status::unloaded: return "unloaded";
    case model_status::loading: return "loading";
    case model_status::loaded: return "loaded";
    case model_status::error: return "error";
  }
  return "unloaded";
}


model_lease::model_lease(model_registry& r, std::string id, std::shared_ptr<serving_model> m, server_metrics& metrics)
    : registry_(r), id_(std::move(id)), model_(std::move(m)), metrics_(metrics), info_(model_->info) {
  info_.name = id_;
}

model_lease::model_lease(model_registry& r, std::string id, std::shared_ptr<model_lease> base, server_metrics& metrics, lora_slot a)
    : registry_(r), id_(std::move(id)), model_(base->model_), base_(std::move(base)), metrics_(metrics), adapter_(a),
      info_(model_->info) {
  info_.name = id_;
}

model_lease::~model_lease() {
  model_.reset();  // never the last owner of a model on a request's thread: the registry unloads it
  registry_.release(id_);
  base_.reset();   // an adapter's base lease, after the adapter's
}

model_registry::model_registry(std::vector<model_spec> specs, model_loader loader, registry_options opts)
    : loader_(std::move(loader)), opts_(opts) {
  for (auto& s : specs) {
    auto e = std::make_unique<entry>();
    e->metrics = std::make_unique<server_metrics>(s.id, s.max_model_len);
    e->spec = std::move(s);
    if (!e->spec.error.empty()) {
      e->status = model_status::error;
      e->error = e->spec.error;
    }
    entries_.push_back(std::move(e));
  }
  // The default: the first pinned model, else the first servable one, else the first.
  for (const auto& e : entries_)
    if (e->spec.pinned && default_id_.empty()) default_id_ = e->spec.id;
  for (const auto& e : entries_)
    if (e->spec.error.empty() && default_id_.empty()) default_id_ = e->spec.id;
  if (default_id_.empty() && !entries_.empty()) default_id_ = entries_.front()->spec.id;
}

model_registry::~model_registry() { stop(); }

void model_registry::add_loaded(model_spec spec, std::unique_ptr<serving_model> m) {
  std::lock_guard lock(mu_);
  auto e = std::make_unique<entry>();
  e->metrics = std::make_unique<server_metrics>(spec.id, m->info.max_model_len);
  e->spec = std::move(spec);
  e->status = model_status::loaded;
  e->model = std::move(m);
  e->metrics->set_loaded(true);
  e->last_used = ++use_clock_;
  if (default_id_.empty()) default_id_ = e->spec.id;
  entries_.push_back(std::move(e));
}

model_registry::entry* model_registry::find_entry(std::string_view id) const {
  for (const auto& e : entries_)
    if (e->spec.id == id && !e->removed) return e.get();
  return nullptr;
}

model_registry::entry* model_registry::find_any_entry(std::string_view id) const {
  for (const auto& e : entries_)
    if (e->spec.id == id && !e->removed) return e.get();
  for (const auto& e : entries_)
    if (e->spec.id == id) return e.get();
  return nullptr;
}

model_registry::entry* model_registry::resolve_request_entry_locked(std::string_view id) {
  const std::string_view want = id.empty() ? std::string_view(default_id_) : id;
  if (entry* e = find_entry(want)) return e;
  // A removed adapter's name stays a 404: its requests must not silently get the base model.
  if (opts_.strict_model_names || find_any_entry(want)) return nullptr;
  entry* only = nullptr;
  for (const auto& e : entries_) {
    if (e->removed) continue;
    if (only) return nullptr;  // more than one model served: names must match
    only = e.get();
  }
  if (!only) return nullptr;
  const std::string_view shown = want.substr(0, 128);  // a client's name, bounded in the log
  const bool first = substituted_names_.size() < 64 &&
                     std::find(substituted_names_.begin(), substituted_names_.end(), shown) == substituted_names_.end();
  if (first) substituted_names_.emplace_back(shown);
  spdlog::log(first ? spdlog::level::info : spdlog::level::debug,
              "model '{}' is not served; the only served model '{}' answers (--strict-model-names refuses such names)", shown,
              only->spec.id);
  return only;
}

bool model_registry::knows(std::string_view id) const {
  std::lock_guard lock(mu_);
  return find_entry(id) != nullptr;
}

void model_registry::load_blocking(const std::string& id) {
  std::unique_lock lock(mu_);
  entry* e = find_entry(id);
  if (!e) throw std::runtime_error("unknown model '" + id + "'");
  if (e->status == model_status::loaded) return;
  if (e->status == model_status::error) throw std::runtime_error(e->error);
  run_load(lock, *e);
  if (e->status != model_status::loaded) throw std::runtime_error(e->error);
}

void model_registry::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { thread_main(); });
}

void model_registry::stop() {
  std::vector<model_acquired_fn> failed;
  std::vector<std::shared_ptr<serving_model>> models;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& e : entries_) {
      for (auto& w : e->waiters) failed.push_back(std::move(w));
      e->waiters.clear();
      e->wanted_seq = 0;
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& f : failed) f(model_acquired{nullptr, api::api_error{503, "the server is shutting down", "server_error", "", ""}});
  {
    std::lock_guard lock(mu_);
    for (auto& e : entries_) {
      if (e->model) models.push_back(std::move(e->model));
      if (e->status == model_status::loaded || e->status == model_status::loading) e->status = model_status::unloaded;
    }
  }
  models.clear();  // engines stop here, outside the lock
}

void model_registry::stop_engines() {
  std::vector<std::shared_ptr<serving_model>> models;
  {
    std::lock_guard lock(mu_);
    for (auto& e : entries_)
      if (e->model) models.push_back(e->model);
  }
  for (auto& m : models)
    if (m->eng) m->eng->stop();
}

model_handle model_registry::lease_locked(entry& e) {
  ++e.n_leases;
  e.last_used = ++use_clock_;
  return std::make_shared<model_lease>(*this, e.spec.id, e.model, *e.metrics);
}

void model_registry::release(const std::string& id) {
  {
    std::lock_guard lock(mu_);
    entry* e = find_any_entry(id);
    if (!e) return;
    --e->n_leases;
    e->last_used = ++use_clock_;
    e->idle_since = clock_type::now();
    if (e->n_leases > 0) return;
    if (e->removed) queue_adapter_removal_locked(*e);
  }
  cv_.notify_all();
}

std::optional<model_acquired> model_registry::acquire_locked(std::unique_lock<std::mutex>&, entry& e, model_acquired_fn on_ready,
                                                             bool for_request) {
  if (stopping_) return model_acquired{nullptr, api::api_error{503, "the server is shutting down", "server_error", "", ""}};
  if (e.status == model_status::error) {
    if (for_request || !e.spec.error.empty()) return model_acquired{nullptr, load_failed(e.spec.id, e.error)};
    e.status = model_status::unloaded;  // POST /models/load retries a failed load
    e.error.clear();
  }
  if (e.status == model_status::loaded && !e.drain_reason) return model_acquired{lease_locked(e), std::nullopt};
  if (static_cast<int32_t>(e.waiters.size()) >= opts_.max_waiting) {
    return model_acquired{nullptr, api::api_error{429, "too many requests are waiting for the model '" + e.spec.id + "' to load (" +
                                                           std::to_string(opts_.max_waiting) + ")",
                                                  "rate_limit_error", "", "queue_full"}};
  }
  e.waiters.push_back(std::move(on_ready));
  if (e.wanted_seq == 0) e.wanted_seq = ++use_clock_;
  cv_.notify_all();
  return std::nullopt;
}

std::optional<model_acquired> model_registry::acquire(std::string_view id, model_acquired_fn on_ready) {
  std::unique_lock lock(mu_);
  entry* e = resolve_request_entry_locked(id);
  if (!e) return model_acquired{nullptr, not_found(id)};
  if (!e->spec.parent.empty()) return acquire_adapter_locked(lock, *e, std::move(on_ready));
  return acquire_locked(lock, *e, std::move(on_ready), /*for_request=*/true);
}

std::optional<model_acquired> model_registry::load(std::string_view id, model_acquired_fn on_ready) {
  std::unique_lock lock(mu_);
  entry* e = find_entry(id);
  if (!e) return model_acquired{nullptr, not_found(id)};
  if (!e->spec.parent.empty()) return acquire_adapter_locked(lock, *e, std::move(on_ready));
  return acquire_locked(lock, *e, std::move(on_ready), /*for_request=*/false);
}

std::optional<api::api_error> model_registry::unload(std::string_view id) {
  {
    std::lock_guard lock(mu_);
    entry* e = find_entry(id);
    if (!e) return not_found(id);
    if (!e->spec.parent.empty())
      return api::api_error{400, "'" + e->spec.id + "' is a LoRA adapter: POST /v1/unload_lora_adapter unloads it", "invalid_request_error", "model", ""};
    if (e->spec.pinned) return api::api_error{400, "The model '" + e->spec.id + "' is pinned and never unloads", "invalid_request_error", "model", ""};
    if (e->status != model_status::loaded && e->status != model_status::loading)
      return api::api_error{400, "The model '" + e->spec.id + "' is not loaded", "invalid_request_error", "model", "model_not_loaded"};
    e->drain_reason = "request";
  }
  cv_.notify_all();
  return std::nullopt;
}

static model_row row_of(const model_spec& spec, model_status st, const std::string& err, const serving_model* m, int32_t n_leases) {
  model_row r;
  r.spec = spec;
  r.status = st;
  r.error = err;
  r.max_model_len = m ? m->info.max_model_len : spec.max_model_len;
  r.n_leases = n_leases;
  return r;
}

std::vector<model_row> model_registry::list() const {
  std::lock_guard lock(mu_);
  std::vector<model_row> out;
  for (const auto& e : entries_) {
    if (e->removed) continue;
    const entry* b = e->spec.parent.empty() ? e.get() : find_entry(e->spec.parent);
    out.push_back(row_of(e->spec, status_locked(*e), e->error, b ? b->model.get() : nullptr, e->n_leases));
  }
  return out;
}

std::optional<model_row> model_registry::find(std::string_view id) const {
  std::lock_guard lock(mu_);
  const entry* e = find_entry(id);
  if (!e) return std::nullopt;
  const entry* b = e->spec.parent.empty() ? e : find_entry(e->spec.parent);
  return row_of(e->spec, status_locked(*e), e->error, b ? b->model.get() : nullptr, e->n_leases);
}

bool model_registry::pinned_loaded() const {
  std::lock_guard lock(mu_);
  for (const auto& e : entries_)
    if (e->spec.pinned && e->spec.parent.empty() && e->status != model_status::loaded) return false;
  return true;
}

std::vector<server_metrics*> model_registry::metrics_for_scrape() {
  refresh_lora_info();
  std::lock_guard lock(mu_);
  std::vector<server_metrics*> out;
  for (auto& e : entries_) {
    engine_stats s;
    add_counters(s, e->past);
    if (e->model && e->model->eng) {
      const engine_stats now = e->model->eng->stats();
      add_counters(s, now);
      s.n_running = now.n_running;
      s.n_waiting = now.n_waiting;
      s.n_blocks_total = now.n_blocks_total;
      s.n_blocks_free = now.n_blocks_free;
      s.kv_usage = now.kv_usage;
      s.kv_disk_usage_bytes = now.kv_disk_usage_bytes;
    }
    e->metrics->update_from_engine(s);
    out.push_back(e->metrics.get());
  }
  return out;
}

server_metrics& model_registry::default_metrics() {
  std::lock_guard lock(mu_);
  entry* e = find_entry(default_id_);
  return *e->metrics;
}

int32_t model_registry::n_loaded_locked() const {
  int32_t n = 0;
  for (const auto& e : entries_) n += e->status == model_status::loaded || e->status == model_status::loading;
  return n;
}

uint64_t model_registry::loaded_bytes_locked() const {
  uint64_t n = 0;
  for (const auto& e : entries_) {
    if (e->status == model_status::loaded && e->model) n += e->model->memory_bytes;
    if (e->status == model_status::loading) n += e->spec.memory_bytes;
  }
  return n;
}

void model_registry::unload_locked(std::unique_lock<std::mutex>& lock, entry& e, const char* reason) {
  std::shared_ptr<serving_model> m = std::move(e.model);
  e.status = model_status::unloaded;
  e.drain_reason = nullptr;
  e.metrics->count_unload(reason);
  e.metrics->set_loaded(false);
  if (m && m->eng) add_counters(e.past, m->eng->stats());
  spdlog::info("Unloading model '{}' ({})", e.spec.id, reason);
  lock.unlock();
  m.reset();  // stops the engine, frees the weights and KV cache
  lock.lock();
}

void model_registry::run_load(std::unique_lock<std::mutex>& lock, entry& e) {
  e.status = model_status::loading;
  e.wanted_seq = 0;
  const model_spec spec = e.spec;
  std::vector<std::pair<std::string, std::string>> adapters;  // (id, path) of its listed adapters
  for (const auto& a : entries_)
    if (a->spec.parent == spec.id && !a->removed && a->spec.error.empty()) adapters.emplace_back(a->spec.id, a->spec.path);
  lock.unlock();
  spdlog::info("Loading model '{}' from {}", spec.id, spec.path);
  const auto t0 = clock_type::now();
  std::unique_ptr<serving_model> m;
  std::string why;
  try {
    m = loader_(spec);
    if (!m) why = "the loader returned nothing";
  } catch (const std::exception& ex) {
    why = ex.what();
  }
  // Its adapters go in with it (a broken one is listed with its error).
  std::vector<std::pair<std::string, std::string>> adapter_errors;
  for (const auto& [id, path] : m ? adapters : decltype(adapters){}) {
    try {
      m->install_adapter(id, path);
    } catch (const std::exception& ex) {
      adapter_errors.emplace_back(id, ex.what());
      spdlog::error("LoRA adapter '{}': {}", id, ex.what());
    }
  }
  const double seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  lock.lock();
  for (const auto& [id, err] : adapter_errors) {
    if (entry* a = find_entry(id)) {
      a->status = model_status::error;
      a->error = err;
    }
  }
  std::vector<model_acquired_fn> waiters = std::move(e.waiters);
  e.waiters.clear();
  std::vector<model_acquired> outcomes;
  if (m) {
    e.metrics->observe_load(seconds);
    e.metrics->set_loaded(true);
    if (!e.cache_config_set) {
      e.metrics->set_cache_config(m->cache_config);
      e.metrics->set_num_speculative_tokens(m->num_speculative_tokens);
      e.cache_config_set = true;
    }
    e.model = std::move(m);
    e.status = model_status::loaded;
    e.error.clear();
    e.idle_since = clock_type::now();
    e.last_used = ++use_clock_;
    spdlog::info("Loaded model '{}' in {:.2f} s", spec.id, seconds);
    for (size_t i = 0; i < waiters.size(); ++i) outcomes.push_back(model_acquired{lease_locked(e), std::nullopt});
  } else {
    e.status = model_status::error;
    e.error = why;
    spdlog::error("Loading model '{}' failed: {}", spec.id, why);
    for (size_t i = 0; i < waiters.size(); ++i) outcomes.push_back(model_acquired{nullptr, load_failed(spec.id, why)});
  }
  if (waiters.empty()) return;
  lock.unlock();
  for (size_t i = 0; i < waiters.size(); ++i) waiters[i](std::move(outcomes[i]));
  waiters.clear();  // their captures may hold leases: released outside the lock
  outcomes.clear();
  lock.lock();
}

bool model_registry::make_room_locked(std::unique_lock<std::mutex>& lock, entry& want) {
  for (;;) {
    const bool over_count = opts_.max_loaded_models > 0 && n_loaded_locked() >= opts_.max_loaded_models;
    const bool over_bytes = opts_.memory_budget_bytes > 0 && n_loaded_locked() > 0 &&
                            loaded_bytes_locked() + want.spec.memory_bytes > opts_.memory_budget_bytes;
    if (!over_count && !over_bytes) return true;
    entry* victim = nullptr;
    for (auto& e : entries_) {
      if (e.get() == &want || e->status != model_status::loaded || e->spec.pinned) continue;
      // Idle ones first, then the least recently used.
      if (!victim || (e->n_leases == 0) > (victim->n_leases == 0) ||
          ((e->n_leases == 0) == (victim->n_leases == 0) && e->last_used < victim->last_used))
        victim = e.get();
    }
    if (!victim) {
      // Everything loaded is pinned (or loading): this model cannot get room.
      bool loading = false;
      for (auto& e : entries_) loading |= e->status == model_status::loading;
      if (loading) return false;
      std::vector<model_acquired_fn> waiters = std::move(want.waiters);
      want.waiters.clear();
      want.wanted_seq = 0;
      const api::api_error err{503, "The model '" + want.spec.id + "' cannot be loaded now: the loaded models are pinned (" +
                                        (over_count ? "--max-loaded-models " + std::to_string(opts_.max_loaded_models)
                                                    : "--models-memory-budget") + ")",
                               "server_error", "model", "model_capacity"};
      lock.unlock();
      for (auto& w : waiters) w(model_acquired{nullptr, err});
      waiters.clear();
      lock.lock();
      return false;
    }
    if (victim->n_leases == 0) {
      unload_locked(lock, *victim, over_count ? "capacity" : "memory");
      continue;
    }
    if (!victim->drain_reason) victim->drain_reason = over_count ? "capacity" : "memory";
    return false;  // its requests finish first; release() wakes the thread
  }
}

bool model_registry::work_once(std::unique_lock<std::mutex>& lock) {
  if (!jobs_.empty()) {
    run_jobs(lock);
    return true;
  }
  const auto now = clock_type::now();
  for (auto& e : entries_) {
    if (e->status != model_status::loaded || e->n_leases > 0 || e->spec.pinned) continue;
    const double limit_s = idle_limit_s(*e);
    const bool idle_out = limit_s > 0 && e->waiters.empty() && std::chrono::duration<double>(now - e->idle_since).count() >= limit_s;
    if (e->drain_reason || idle_out) {
      unload_locked(lock, *e, e->drain_reason ? e->drain_reason : "idle");
      return true;
    }
  }
  entry* next = nullptr;
  for (auto& e : entries_) {
    if (e->wanted_seq == 0 || e->waiters.empty() || !e->spec.parent.empty()) continue;
    if (e->status == model_status::loading) continue;
    if (!next || e->wanted_seq < next->wanted_seq) next = e.get();
  }
  if (!next) return false;
  if (next->status == model_status::loaded) {
    if (next->drain_reason) return false;  // waits for its own unload first
    std::vector<model_acquired_fn> waiters = std::move(next->waiters);
    next->waiters.clear();
    next->wanted_seq = 0;
    std::vector<model_acquired> outcomes;
    for (size_t i = 0; i < waiters.size(); ++i) outcomes.push_back(model_acquired{lease_locked(*next), std::nullopt});
    lock.unlock();
    for (size_t i = 0; i < waiters.size(); ++i) waiters[i](std::move(outcomes[i]));
    waiters.clear();
    outcomes.clear();
    lock.lock();
    return true;
  }
  if (next->status == model_status::error) {
    std::vector<model_acquired_fn> waiters = std::move(next->waiters);
    next->waiters.clear();
    next->wanted_seq = 0;
    const api::api_error err = load_failed(next->spec.id, next->error);
    lock.unlock();
    for (auto& w : waiters) w(model_acquired{nullptr, err});
    waiters.clear();
    lock.lock();
    return true;
  }
  if (!make_room_locked(lock, *next)) return false;
  run_load(lock, *next);
  return true;
}

std::optional<std::chrono::steady_clock::time_point> idle_unload_due(std::chrono::steady_clock::time_point since, double limit_s) {
  using tp = std::chrono::steady_clock::time_point;
  if (!(limit_s > 0)) return std::nullopt;  // 0 (never), negative, NaN
  // Compared as doubles before any conversion: a limit the clock cannot
  // represent from `since` (1e300 s) is never due, not an overflow into the past.
  const double room_s = std::chrono::duration<double>(tp::max() - since).count();
  if (!(limit_s < room_s - 1.0)) return std::nullopt;
  return since + std::chrono::duration_cast<tp::duration>(std::chrono::duration<double>(limit_s));
}

double model_registry::idle_limit_s(const entry& e) const { return e.keep_alive_s.value_or(opts_.idle_unload_s); }

void model_registry::set_keep_alive(std::string_view id, double seconds) {
  if (seconds == 0) {
    unload(id);
    return;
  }
  std::lock_guard lock(mu_);
  entry* e = find_entry(id);
  if (!e || e->spec.pinned || !e->spec.parent.empty()) return;  // an adapter follows its base
  // 0 as a limit: never. Negative, or beyond the API's bound (the protocol
  // refuses those; this keeps the registry safe for any caller): kept forever.
  e->keep_alive_s = seconds < 0 || !(seconds <= api::k_max_keep_alive_s) ? 0.0 : seconds;
  cv_.notify_all();
}

void model_registry::thread_main() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (work_once(lock)) continue;
    // Sleep until something changes, or the next idle unload is due.
    std::optional<clock_type::time_point> due;
    for (const auto& e : entries_) {
      const double limit_s = idle_limit_s(*e);
      if (limit_s <= 0 || e->status != model_status::loaded || e->n_leases > 0 || e->spec.pinned) continue;
      const std::optional<clock_type::time_point> t = idle_unload_due(e->idle_since, limit_s);
      if (t && (!due || *t < *due)) due = t;
    }
    if (due) {
      cv_.wait_until(lock, *due);
    } else {
      cv_.wait(lock);
    }
  }
}

}  // namespace spate
