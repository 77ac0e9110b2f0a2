#include "server/serve_options.h"

#include "protocol/reasoning.h"
#include "protocol/tool_calls.h"
#include "server/lora_paths.h"
#include "util/byte_size.h"
#include "util/regular_file.h"

#include <boost/asio/ip/address.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace spate::cli {

namespace po = boost::program_options;

namespace {

// A flag's value for an error message: as given where it is readable (1e-300, 86401).
std::string seconds_text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// A string flag that, when given, must not be empty ("" is a mistake, never "unset").
std::function<void(const std::string&)> not_empty(const char* flag) {
  return [flag](const std::string& v) {
    if (v.empty()) throw po::error(std::string(flag) + " must not be empty");
  };
}

}  // namespace

void add_serve_options(po::options_description& desc, serve_options& o) {
  desc.add_options()
      ("host", po::value(&o.host)->default_value(o.host), "address to listen on")
      ("port", po::value(&o.port)->default_value(o.port), "TCP port (0 = any free port)")
      ("served-model-name", po::value(&o.served_model_name)->notifier(not_empty("--served-model-name")), "model name in the API (default: the GGUF file name without .gguf)")
      ("models-dir", po::value(&o.models_dir)->notifier(not_empty("--models-dir")), "serve every *.gguf in this directory under its file name without .gguf, loaded on demand")
      ("max-loaded-models", po::value(&o.max_loaded_models)->default_value(o.max_loaded_models),
       "models loaded at once at most; the least recently used idle one is unloaded to make room (0 = no limit)")
      ("models-memory-budget", po::value(&o.models_memory_budget),
       "weights plus KV cache of the loaded models at most, e.g. 8GiB (default: no limit)")
      ("model-load-timeout", po::value(&o.model_load_timeout_s)->default_value(o.model_load_timeout_s, "600"),
       "seconds a request waits for its model to load (503 beyond)")
      ("model-idle-unload", po::value(&o.model_idle_unload_s)->default_value(o.model_idle_unload_s, "0"),
       "unload a model after this many idle seconds (0 = never; pinned models never)")
      ("strict-model-names", po::bool_switch(&o.strict_model_names),
       "answer 404 to a request naming a model that is not served even when only one model is served (default: the only model answers any name)")
      ("lora-modules", po::value(&o.lora_modules)->composing(),
       "LoRA adapter served as model NAME: NAME=PATH, or {\"name\": ..., \"path\": ..., \"base_model_name\": ...} (repeatable)")
      ("max-loras", po::value(&o.max_loras)->default_value(o.max_loras), "LoRA adapters loaded at once per base model")
      ("max-lora-rank", po::value(&o.max_lora_rank)->default_value(o.max_lora_rank), "largest LoRA rank accepted")
      ("enable-lora", po::bool_switch(), "accepted for vLLM command lines: LoRA is always enabled")
      ("enable-lora-runtime-loading", po::bool_switch(&o.enable_lora_runtime_loading),
       "allow POST /v1/load_lora_adapter and /v1/unload_lora_adapter (off: they answer 404); needs --lora-allowed-dirs")
      ("lora-allowed-dirs", po::value(&o.lora_allowed_dirs)->composing(),
       "directories runtime-loaded LoRA adapters may be read from, DIR[,DIR...] (repeatable); paths are resolved (symbolic links, ..) before the check")
      ("api-key", po::value(&o.api_keys)->composing(), "require 'Authorization: Bearer KEY' on /v1 and tokenizer routes (repeatable)")
      ("api-key-file", po::value(&o.api_key_file), "file with one API key per line (# comments); re-read on SIGHUP")
      ("ssl-keyfile", po::value(&o.ssl_keyfile), "TLS private key (PEM); with --ssl-certfile serves HTTPS/WSS")
      ("ssl-certfile", po::value(&o.ssl_certfile), "TLS certificate chain (PEM)")
      ("ssl-ciphers", po::value(&o.ssl_ciphers)->default_value(o.ssl_ciphers), "TLS 1.2 cipher list (OpenSSL syntax; TLS 1.3 suites are OpenSSL's defaults). Default: ECDHE with AEAD only")
      ("chat-template", po::value(&o.chat_template_file), "Jinja chat template file overriding the model's")
      ("pooling", po::value(&o.pooling), "pooling of /v1/embeddings: mean, last or cls (default: the model's pooling_type, else last)")
      ("json-whitespace", po::value(&o.json_whitespace)->default_value(o.json_whitespace),
       "whitespace in constrained JSON (structured outputs, tool arguments): bounded (one space, or a newline and up to 20 spaces or tabs, between tokens) or compact (none, as vLLM's disable_any_whitespace)")
      ("tool-call-parser", po::value(&o.tool_call_parser), "tool-call format of the model's output: hermes (qwen), llama3_json, mistral, openai (harmony) or generic (default: from the chat template)")
      ("enable-auto-tool-choice", po::bool_switch(), "accepted for vLLM compatibility: tool_choice \"auto\" is always enabled")
      ("reasoning-parser", po::value(&o.reasoning_parser), "split reasoning into reasoning_content: qwen3, deepseek_r1 (<think>), openai_gptoss (harmony) or none (default: from the chat template)")
      ("allowed-origins", po::value(&o.allowed_origins_json)->default_value(o.allowed_origins_json), "CORS: allowed origins, a JSON list (\"*\" = any)")
      ("allowed-methods", po::value(&o.allowed_methods_json)->default_value(o.allowed_methods_json), "CORS: allowed methods, a JSON list")
      ("allowed-headers", po::value(&o.allowed_headers_json)->default_value(o.allowed_headers_json), "CORS: allowed request headers, a JSON list")
      ("allow-credentials", po::bool_switch(&o.allow_credentials), "CORS: allow credentials (cookies, Authorization) from allowed origins")
      ("disable-ui", po::bool_switch(&o.disable_ui), "serve no chat page at GET /")
      ("io-threads", po::value(&o.n_io_threads)->default_value(o.n_io_threads), "threads running the network I/O")
      ("max-body-bytes", po::value(&o.max_body_bytes)->default_value(o.max_body_bytes), "largest accepted request body (413 beyond)")
      ("max-ws-message-bytes", po::value(&o.max_ws_message_bytes)->default_value(o.max_ws_message_bytes), "largest accepted WebSocket message")
      ("max-connections", po::value(&o.max_connections)->default_value(o.max_connections), "open connections at most; at the limit the oldest idle keep-alive connection is closed to make room, else the new one")
      ("header-timeout", po::value(&o.header_timeout_s)->default_value(o.header_timeout_s), "seconds from a request's first byte to its complete header")
      ("body-timeout", po::value(&o.body_timeout_s)->default_value(o.body_timeout_s), "seconds to receive a request body")
      ("idle-timeout", po::value(&o.idle_timeout_s)->default_value(o.idle_timeout_s), "seconds a keep-alive connection may wait for its next request")
      ("write-timeout", po::value(&o.write_timeout_s)->default_value(o.write_timeout_s), "seconds one write may wait on a client that does not read")
      ("sse-keepalive", po::value(&o.sse_keepalive_s)->default_value(o.sse_keepalive_s), "seconds without data before an SSE keep-alive comment")
      ("watermark-gamma", po::value(&o.watermark_gamma)->default_value(o.watermark_gamma, "0.5"),
       "TGI's watermark (parameters.watermark): the fraction of the vocabulary on each step's green list, in (0, 1)")
      ("watermark-delta", po::value(&o.watermark_delta)->default_value(o.watermark_delta, "2"),
       "TGI's watermark: the bias added to the green tokens' logits, in [0, 100]")
      ("shutdown-timeout", po::value(&o.shutdown_timeout_s)->default_value(o.shutdown_timeout_s), "seconds to drain requests in flight on shutdown");
}

