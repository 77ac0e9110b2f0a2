// How `spate serve` builds a model it serves: the weights, chat template and
// draft model (model_parts), then the executor on the one shared device
// executor, the engine (warmed up) and what the protocol layer needs
// (serving_model). The registry calls build() on its own thread for loads on
// demand; at start-up the single model's parts are loaded first on the main
// thread, so that their errors keep their exit codes.
//
// Thread-safety: build() may run on any one thread at a time per model;
// different models' builds may overlap with serving (the device executor's
// turns keep their forward passes apart). all_engines_alive() any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "cli/draft_model.h"
#include "cli/model_catalog.h"
#include "jinja/chat_template.h"
#include "model/device_turns.h"
#include "model/model_loader.h"
#include "model/thread_pool.h"
#include "server/model_registry.h"
#include "server/service_notifier.h"

namespace spate::cli {

// What is loaded before the engine exists.
struct model_parts {
  std::unique_ptr<loaded_model> model;
  int32_t max_model_len = 0;
  std::unique_ptr<chat_template> tmpl;  // null when there is none or it is unusable
  std::string tmpl_error;               // why the model's template is unusable, or ""
  draft_model draft;                    // the speculative-config's draft model, when it names one
};

// Loads m's weights, checks its flags (max-model-len, kv-cache-memory; m.model
// is updated with the resolved budget), its chat template and draft model.
// Returns "" or the error, with exit_code 1 (the model file) or 2 (a flag, the
// template file, the draft model).
std::string load_model_parts(catalog_model& m, model_parts& out, int& exit_code, const load_progress_fn& on_progress = {});

class serving_models {
 public:
  // n_threads: the shared device executor's threads. debug_fail_forward_at:
  // the hidden fault-injection flag (fault_injection.h). several_models: the
  // service status names the model warming up ("warming up ID: 30% ...").
  serving_models(int32_t n_threads, service_notifier& notifier, int64_t debug_fail_forward_at, bool several_models);
  ~serving_models();

  // Parts loaded ahead (start-up) for the model with this id; build() uses
  // them the first time it builds that model.
  void preload(const std::string& id, model_parts parts);

  // Builds a warmed-up serving model. Throws std::exception whose message
  // names the problem (flag names, not engine field names).
  std::unique_ptr<serving_model> build(const catalog_model& m);

  // Every running engine's loop beat within max_age_us (the systemd
  // watchdog's condition: a wedged engine stops the pings; a model warming up
  // does not count yet). True when none runs.
  bool all_engines_alive(int64_t max_age_us) const;
  // Pings the systemd watchdog when all_engines_alive(the watchdog period).
  void feed_watchdog();

 private:
  class live_model;
  friend class live_model;
  thread_pool pool_;
  device_turns turns_;
  service_notifier& notifier_;
  int64_t debug_fail_forward_at_;
  bool several_models_;
  mutable std::mutex mu_;
  std::set<const live_model*> live_;
  std::atomic<uint64_t> next_salt_;  // prefix-cache salts of adapter installs (odd: never 0)
  std::string preloaded_id_;
  std::unique_ptr<model_parts> preloaded_;
};

}  // namespace spate::cli
