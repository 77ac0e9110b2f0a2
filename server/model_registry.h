// The models a server can serve (--model, repeated, and --models-dir) and the
// ones it has loaded: requests name a model, the registry hands out a lease
// on it, loading it first when needed; it keeps at most --max-loaded-models
// (and the memory budget) loaded, unloading the least recently used idle one
// to make room, and unloads idle models after --model-idle-unload seconds.
// Pinned models load at start and never unload.
//
// The registry knows no weights: the command line supplies a model_loader
// that builds a serving_model (weights, executor, engine, warmup) from a
// model_spec. Loading and unloading run on the registry's own thread, never on
// an I/O thread or another model's engine thread, so requests for loaded
// models never wait behind a load.
//
// A lease keeps its model loaded: a model with requests running is never
// unloaded. When a load needs the room a busy model holds, that model drains:
// its running requests finish, new requests for it wait for its next load
// (fair turns between models under --max-loaded-models 1), up to
// registry_options::max_waiting per model (429 beyond).
//
// Thread-safety: every public member may be called from any thread. Waiters'
// callbacks run on the registry thread (or inline in acquire); they must not
// block and may not call back into the registry except to drop leases.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <stdexcept>

#include "protocol/openai_request.h"
#include "protocol/served_model.h"

namespace spate {

class engine;
class server_metrics;
class histogram;

enum class model_status { unloaded, loading, loaded, error };
const char* model_status_name(model_status s);  // "unloaded", "loading", "loaded", "error"

// What is known of a servable model before it is loaded (the command line
// fills it from --model, --models-dir and the config file's model sections).
struct model_spec {
  std::string id;               // what requests name in "model"
  std::string path;             // the GGUF file
  bool pinned = false;          // loaded at start, never unloaded
  int32_t max_model_len = 0;    // for listing and metrics buckets (0: unknown)
  uint64_t memory_bytes = 0;    // estimated weights + KV, for the memory budget
  std::string error;            // not servable (e.g. not a valid GGUF): listed with it, never loaded
  std::string parent;           // a LoRA adapter's base model id ("" for a model)
  std::string arch;             // general.architecture (listing: Ollama's family)
  std::string quantization;     // general.file_type's name, e.g. Q4_K_M ("" when unknown)
};

// A LoRA adapter installed in a loaded model: its executor slot and the
// prefix-cache salt of its requests (engine_request::adapter, cache_salt).
struct lora_slot {
  int32_t slot = -1;
  uint64_t cache_salt = 0;
};

// A loaded model: what its requests use. Built by the loader; destroying it
// stops its engine (requests still in it finish with reason abort) and frees
// its memory.
//
// The LoRA members are called by the registry: install/remove on the
// registry thread, adapter() from any thread (implementations lock).
struct serving_model {
  virtual ~serving_model() = default;
  api::served_model info;        // tokenizer, template, name == the spec's id, max_model_len
  engine* eng = nullptr;         // never null in a serving process (null in the transport tests)
  uint64_t memory_bytes = 0;     // weights + KV, measured after loading
  // spate:cache_config_info's labels for this model.
  std::vector<std::pair<std::string, std::string>> cache_config;
  int32_t num_speculative_tokens = 0;
  int32_t max_loras = 0;         // adapter slots (0: takes no adapter)

  // Loads the adapter file into a free slot (blocking). Throws
  // std::exception whose message says why (shape mismatch naming the tensor,
  // no free slot, not an adapter): the answer is a 400.
  virtual void install_adapter(const std::string& name, const std::string& path) {
    throw std::runtime_error("the model '" + info.name + "' takes no LoRA adapter");
  }
  // Frees the adapter's slot (no request may use it any more).
  virtual void remove_adapter(const std::string& name) {}
  virtual std::optional<lora_slot> adapter(const std::string& name) const { return std::nullopt; }
};

// Builds a serving model (blocking; runs on the registry thread or, at start,
// the caller of load_blocking). Throws std::exception whose message says why
// (it becomes the model's error).
using model_loader = std::function<std::unique_ptr<serving_model>(const model_spec&)>;

class model_registry;

// Keeps one loaded model (and, for an adapter, its base) from unloading while
// held. Any thread; released by destruction.
class model_lease {
  friend class model_registry;

 public:
  // A lease on model m, entry id.
  model_lease(model_registry& r, std::string id, std::shared_ptr<serving_model> m, server_metrics& metrics);
  // A lease on adapter `id` of base's model, in slot a.
  model_lease(model_registry& r, std::string id, std::shared_ptr<model_lease> base, server_metrics& metrics, lora_slot a);
  ~model_lease();
  model_lease(const model_lease&) = delete;
  model_lease& operator=(const model_lease&) = delete;