std::string finish_serve_options(serve_options& o) {
  if (o.port < 0 || o.port > 65535) return "--port must be in [0, 65535]";
  boost::system::error_code host_ec;
  (void)boost::asio::ip::make_address(o.host, host_ec);
  if (host_ec) return "--host must be an IP address such as 127.0.0.1, 0.0.0.0 or ::1, got '" + o.host + "'";
  if (o.ssl_keyfile.empty() != o.ssl_certfile.empty()) return "--ssl-keyfile and --ssl-certfile go together";
  if (o.n_io_threads < 1 || o.n_io_threads > 64) return "--io-threads must be in [1, 64]";
  if (o.max_body_bytes < 1024 || o.max_body_bytes > (1ull << 30)) return "--max-body-bytes must be in [1024, 1GiB]";
  if (o.max_ws_message_bytes < 1024 || o.max_ws_message_bytes > (1ull << 30)) return "--max-ws-message-bytes must be in [1024, 1GiB]";
  if (o.max_connections < 1 || o.max_connections > k_max_connections)
    return "--max-connections must be in [1, " + std::to_string(k_max_connections) + "]";
  if (o.max_loaded_models < 0) return "--max-loaded-models must be >= 0";
  if (o.max_loras < 1 || o.max_loras > 256) return "--max-loras must be in [1, 256]";
  if (o.max_lora_rank < 1 || o.max_lora_rank > 4096) return "--max-lora-rank must be in [1, 4096]";
  if (auto err = resolve_lora_allowed_dirs(o.lora_allowed_dirs, o.lora_allowed_roots); !err.empty()) return err;
  if (o.enable_lora_runtime_loading && o.lora_allowed_roots.empty())
    return "--enable-lora-runtime-loading needs --lora-allowed-dirs (the directories adapters may be loaded from)";
  if (!(o.model_load_timeout_s >= k_min_interval_s && o.model_load_timeout_s <= k_max_timeout_s))
    return "--model-load-timeout must be in [0.01, 86400] seconds, got " + seconds_text(o.model_load_timeout_s);
  if (!(o.model_idle_unload_s >= 0 && o.model_idle_unload_s <= k_max_idle_unload_s))
    return "--model-idle-unload must be in [0, 1e9] seconds (0 = never), got " + seconds_text(o.model_idle_unload_s);
  if (!o.models_memory_budget.empty()) {
    const auto b = parse_byte_size(o.models_memory_budget);
    if (!b || *b == 0) return "--models-memory-budget must be a size such as 8GiB, got '" + o.models_memory_budget + "'";
    o.models_memory_budget_bytes = *b;
  }
  if (!o.pooling.empty() && o.pooling != "mean" && o.pooling != "last" && o.pooling != "cls")
    return "--pooling must be one of mean, last, cls; got '" + o.pooling + "'";
  if (!(o.watermark_gamma > 0 && o.watermark_gamma < 1)) return "--watermark-gamma must be in (0, 1)";
  if (!(o.watermark_delta >= 0 && o.watermark_delta <= 100)) return "--watermark-delta must be in [0, 100]";
  if (o.json_whitespace != "bounded" && o.json_whitespace != "compact")
    return "--json-whitespace must be bounded or compact; got '" + o.json_whitespace + "'";
  if (!o.reasoning_parser.empty() && !api::reasoning_parser_from_name(o.reasoning_parser))
    return "--reasoning-parser must be one of " + std::string(api::k_reasoning_parser_names) + "; got '" + o.reasoning_parser + "'";
  if (!o.tool_call_parser.empty() && !api::tool_call_format_from_name(o.tool_call_parser))
    return "--tool-call-parser must be one of hermes, qwen, llama3_json, mistral, openai, generic; got '" + o.tool_call_parser + "'";
  for (auto [name, v] : {std::pair{"--header-timeout", o.header_timeout_s}, {"--body-timeout", o.body_timeout_s},
                         {"--idle-timeout", o.idle_timeout_s}, {"--write-timeout", o.write_timeout_s},
                         {"--sse-keepalive", o.sse_keepalive_s}}) {
    if (!(v >= k_min_interval_s && v <= k_max_timeout_s))
      return std::string(name) + " must be in [0.01, 86400] seconds, got " + seconds_text(v);
  }
  if (!(o.shutdown_timeout_s >= 0 && o.shutdown_timeout_s <= k_max_timeout_s))
    return "--shutdown-timeout must be in [0, 86400] seconds, got " + seconds_text(o.shutdown_timeout_s);
  for (const auto& k : o.api_keys) if (k.empty()) return "--api-key must not be empty";
  for (auto [flag, text, out] : {std::tuple{"--allowed-origins", &o.allowed_origins_json, &o.cors.allowed_origins},
                                 {"--allowed-methods", &o.allowed_methods_json, &o.cors.allowed_methods},
                                 {"--allowed-headers", &o.allowed_headers_json, &o.cors.allowed_headers}}) {
    if (auto err = parse_json_string_list(*text, flag, *out); !err.empty()) return err;
  }
  o.cors.allow_credentials = o.allow_credentials;
  // The Fetch standard forbids credentials with "Access-Control-Allow-Origin: *"; reflecting
  // every origin instead would let any web page make credentialed requests (with "null" too).
  if (o.allow_credentials) {
    for (const auto& origin : o.cors.allowed_origins) {
      if (origin == "*") return "--allow-credentials cannot be combined with --allowed-origins '[\"*\"]' (the default): list the origins allowed to send credentials, e.g. --allowed-origins '[\"https://app.example\"]'";
    }
  }
  if (o.ssl_ciphers.empty()) return "--ssl-ciphers must not be empty";
  if (const char* e = std::getenv("SPATE_PROFILER_ENABLED"); e && *e) {
    const std::string v(e);
    if (v == "1" || v == "true" || v == "True" || v == "TRUE") {
      o.profiler_enabled = true;
    } else if (v != "0" && v != "false" && v != "False" && v != "FALSE") {
      return "SPATE_PROFILER_ENABLED must be true or false, got '" + v + "'";
    }
  }
  if (const char* e = std::getenv("SPATE_PROFILER_DIR"); e && *e) o.profiler_dir = e;
  return "";
}

