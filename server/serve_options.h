// Options of `spate serve` beyond the model and engine options: the listener,
// TLS, API keys, limits and timeouts. Read once from the command line into a
// typed struct (flag names follow vLLM's where the concepts match).
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "server/cors.h"

namespace spate::cli {

struct serve_options {
  std::string host = "127.0.0.1";       // --host
  int32_t port = 8000;                  // --port (0 = any free port; the chosen one is logged)
  std::string served_model_name;        // --served-model-name; default: the model file's stem (one model only)
  // Several models (model_registry.h): every *.gguf of --models-dir under its
  // file stem, plus each --model; loaded on demand.
  std::string models_dir;               // --models-dir
  int32_t max_loaded_models = 0;        // --max-loaded-models; 0 = no limit
  std::string models_memory_budget;     // --models-memory-budget, e.g. "8GiB": weights + KV of the loaded models; "" = no limit
  uint64_t models_memory_budget_bytes = 0;  // parsed by finish_serve_options
  double model_load_timeout_s = 600.0;  // --model-load-timeout: a request waits this long for its model to load
  double model_idle_unload_s = 0.0;     // --model-idle-unload: unload a model idle this long (0 = never; pinned never)
  bool strict_model_names = false;      // --strict-model-names: with one model served, other names still get 404
  // LoRA adapters (model/lora.h), vLLM's flags:
  std::vector<std::string> lora_modules;  // --lora-modules NAME=PATH or {"name", "path", "base_model_name"} (repeatable)
  int32_t max_loras = 4;                // --max-loras: adapters loaded at once per base model (all may share a step)
  int32_t max_lora_rank = 64;           // --max-lora-rank: larger adapters are refused at load
  // Runtime loading (POST /v1/load_lora_adapter, /v1/unload_lora_adapter; server/lora_paths.h):
  // off unless enabled, and then only from files below the allowed directories.
  bool enable_lora_runtime_loading = false;     // --enable-lora-runtime-loading
  std::vector<std::string> lora_allowed_dirs;   // --lora-allowed-dirs DIR[,DIR...] (repeatable)
  std::vector<std::string> lora_allowed_roots;  // their canonical paths, filled by finish_serve_options
  std::vector<std::string> api_keys;    // --api-key (repeatable); empty = no authentication
  std::string api_key_file;             // --api-key-file: one key per line (# comments); re-read on SIGHUP
  std::string ssl_keyfile;              // --ssl-keyfile (PEM)
  std::string ssl_certfile;             // --ssl-certfile (PEM)
  // --ssl-ciphers: the TLS 1.2 cipher list (OpenSSL syntax). Default: Mozilla's
  // "intermediate" profile without DHE, i.e. forward secrecy (ECDHE) and AEAD
  // (GCM, ChaCha20-Poly1305) only: no RSA key exchange, no CBC, no SHA-1.
  std::string ssl_ciphers =
      "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
      "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
  std::string chat_template_file;       // --chat-template: overrides the model's template
  int32_t n_io_threads = 2;             // --io-threads: threads of the I/O io_context
  // Tool calls: the model's output format (vLLM's --tool-call-parser names);
  // "" = detected from the chat template. Auto tool choice is always on;
  // --enable-auto-tool-choice is accepted for vLLM command lines.
  std::string tool_call_parser;         // --tool-call-parser
  // Reasoning output (vLLM's --reasoning-parser names: qwen3, deepseek_r1;
  // none turns it off); "" = detected from the chat template.
  std::string reasoning_parser;         // --reasoning-parser
  std::string json_whitespace = "bounded";  // --json-whitespace: bounded or compact (structured outputs, tool arguments)
  std::string pooling;                  // --pooling: mean, last or cls ("" = the GGUF's pooling_type, else last)
  bool disable_ui = false;              // --disable-ui: no chat page at GET /
  bool enable_auto_tool_choice = true;  // --enable-auto-tool-choice (always true)
  // CORS, as vLLM takes it: JSON lists ("*" = any), parsed into cors.
  std::string allowed_origins_json = R"(["*"])";  // --allowed-origins
  std::string allowed_methods_json = R"(["*"])";  // --allowed-methods
  std::string allowed_headers_json = R"(["*"])";  // --allowed-headers
  bool allow_credentials = false;                 // --allow-credentials
  cors_config cors;                               // filled by finish_serve_options
  // Limits (all documented in docs/api.md, "Limits"):
  uint64_t max_body_bytes = 8ull << 20;     // --max-body-bytes: request body; more -> 413
  uint32_t max_header_bytes = 16u << 10;    // request line + headers; more -> 431
  uint64_t max_ws_message_bytes = 8ull << 20;  // --max-ws-message-bytes: one WebSocket message
  int32_t max_connections = 1024;          // --max-connections: open connections at most
  // Timeouts, seconds:
  double header_timeout_s = 10.0;       // --header-timeout: first byte -> complete header
  double body_timeout_s = 30.0;         // --body-timeout: header -> complete body
  double idle_timeout_s = 60.0;         // --idle-timeout: keep-alive connection with no request
  double write_timeout_s = 30.0;        // --write-timeout: one write to a client that does not read
  double sse_keepalive_s = 5.0;         // --sse-keepalive: comment line while no token was sent
  // TGI's watermark (parameters.watermark; engine/sampler.h watermark_green):
  double watermark_gamma = 0.5;         // --watermark-gamma: green fraction of the vocabulary, (0, 1)
  float watermark_delta = 2.0f;         // --watermark-delta: logit bias of green tokens, [0, 100]
  double shutdown_timeout_s = 30.0;     // --shutdown-timeout: drain before in-flight requests are cancelled
  // The step profiler (POST /start_profile, /stop_profile), from the
  // environment as in vLLM: SPATE_PROFILER_ENABLED=true turns the routes on;
  // traces go to SPATE_PROFILER_DIR (default /tmp). Read by finish_serve_options.
  bool profiler_enabled = false;
  std::string profiler_dir = "/tmp";
};

// Bounds of the duration and count flags (docs/configuration.md, "Limits and
// timeouts"); finish_serve_options refuses values outside them (and NaN).
inline constexpr double k_min_interval_s = 0.01;   // the four timeouts, --sse-keepalive, --model-load-timeout: at least
inline constexpr double k_max_timeout_s = 86400;   // ... and at most (one day); --shutdown-timeout: [0, this]
inline constexpr double k_max_idle_unload_s = 1e9; // --model-idle-unload: [0, this] (about 31 years, as Ollama's keep_alive)
inline constexpr int32_t k_max_connections = 1 << 20;  // --max-connections: [1, this]

void add_serve_options(boost::program_options::options_description& desc, serve_options& opts);

// Validates the values. Returns "" or an error message.
std::string finish_serve_options(serve_options& opts);

// --api-key values plus the keys of --api-key-file (blank lines and lines
// starting with # ignored; surrounding whitespace trimmed). Throws
// std::runtime_error, naming the file, when it cannot be read, is a
// directory, holds a malformed key or holds no key at all: a key file that
// yields nothing never means "no authentication" (at start-up spate refuses
// to start; on SIGHUP the previous keys stay).
std::vector<std::string> load_api_keys(const serve_options& opts);

}  // namespace spate::cli
