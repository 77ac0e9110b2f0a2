// What every HTTP/WebSocket session shares: the model, the engine, the chat
// template, the metrics, the serve options and the server's lifecycle flags.
//
// Thread-safety: the references point at objects that are themselves safe to
// use from any I/O thread (engine::submit/cancel/stats, metrics, the const
// model/tokenizer/chat template). The flags are atomics.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/serve_options.h"

namespace spate {

struct loaded_model;
class engine;
class chat_template;
class server_metrics;

struct server_context {
  const loaded_model& model;
  engine& eng;
  const chat_template* tmpl = nullptr;  // null when the model has none and no --chat-template was given
  std::string tmpl_error;               // why tmpl is null (a parse error of the template), "" if simply absent
  server_metrics& metrics;
  cli::serve_options opts;
  std::string served_model_name;
  int32_t max_model_len = 0;
  int64_t created_unix_s = 0;

  std::atomic<bool> ready{false};       // warmup finished and not draining
  std::atomic<bool> draining{false};    // SIGTERM received: /ready 503, no new connections
  std::atomic<int32_t> n_connections{0};
  std::atomic<int64_t> n_inflight{0};   // requests generating (HTTP and WebSocket)
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