std::vector<std::string> load_api_keys(const serve_options& o) {
  std::vector<std::string> keys = o.api_keys;
  if (o.api_key_file.empty()) return keys;
  const std::string what = "--api-key-file " + o.api_key_file;
  std::error_code fs_ec;
  const auto st = std::filesystem::status(o.api_key_file, fs_ec);
  if (fs_ec || !std::filesystem::exists(st)) throw std::runtime_error(what + ": cannot be read (no such file)");
  if (std::filesystem::is_directory(st)) throw std::runtime_error(what + ": is a directory, not a file of keys");
  std::string text;  // a FIFO or device is refused without blocking
  if (auto err = read_regular_file(o.api_key_file, text, 64u << 20); !err.empty()) throw std::runtime_error(what + ": cannot be read: " + err);
  std::istringstream in(text);
  std::string line;
  int n_lines = 0;
  size_t n_file_keys = 0;
  while (std::getline(in, line)) {
    if (++n_lines > 100000) throw std::runtime_error(what + ": more than 100000 lines");
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    const auto e = line.find_last_not_of(" \t\r");
    std::string key = line.substr(b, e - b + 1);
    for (char c : key) {
      if (c < 0x21 || c > 0x7e) throw std::runtime_error(what + ": line " + std::to_string(n_lines) + " is not a printable ASCII key");
    }
    keys.push_back(std::move(key));
    ++n_file_keys;
  }
  if (in.bad()) throw std::runtime_error(what + ": read error");
  // An empty file is a mistake (truncated, half-written, the wrong path), never a request to
  // turn authentication off: refuse it, whatever --api-key holds.
  if (n_file_keys == 0) throw std::runtime_error(what + ": holds no API key (empty, or only blank and # lines)");
  return keys;
}

}  // namespace spate::cli