  // The model or adapter id: "model" in responses, model_name in metrics.
  const std::string& id() const { return id_; }
  const api::served_model& model() const { return info_; }  // the base's, named id()
  engine& eng() const { return *model_->eng; }
  bool has_engine() const { return model_->eng != nullptr; }
  server_metrics& metrics() const { return metrics_; }
  // engine_request::adapter and cache_salt of its requests (-1, 0: the base model).
  int32_t adapter_slot() const { return adapter_.slot; }
  uint64_t cache_salt() const { return adapter_.cache_salt; }

 private:
  model_registry& registry_;
  std::string id_;
  std::shared_ptr<serving_model> model_;
  std::shared_ptr<model_lease> base_;  // an adapter's lease on its base
  server_metrics& metrics_;
  lora_slot adapter_;
  api::served_model info_;
};
using model_handle = std::shared_ptr<model_lease>;

// The outcome of asking for a model: a lease, or the error to answer with
// (404 model_not_found, 500 model_load_failed, 429 too many waiting, 503
// stopping).
struct model_acquired {
  model_handle lease;
  std::optional<api::api_error> error;
};
using model_acquired_fn = std::function<void(model_acquired)>;

struct registry_options {
  int32_t max_loaded_models = 0;        // --max-loaded-models; 0: no limit
  uint64_t memory_budget_bytes = 0;     // --models-memory-budget; 0: no limit
  double idle_unload_s = 0;             // --model-idle-unload; 0: never
  int32_t max_waiting = 256;            // requests waiting for one model's load at most
  // --strict-model-names: a request naming a model that is not served gets
  // 404 even when only one model is served (see model_registry::acquire).
  bool strict_model_names = false;
};

// When a model idle since `since` with idle limit limit_s (seconds) is due to
// unload; nullopt when never: limit_s <= 0 or NaN, or so large that the
// steady clock cannot represent the time (no overflow, whatever limit_s).
// Pure; any thread.
std::optional<std::chrono::steady_clock::time_point> idle_unload_due(std::chrono::steady_clock::time_point since, double limit_s);

// One row of GET /v1/models.
struct model_row {
  model_spec spec;
  model_status status = model_status::unloaded;
  std::string error;             // status error: why
  int32_t max_model_len = 0;     // the loaded model's, else the spec's
  int32_t n_leases = 0;          // requests holding it
};

class model_registry {
 public:
  model_registry(std::vector<model_spec> specs, model_loader loader, registry_options opts);
  ~model_registry();  // stop()
  model_registry(const model_registry&) = delete;
  model_registry& operator=(const model_registry&) = delete;

  // Adds a model that is already loaded (tests; a model loaded before
  // serving). Before start().
  void add_loaded(model_spec spec, std::unique_ptr<serving_model> m);

  // Loads id now on the calling thread (start-up: the pinned models before
  // /ready). Throws what the loader threw (the model is then in error).
  void load_blocking(const std::string& id);

  // Starts the registry thread (loads on demand, idle unloads).
  void start();
  // Stops the thread and unloads every model (their engines stop; requests in
  // flight finish with reason abort). Waiters get 503. Idempotent.
  void stop();
  // Stops every loaded model's engine (the drain's last step): requests in
  // flight finish with reason abort; the models stay listed.
  void stop_engines();

  // The model a request without "model" gets: the only one, else the first
  // pinned, else the first listed without an error.
  const std::string& default_id() const { return default_id_; }
  bool knows(std::string_view id) const;

  // A lease on id ("" = default_id()). When exactly one model is listed (one
  // --model, no --models-dir sibling, no LoRA adapter) and
  // !strict_model_names, an id that is not that model's names it too, as
  // llama-server and TGI serve any name (Hugging Face's InferenceClient
  // sends "dummy"); the lease's id() is then the served model's, and the
  // substitution is logged (info the first time per requested name, then
  // debug). Several models listed: an unknown id is 404. Loaded: returned at once. Otherwise
  // nullopt, the load is queued and on_ready is called once with the lease
  // or the error when it ends. Unknown id, a model in error, too many
  // waiting or a stopped registry: returned at once with the error.
  std::optional<model_acquired> acquire(std::string_view id, model_acquired_fn on_ready);

