// `spate serve`: the OpenAI-compatible server. Loads the model, binds the
// listener (so /health answers and /ready says 503 during warmup), warms the
// engine up, then serves until SIGINT/SIGTERM: drain (no new connections,
// /ready 503, requests in flight finish and WebSockets close with 1001, up to
// --shutdown-timeout), then cancel what is left and exit 0. A second signal
// forces the stop.
#include <signal.h>
#include <systemd/sd-daemon.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <spdlog/spdlog.h>
#include <sstream>
#include <string>
#include <vector>

#include "cli/draft_model.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "engine/engine_api.h"
#include "jinja/chat_template.h"
#include "cli/fault_injection.h"
#include "model/kv_cache.h"
#include "model/model_loader.h"
#include "protocol/constraint_compiler.h"
#include "protocol/harmony_constraint.h"
#include "protocol/reasoning_constraint.h"
#include "server/http_listener.h"
#include "server/metrics.h"
#include "server/serve_options.h"
#include "server/server_context.h"
#include "server/service_notifier.h"

namespace spate::cli {
namespace {

namespace po = boost::program_options;

constexpr size_t k_max_template_bytes = 1u << 20;

std::string read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > k_max_template_bytes) throw std::runtime_error(path + " is larger than 1 MiB");
  return s;
}

std::string special_text(const tokenizer& tok, int32_t id) {
  if (id < 0) return "";
  try {
    return tok.token_to_piece(id, /*special=*/true);
  } catch (const std::exception&) {
    return "";
  }
}

// Blocks until SIGINT/SIGTERM (or the timeout). Returns the signal, or 0 on timeout.
int wait_signal(const sigset_t& set, double timeout_s) {
  if (timeout_s < 0) {
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    return sig;
  }
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout_s);
  ts.tv_nsec = static_cast<long>((timeout_s - static_cast<double>(ts.tv_sec)) * 1e9);
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

// Blocks SIGINT, SIGTERM and SIGHUP so that the main thread takes them synchronously
// (every thread started afterwards inherits the mask) and ignores SIGPIPE. Returns the
// blocked set.
sigset_t block_signals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return sigs;
}

// The options of `spate serve`.
struct serve_command_options {
  model_options model;
  engine_options engine;
  serve_options serve;
  int64_t debug_fail_forward_at = 0;  // hidden --debug-fail-forward-at (fault_injection.h)
};

// Reads argv, then the --config file (the command line wins), into opts and validates
// them. Returns nullopt to go on, else the exit code: 0 after --help (printed to stdout),
// 2 for a bad option (the message is on stderr).
std::optional<int> parse_serve_command(int argc, char** argv, serve_command_options& opts) {
  po::options_description desc("spate serve: OpenAI-compatible HTTP/WebSocket server");
  add_model_options(desc, opts.model);
  add_engine_options(desc, opts.engine);
  add_serve_options(desc, opts.serve);
  std::string config_file;
  desc.add_options()("config", po::value(&config_file),
                     "INI-style file with any of these options (name = value); the command line overrides it")
                    ("help,h", "show this help");
  // Hidden: failure injection for the hardening tests, not in --help or --config.
  po::options_description hidden;
  hidden.add_options()("debug-fail-forward-at", po::value(&opts.debug_fail_forward_at));
  po::options_description all;
  all.add(desc).add(hidden);
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, all), vm);
    if (vm.count("config")) {
      const std::string path = vm["config"].as<std::string>();
      std::ifstream in(path);
      if (!in) throw std::runtime_error("--config " + path + ": cannot be read");
      // Values already stored from the command line win.
      po::store(po::parse_config_file(in, desc, /*allow_unregistered=*/false), vm);
    }
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "spate serve: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  std::string opt_err = finish_model_options(opts.model);
  if (opt_err.empty()) opt_err = finish_engine_options(opts.engine);
  if (opt_err.empty()) opt_err = finish_serve_options(opts.serve);
  if (!opt_err.empty()) {
    std::cerr << "spate serve: " << opt_err << "\n";
    return 2;
  }
  return std::nullopt;
}

