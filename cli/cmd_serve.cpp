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

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/fault_injection.h"
#include "cli/model_catalog.h"
#include "cli/serving_models.h"
#include "server/http_listener.h"
#include "server/metrics.h"
#include "server/serve_options.h"
#include "server/server_context.h"
#include "server/service_notifier.h"
#include "util/regular_file.h"

namespace spate::cli {
namespace {

namespace po = boost::program_options;

constexpr uint64_t k_max_config_bytes = 4u << 20;  // --config file, at most

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
  section_options model_sections;     // the config file's [model.NAME] keys (model_catalog.h)
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
      std::string text;  // a directory, FIFO or device (/dev/zero) is refused without blocking
      if (auto err = read_regular_file(path, text, k_max_config_bytes); !err.empty())
        throw std::runtime_error("--config " + path + ": cannot be read: " + err);
      std::istringstream in(text);
      // Values already stored from the command line win. The model sections'
      // keys are not options: collected here, checked by collect_models.
      po::parsed_options parsed = po::parse_config_file(in, desc, /*allow_unregistered=*/true);
      for (const auto& o : parsed.options) {
        if (!o.unregistered) continue;
        if (!o.string_key.starts_with("model.")) throw std::runtime_error("--config " + path + ": unknown option '" + o.string_key + "'");
        opts.model_sections.emplace_back(o.string_key, o.value.empty() ? std::string() : o.value.front());
      }
      po::store(parsed, vm);
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
  opts.model.several_models_ok = true;
  std::string opt_err = finish_model_options(opts.model);
  if (opt_err.empty()) opt_err = finish_engine_options(opts.engine);
  if (opt_err.empty()) opt_err = finish_serve_options(opts.serve);
  if (!opt_err.empty()) {
    std::cerr << "spate serve: " << opt_err << "\n";
    return 2;
  }
  return std::nullopt;
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
// then the engines stop (what is left finishes with reason abort), the sessions get up to
// 2 s to write their final events and close their WebSockets, and the listener stops (what
// is still open is cut).
void drain_and_stop(const sigset_t& sigs, int sig, const serve_options& so, server_context& ctx, http_listener& listener,
                    service_notifier& notifier) {
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
  ctx.models->stop_engines();  // in-flight requests finish with reason abort
  // Let the sessions write their final events and close their WebSockets (bounded).
  const auto flush_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (busy() && std::chrono::steady_clock::now() < flush_deadline) {
    const int again = wait_signal(sigs, 0.02);
    if (again == SIGINT || again == SIGTERM) break;
  }
  listener.stop();
}

// Logs who may use the routes.
void log_authentication(const serve_options& so, const std::vector<std::string>& keys) {
  if (keys.empty()) {
    const bool loopback = so.host == "127.0.0.1" || so.host == "::1" || so.host.starts_with("127.");
    if (loopback) {
      spdlog::info("Authentication: none (no --api-key or --api-key-file); every route is open");
    } else {
      spdlog::warn("Authentication: none, and --host {} is not a loopback address: anyone who reaches it can use every route; "
                   "set --api-key-file", so.host);
    }
  } else {
    spdlog::info("Authentication: {} API key(s){}", keys.size(), so.api_key_file.empty() ? "" : " (--api-key-file is re-read on SIGHUP)");
  }
}

// What the listening line says of the models.
std::string describe_models(const std::vector<catalog_model>& catalog, bool single, int32_t max_model_len) {
  std::string adapters;
  for (const auto& m : catalog)
    if (!m.spec.parent.empty()) adapters += (adapters.empty() ? "; LoRA adapters: " : ", ") + m.spec.id;
  if (single) return "model '" + catalog.front().spec.id + "', max_model_len " + std::to_string(max_model_len) + adapters;
  std::string names;
  for (const auto& m : catalog)
    if (m.spec.parent.empty()) names += (names.empty() ? "" : ", ") + m.spec.id + (m.spec.error.empty() ? "" : " (error)");
  return "models " + names + adapters;
}

// Builds the models' registry, the server context and the listener; binds,
// loads (and warms up) the pinned models, reports ready, then serves until
// SIGINT/SIGTERM (SIGHUP reloads) and drains. Throws on any start-up failure
// (the message names flags, see flag_names).
void serve(const sigset_t& sigs, const serve_command_options& opts, std::vector<catalog_model>& catalog, bool single,
           std::vector<std::string> api_keys, std::optional<model_parts> preloaded, service_notifier& notifier) {
  const serve_options& so = opts.serve;
  serving_models builder(opts.model.n_threads, notifier, opts.debug_fail_forward_at, !single);
  const int32_t single_len = preloaded ? preloaded->max_model_len : 0;
  if (preloaded) {
    builder.preload(catalog.front().spec.id, std::move(*preloaded));
    catalog.front().spec.max_model_len = single_len;
  }
  std::vector<model_spec> specs;
  for (const auto& m : catalog) specs.push_back(m.spec);
  registry_options ro;
  ro.max_loaded_models = so.max_loaded_models;
  ro.memory_budget_bytes = so.models_memory_budget_bytes;
  ro.idle_unload_s = so.model_idle_unload_s;
  ro.max_waiting = opts.engine.max_queued_requests;
  ro.strict_model_names = so.strict_model_names;
  model_registry registry(std::move(specs), [&catalog, &builder](const model_spec& s) -> std::unique_ptr<serving_model> {
    for (const auto& m : catalog)
      if (m.spec.id == s.id) return builder.build(m);
    throw std::runtime_error("unknown model '" + s.id + "'");
  }, ro);
  server_context ctx{&registry, so, static_cast<int64_t>(std::time(nullptr))};
  ctx.set_api_keys(api_keys);
  log_authentication(so, api_keys);
  ctx.describe_engine_error = flag_names;
  http_listener listener(ctx);
  open_listener(listener);
  listener.start();
  spdlog::info("Listening on {}://{}:{} ({}); warming up", listener.tls() ? "https" : "http", so.host, listener.port(),
               describe_models(catalog, single, single_len));
  for (const auto& m : catalog)
    if (m.spec.pinned && m.spec.parent.empty()) registry.load_blocking(m.spec.id);
  registry.start();
  ctx.ready = true;
  notifier.ready();
  spdlog::info("Ready: {}://{}:{}/v1", listener.tls() ? "https" : "http", so.host, listener.port());

  // The engines ping the watchdog as they loop; this loop pings too, so that a
  // server with no model loaded stays alive.
  const int64_t hb_us = notifier.heartbeat_interval_us();
  int sig = 0;
  for (;;) {
    sig = wait_signal(sigs, hb_us > 0 ? static_cast<double>(hb_us) / 2e6 : -1.0);
    if (sig == 0) {
      builder.feed_watchdog();
    } else if (sig == SIGHUP) {
      reload_on_sighup(listener, ctx, so, notifier);
    } else {
      break;
    }
  }
  drain_and_stop(sigs, sig, so, ctx, listener, notifier);
  registry.stop();
  spdlog::info("Stopped");
}

}  // namespace

int run_serve(int argc, char** argv) {
  const sigset_t sigs = block_signals();
  install_sigbus_handler();
  serve_command_options opts;
  if (const auto rc = parse_serve_command(argc, argv, opts)) return *rc;
  service_notifier notifier;
  std::vector<std::string> api_keys;
  try {
    api_keys = load_api_keys(opts.serve);
  } catch (const std::exception& e) {
    std::cerr << "spate serve: " << e.what() << "\n";
    return 2;
  }
  catalog_inputs ci{opts.model.model_paths, opts.serve.models_dir, opts.model_sections, &opts.model, &opts.engine, &opts.serve};
  const bool single = single_model(ci);
  std::vector<catalog_model> catalog;
  if (auto err = collect_models(ci, catalog); !err.empty()) {
    std::cerr << "spate serve: " << err << "\n";
    return 2;
  }
  std::optional<model_parts> preloaded;
  if (single) {
    // The single model loads before the listener, so that its errors keep their exit codes.
    notifier.status("loading model " + catalog.front().model.model_path);
    auto on_load = [&notifier](int pct, const std::string& what) {
      notifier.status("loading model: " + std::to_string(pct) + "% (" + what + ")");
    };
    preloaded.emplace();
    int code = 0;
    if (auto err = load_model_parts(catalog.front(), *preloaded, code, on_load); !err.empty()) {
      if (code == 1) spdlog::error("{}", err);
      std::cerr << "spate serve: " << err << "\n";
      return code;
    }
  }
  try {
    serve(sigs, opts, catalog, single, std::move(api_keys), std::move(preloaded), notifier);
  } catch (const std::exception& e) {
    const std::string msg = flag_names(e.what());
    spdlog::error("{}", msg);
    std::cerr << "spate serve: " << msg << "\n";
    return 1;
  }
  return 0;
}

}  // namespace spate::cli