  // POST /models/load: like acquire, for no request (the lease, if any, is
  // dropped by the caller). A model in error is retried.
  std::optional<model_acquired> load(std::string_view id, model_acquired_fn on_ready);
  // POST /models/unload: unloads id now when idle, else once its requests
  // finish. Returns the error (404 unknown, 400 pinned or not loaded).
  std::optional<api::api_error> unload(std::string_view id);

  // POST /v1/load_lora_adapter: adds adapter spec (spec.parent: its base; ""
  // = default_id()) and installs it into its base, loading the base first
  // when needed. Returns the error at once (400 name taken, 404 base unknown,
  // 503 stopping) or nullopt; then on_done gets the install's outcome (400
  // naming the tensor whose shape does not fit; the adapter is then dropped).
  std::optional<api::api_error> add_adapter(model_spec spec, std::function<void(std::optional<api::api_error>)> on_done);
  // POST /v1/unload_lora_adapter: the adapter is no longer listed or served;
  // its slot is freed once its running requests finish. 404 when unknown.
  std::optional<api::api_error> remove_adapter(std::string_view name);

  // Ollama's keep_alive for id (seconds): once idle it stays loaded this long
  // (negative: until evicted or unloaded), replacing --model-idle-unload for
  // it until another request names one; 0 is unload(id). Pinned models and
  // unknown ids are left alone.
  void set_keep_alive(std::string_view id, double seconds);

  std::vector<model_row> list() const;
  std::optional<model_row> find(std::string_view id) const;
  // Every pinned model is loaded (the /ready condition besides warmup).
  bool pinned_loaded() const;

  // The per-model metrics, in listing order (every model, loaded or not; a
  // model's counters outlive its unloads), refreshed from the loaded engines.
  std::vector<server_metrics*> metrics_for_scrape();
  // The metrics a request that names no servable model counts against.
  server_metrics& default_metrics();

  // Called by ~model_lease.
  void release(const std::string& id);
  // spate:lora_requests_info of each base with adapters, rendered into its metrics (at scrape).
  void refresh_lora_info();

 private:
  struct entry;
  entry* find_entry(std::string_view id) const;           // listed entries (not removed adapters)
  entry* find_any_entry(std::string_view id) const;       // removed adapters too (their leases)
  // The entry a request's id names: find_entry, else (not strict) the only listed entry.
  entry* resolve_request_entry_locked(std::string_view id);
  std::optional<model_acquired> acquire_adapter_locked(std::unique_lock<std::mutex>& lock, entry& a, model_acquired_fn on_ready);
  // The adapter lease on a, over base lease b (installing a into b's model
  // first on the registry thread when needed); delivers to on_ready.
  // Returns the outcome when it is ready now; otherwise the install is queued
  // on the registry thread and on_ready gets it.
  std::optional<model_acquired> finish_adapter_acquire(model_handle b, const std::string& adapter_id, model_acquired_fn on_ready,
                                                       bool on_registry_thread);
  model_status status_locked(const entry& e) const;
  model_acquired make_adapter_lease(model_handle base, const std::string& adapter_id, lora_slot a);
  // Frees a removed adapter's slot in its base (when loaded), on the registry thread.
  void queue_adapter_removal_locked(const entry& a);
  void run_jobs(std::unique_lock<std::mutex>& lock);
  std::optional<model_acquired> acquire_locked(std::unique_lock<std::mutex>& lock, entry& e, model_acquired_fn on_ready,
                                               bool for_request);
  model_handle lease_locked(entry& e);
  void thread_main();
  // One round of the registry thread's work under lock: idle unloads, then
  // the next load if any. Returns false when there was nothing to do.
  bool work_once(std::unique_lock<std::mutex>& lock);
  bool make_room_locked(std::unique_lock<std::mutex>& lock, entry& want);
  void unload_locked(std::unique_lock<std::mutex>& lock, entry& e, const char* reason);
  void run_load(std::unique_lock<std::mutex>& lock, entry& e);
  int32_t n_loaded_locked() const;
  // The idle time after which e unloads (seconds); <= 0: never.
  double idle_limit_s(const entry& e) const;
  uint64_t loaded_bytes_locked() const;

  model_loader loader_;
  registry_options opts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<entry>> entries_;  // listing order; never shrinks
  std::string default_id_;
  std::thread thread_;
  bool stopping_ = false;
  uint64_t use_clock_ = 0;                       // LRU order
  std::deque<std::function<void()>> jobs_;       // run on the registry thread, unlocked (adapter installs)
  std::vector<std::string> substituted_names_;   // names answered by the only model, logged at info (at most 64)
};

}  // namespace spate