// What the server is built from, loaded before the engine exists.
struct serve_inputs {
  std::vector<std::string> api_keys;
  std::unique_ptr<loaded_model> model;
  int32_t max_model_len = 0;
  std::unique_ptr<chat_template> tmpl;  // null when there is none or it is unusable
  std::string tmpl_error;               // why the model's template is unusable, or ""
  std::string served_name;              // --served-model-name, or the model file's stem
  draft_model draft;                    // --speculative-config's draft model, when it names one
};

// Compiles --chat-template FILE, or else the model's template (if any), into in.tmpl. A bad
// FILE is fatal: prints the error and returns false. A bad model template is logged as a
// warning and kept in in.tmpl_error (chat endpoints then answer 400).
bool load_chat_template(const serve_options& so, serve_inputs& in) {
  const loaded_model& model = *in.model;
  try {
    std::string src = so.chat_template_file.empty() ? model.chat_template : read_small_file(so.chat_template_file);
    if (!src.empty()) {
      in.tmpl = std::make_unique<chat_template>(std::move(src), special_text(*model.tok, model.tok->bos_id()),
                                                special_text(*model.tok, model.tok->eos_id()));
    }
  } catch (const std::exception& e) {
    if (!so.chat_template_file.empty()) {
      std::cerr << "spate serve: --chat-template: " << e.what() << "\n";
      return false;
    }
    in.tmpl_error = e.what();
    spdlog::warn("the model's chat template cannot be used ({}); chat endpoints will answer 400", in.tmpl_error);
  }
  return true;
}

// Loads the API keys, the model and the chat template into in. Returns nullopt to go on,
// else the exit code (2: API keys, --max-model-len or --chat-template; 1: the model), with
// the message on stderr.
std::optional<int> load_serve_inputs(serve_command_options& opts, service_notifier& notifier, serve_inputs& in) {
  try {
    in.api_keys = load_api_keys(opts.serve);
  } catch (const std::exception& e) {
    std::cerr << "spate serve: " << e.what() << "\n";
    return 2;
  }
  notifier.status("loading model " + opts.model.model_path);
  auto on_load = [&notifier](int pct, const std::string& what) {
    notifier.status("loading model: " + std::to_string(pct) + "% (" + what + ")");
  };
  if (const int rc = load_model_for_command("serve", opts.model, in.model, in.max_model_len, on_load); rc != 0) return rc;
  if (opts.engine.speculative.kind == speculative_config::method::draft_model) {
    notifier.status("loading draft model " + opts.engine.draft_model_path);
    if (auto err = load_draft_model(opts.engine.draft_model_path, *in.model, in.draft); !err.empty()) {
      std::cerr << "spate serve: --speculative-config: " << err << "\n";
      return 2;
    }
  }
  if (!load_chat_template(opts.serve, in)) return 2;
  in.served_name = opts.serve.served_model_name;
  if (in.served_name.empty()) in.served_name = std::filesystem::path(opts.model.model_path).stem().string();
  return std::nullopt;
}

// The engine configuration with the systemd hooks: the watchdog is fed by the engine loop
// only (so a wedged engine stops it), and warmup progress goes to the service status.
engine_config serving_engine_config(const serve_command_options& opts, int32_t max_model_len,
                                    service_notifier& notifier) {
  engine_config ecfg = make_engine_config(opts.model, opts.engine, max_model_len);
  ecfg.heartbeat_interval_us = notifier.heartbeat_interval_us();
  if (ecfg.heartbeat_interval_us > 0) ecfg.on_heartbeat = [&notifier] { notifier.watchdog(); };
  ecfg.on_warmup_progress = [&notifier](int32_t pct, int32_t done, int32_t total) {
    notifier.status("warming up: " + std::to_string(pct) + "% (" + std::to_string(done) + "/" + std::to_string(total) + " buckets)");
  };
  return ecfg;
}

// Adopts the socket systemd passed (socket activation), else binds --host/--port. Throws
// when systemd passed more than one socket or the bind fails.
void open_listener(http_listener& listener) {
  const int n_fds = sd_listen_fds(1);
  if (n_fds > 1)
    throw std::runtime_error("socket activation passed " + std::to_string(n_fds) + " sockets; spate serves one");
  if (n_fds == 1) {
    listener.adopt(SD_LISTEN_FDS_START);
    spdlog::info("Using the socket passed by systemd (LISTEN_FDS), port {}", listener.port());
  } else {
    listener.listen();
  }
}

