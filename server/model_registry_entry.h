// The registry's per-model state, shared by model_registry.cpp and
// model_registry_lora.cpp (not part of the registry's interface).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "server/metrics.h"
#include "server/model_registry.h"

namespace spate {

struct model_registry::entry {
  model_spec spec;
  model_status status = model_status::unloaded;
  std::string error;
  std::shared_ptr<serving_model> model;      // while loaded
  int32_t n_leases = 0;
  uint64_t last_used = 0;                    // LRU clock
  std::chrono::steady_clock::time_point idle_since = std::chrono::steady_clock::now();
  std::optional<double> keep_alive_s;        // Ollama's keep_alive of the last request naming one: replaces idle_unload_s
  const char* drain_reason = nullptr;        // unload once idle (room for another model, or /models/unload)
  uint64_t wanted_seq = 0;                   // > 0: a load is queued (FIFO by this)
  std::vector<model_acquired_fn> waiters;    // on_ready of queued requests and load calls
  std::unique_ptr<server_metrics> metrics;
  engine_stats past;                         // counters of the engines of earlier loads
  bool cache_config_set = false;
  // An adapter (spec.parent set): no longer listed or served, its slot freed
  // once its leases are gone; n_waiting: requests waiting for its base.
  bool removed = false;
  int32_t n_waiting = 0;
};

}  // namespace spate
