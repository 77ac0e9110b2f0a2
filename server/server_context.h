// What every HTTP/WebSocket session shares: the model registry (the models,
// their engines, chat templates and metrics), the serve options and the
// server's lifecycle flags.
//
// Thread-safety: the registry is safe to use from any I/O thread, and so is
// what a lease on a model gives (engine::submit/cancel/stats, metrics, the
// const model/tokenizer/chat template). The flags are atomics; open_ws locks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "protocol/served_model.h"
#include "server/cors.h"
#include "server/model_registry.h"
#include "server/idle_connections.h"
#include "server/route_table.h"
#include "server/serve_options.h"
#include "server/ws_registry.h"

namespace spate {


// The spate API's routes (api_router.cpp): the OpenAI endpoints, the probes,
// the profiler and tokenizer endpoints and, when ui_enabled, the chat page.
route_table api_routes(bool ui_enabled);

struct server_context {
  // The models; requests take a lease on theirs (model_wait.h). Never null.
  model_registry* models;
  cli::serve_options opts;
  int64_t created_unix_s = 0;
  cors_policy cors{opts.cors};          // from opts (--allowed-origins ...)
  // What the router dispatches on and admission asks (public paths). Built
  // from opts; const once serving (tests add routes before they serve).
  route_table routes = api_routes(!opts.disable_ui);
  // Rewrites an engine refusal's text for clients: the engine names its
  // configuration fields (e.g. kv_cache_bytes), the command line installs its
  // flag names (cli::flag_names). Empty: the engine's text as is. Any thread.
  std::function<std::string(std::string)> describe_engine_error = {};

  std::atomic<bool> ready{false};       // warmup finished and not draining
  std::atomic<bool> draining{false};    // SIGTERM received: /ready 503, no new connections
  std::atomic<int32_t> n_connections{0};
  idle_connections idle{};              // keep-alive connections between requests (--max-connections reuse)
  std::atomic<int64_t> n_inflight{0};   // requests generating (HTTP and WebSocket)
  ws_registry open_ws{};                // open Responses WebSockets: the drain waits for them and closes them
  std::atomic<uint64_t> next_id{1};     // request ids

  // "prefix-<16 hex digits>", unique within the process.
  std::string make_id(const char* prefix);

  // The accepted API keys (--api-key plus --api-key-file); replaced on SIGHUP.
  // Empty: no authentication. Any thread.
  std::shared_ptr<const std::vector<std::string>> api_keys() const { return std::atomic_load(&api_keys_); }
  void set_api_keys(std::vector<std::string> keys) {
    std::atomic_store(&api_keys_, std::shared_ptr<const std::vector<std::string>>(
                                      std::make_shared<std::vector<std::string>>(std::move(keys))));
  }
  std::shared_ptr<const std::vector<std::string>> api_keys_ = std::make_shared<std::vector<std::string>>();
};

}  // namespace spate