// SIGHUP: reloads what can change without a restart, the TLS certificate/key and the API
// keys. A part that fails keeps its previous settings; the failure is logged.
void reload_on_sighup(http_listener& listener, server_context& ctx, const serve_options& so,
                      service_notifier& notifier) {
  std::string err = listener.reload_tls();
  try {
    auto keys = load_api_keys(so);
    // Configured authentication never silently becomes none (load_api_keys refuses a
    // key file without keys; this guards the invariant whatever the sources).
    if (keys.empty() && !ctx.api_keys()->empty()) throw std::runtime_error("the reload yields no API key");
    ctx.set_api_keys(std::move(keys));
  } catch (const std::exception& e) {
    err += (err.empty() ? "" : "; ") + std::string(e.what());
  }
  if (err.empty()) {
    spdlog::info("SIGHUP: reloaded the TLS certificate and API keys");
    notifier.reloading();
  } else {
    spdlog::error("SIGHUP: reload failed, keeping the previous settings where they failed: {}", err);
  }
}

// Drains after the stop signal sig: /ready 503, no new connections, open WebSockets are told
// to close (1001, once their response is written: ws_responses.h); requests in flight and
// open WebSockets get up to --shutdown-timeout (a second SIGINT/SIGTERM cuts that short);
// then the engine stops (what is left finishes with reason abort), the sessions get up to
// 2 s to write their final events and close their WebSockets, and the listener stops (what
// is still open is cut).
void drain_and_stop(const sigset_t& sigs, int sig, const serve_options& so, server_context& ctx, engine& eng,
                    http_listener& listener, service_notifier& notifier) {
  spdlog::info("Received {}: draining (up to {} s)", sig == SIGINT ? "SIGINT" : "SIGTERM", so.shutdown_timeout_s);
  notifier.stopping();
  ctx.ready = false;
  ctx.draining = true;
  listener.stop_accepting();
  ctx.open_ws.begin_drain();
  // A WebSocket's events are written after its response stops counting in n_inflight, and an
  // idle one counts nowhere else: the drain ends when both are 0.
  const auto busy = [&ctx] { return ctx.n_inflight.load() > 0 || ctx.open_ws.open() > 0; };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(so.shutdown_timeout_s);
  bool forced = false;
  while (busy()) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    const int again = wait_signal(sigs, std::min(left, 0.05));
    if (again == SIGINT || again == SIGTERM) {
      forced = true;
      break;
    }
  }
  if (busy()) {
    spdlog::warn("{}: cancelling {} request(s) still in flight; {} WebSocket(s) open", forced ? "second signal" : "shutdown timeout",
                 ctx.n_inflight.load(), ctx.open_ws.open());
  }
  eng.stop();  // in-flight requests finish with reason abort
  // Let the sessions write their final events and close their WebSockets (bounded).
  const auto flush_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (busy() && std::chrono::steady_clock::now() < flush_deadline) {
    const int again = wait_signal(sigs, 0.02);
    if (again == SIGINT || again == SIGTERM) break;
  }
  listener.stop();
}

// --tool-call-parser, else the format the chat template writes.
api::tool_call_format tool_format_of(const serve_options& so, const chat_template* tmpl) {
  if (!so.tool_call_parser.empty()) return *api::tool_call_format_from_name(so.tool_call_parser);
  return tmpl ? api::detect_tool_call_format(tmpl->source()) : api::tool_call_format::generic;
}

// --reasoning-parser, else the one the chat template calls for; logs which. The
// tokens the think-tag constraints need come with it (null otherwise). Throws
// when the flag names a parser the model's vocabulary cannot serve.
api::reasoning_parser reasoning_parser_of(const serve_options& so, const chat_template* tmpl, const tokenizer& tok,
                                          std::shared_ptr<const api::reasoning_vocab>& vocab) {
  std::string why = "--reasoning-parser";
  api::reasoning_parser p = api::reasoning_parser::none;
  if (!so.reasoning_parser.empty()) {
    p = *api::reasoning_parser_from_name(so.reasoning_parser);
  } else if (tmpl) {
    p = api::detect_reasoning_parser(*tmpl, &why);
  } else {
    why = "the model has no chat template";
  }
  if (p == api::reasoning_parser::qwen3 || p == api::reasoning_parser::deepseek_r1) {
    vocab = std::make_shared<const api::reasoning_vocab>(tok);
    if (!vocab->tags_are_text()) {
      const std::string msg = "<think> or </think> is a control token of this model: its text never reaches the output";
      if (!so.reasoning_parser.empty()) throw std::runtime_error("--reasoning-parser " + so.reasoning_parser + ": " + msg);
      spdlog::warn("Reasoning: not split ({})", msg);
      vocab.reset();
      return api::reasoning_parser::none;
    }
  }
  if (p == api::reasoning_parser::none) {
    spdlog::info("Reasoning: not split (no reasoning parser: {})", why);
  } else if (p == api::reasoning_parser::openai_gptoss) {
    spdlog::info("Reasoning: openai_gptoss parser, reasoning_content from harmony's analysis channel ({})", why);
  } else {
    spdlog::info("Reasoning: {} parser, reasoning_content split from <think>...</think> ({})", api::reasoning_parser_name(p), why);
  }
  return p;
}

// The tokens harmony output needs (harmony_constraint.h), when the model may
// write it: null otherwise. Throws when a flag asks for harmony and the
// vocabulary cannot serve it (its markers never reach the output text).
std::shared_ptr<const api::harmony_vocab> harmony_vocab_of(const serve_options& so, api::reasoning_parser reasoning,
                                                           api::tool_call_format tools, const tokenizer& tok) {
  if (reasoning != api::reasoning_parser::openai_gptoss && tools != api::tool_call_format::openai) return nullptr;
  auto vocab = std::make_shared<const api::harmony_vocab>(tok);
  if (vocab->markers_are_text()) return vocab;
  const std::string msg = "harmony's <|start|>, <|channel|>, <|message|> and <|end|> are not tokens whose text reaches the output";
  if (!so.reasoning_parser.empty() || !so.tool_call_parser.empty()) throw std::runtime_error(msg);
  spdlog::warn("Harmony: {}; reasoning and tool calls will not be parsed well", msg);
  return vocab;
}

// --pooling, else the GGUF's pooling_type, else last (as vLLM pools decoder-only models).
pooling_type pooling_of(const serve_options& so, const model_config& c) {
  if (so.pooling == "mean" || (so.pooling.empty() && c.gguf_pooling == 1)) return pooling_type::mean;
  if (so.pooling == "cls" || (so.pooling.empty() && c.gguf_pooling == 2)) return pooling_type::cls;
  return pooling_type::last;
}

// Builds the executor, engine, server context and listener; binds, warms up, reports ready,
// then serves until SIGINT/SIGTERM (SIGHUP reloads) and drains. Throws on any start-up
// failure (the message may name engine config fields, see flag_names).
void serve(const sigset_t& sigs, const serve_command_options& opts, serve_inputs& in, service_notifier& notifier) {
  const serve_options& so = opts.serve;
  engine_config ecfg = serving_engine_config(opts, in.max_model_len, notifier);
  model_executor model_exec(*in.model, make_executor_config(opts.model));
  std::unique_ptr<model_executor> draft_exec;  // runs on model_exec's threads; outlives the engine
  if (in.draft.model) draft_exec = attach_draft_model(in.draft, make_executor_config(opts.model), model_exec, ecfg);
  fault_injecting_executor exec(model_exec, opts.debug_fail_forward_at);
  // Before the engine, so it outlives it: the engine's event callbacks count generated tokens in it.
  server_metrics metrics(in.served_name, in.max_model_len);
  engine eng(exec, *in.model->tok, ecfg);
  metrics.set_cache_config({{"block_size", std::to_string(exec.block_size())},
                            {"cache_dtype", opts.model.kv_cache_dtype},
                            {"enable_prefix_caching", ecfg.enable_prefix_caching ? "True" : "False"},
                            {"num_cpu_blocks", std::to_string(exec.n_kv_blocks())},
                            {"num_gpu_blocks", "0"},
                            {"kv_cache_memory_bytes", std::to_string(static_cast<uint64_t>(exec.n_kv_blocks()) *
                                                                               kv_cache::bytes_per_block(in.model->config, exec.block_size(), parse_kv_dtype(opts.model.kv_cache_dtype)))}});
  if (ecfg.speculative.enabled()) metrics.set_num_speculative_tokens(ecfg.speculative.num_speculative_tokens);
  api::constraint_compiler constraints(*in.model->tok, so.json_whitespace == "compact");
  const api::tool_call_format tool_format = tool_format_of(so, in.tmpl.get());
  spdlog::info("Tool calls: {} format ({})", api::tool_call_format_name(tool_format),
               so.tool_call_parser.empty() ? "from the chat template" : "--tool-call-parser");
  const pooling_type pooling = pooling_of(so, in.model->config);
  spdlog::info("Embeddings: {} pooling over {} dimensions, normalized ({})", pooling_name(pooling), in.model->config.n_embd,
               so.pooling.empty() ? (in.model->config.gguf_pooling > 0 ? "the model's pooling_type" : "default") : "--pooling");
  std::shared_ptr<const api::reasoning_vocab> reasoning_tokens;
  const api::reasoning_parser reasoning = reasoning_parser_of(so, in.tmpl.get(), *in.model->tok, reasoning_tokens);
  api::served_model sm{in.model->tok.get(), in.model->config.n_vocab, in.max_model_len, in.served_name, in.tmpl.get(),
                       in.tmpl_error, &constraints, tool_format, in.model->config.n_embd, pooling, reasoning, reasoning_tokens,
                       harmony_vocab_of(so, reasoning, tool_format, *in.model->tok)};
  server_context ctx{std::move(sm), &eng, metrics, so, static_cast<int64_t>(std::time(nullptr))};
  ctx.set_api_keys(in.api_keys);
  if (in.api_keys.empty()) {
    const bool loopback = so.host == "127.0.0.1" || so.host == "::1" || so.host.starts_with("127.");
    if (loopback) {
      spdlog::info("Authentication: none (no --api-key or --api-key-file); every route is open");
    } else {
      spdlog::warn("Authentication: none, and --host {} is not a loopback address: anyone who reaches it can use every route; "
                   "set --api-key-file", so.host);
    }
  } else {
    spdlog::info("Authentication: {} API key(s){}", in.api_keys.size(), so.api_key_file.empty() ? "" : " (--api-key-file is re-read on SIGHUP)");
  }
  ctx.describe_engine_error = flag_names;
  http_listener listener(ctx);
  open_listener(listener);
  listener.start();
  spdlog::info("Listening on {}://{}:{} (model '{}', max_model_len {}); warming up", listener.tls() ? "https" : "http",
               so.host, listener.port(), in.served_name, in.max_model_len);
  eng.start();
  exec.arm();  // injected failures count from here (hidden flag; warmup passes do not count)
  ctx.ready = true;
  notifier.ready();
  spdlog::info("Ready: {}://{}:{}/v1", listener.tls() ? "https" : "http", so.host, listener.port());

  int sig = 0;
  while ((sig = wait_signal(sigs, -1)) == SIGHUP) reload_on_sighup(listener, ctx, so, notifier);
  drain_and_stop(sigs, sig, so, ctx, eng, listener, notifier);
  spdlog::info("Stopped");
}

}  // namespace

int run_serve(int argc, char** argv) {
  const sigset_t sigs = block_signals();
  install_sigbus_handler();
  serve_command_options opts;
  if (const auto rc = parse_serve_command(argc, argv, opts)) return *rc;
  service_notifier notifier;
  serve_inputs in;
  if (const auto rc = load_serve_inputs(opts, notifier, in)) return *rc;
  try {
    serve(sigs, opts, in, notifier);
  } catch (const std::exception& e) {
    const std::string msg = flag_names(e.what());
    spdlog::error("{}", msg);
    std::cerr << "spate serve: " << msg << "\n";
    return 1;
  }
  return 0;
}

}  // namespace spate::cli
