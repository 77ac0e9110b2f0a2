// `spate serve`: the OpenAI-compatible server. Loads the model, binds the
// listener (so /health answers and /ready says 503 during warmup), warms the
// engine up, then serves until SIGINT/SIGTERM: drain (no new connections,
// /ready 503, requests in flight finish up to --shutdown-timeout), then cancel
// what is left and exit 0. A second signal forces the stop.
#include <signal.h>
#include <systemd/sd-daemon.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <spdlog/spdlog.h>
#include <sstream>

#include "engine/engine_api.h"
#include "model/model_loader.h"
#include "jinja/chat_template.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "server/http_listener.h"
#include "server/metrics.h"
#include "server/serve_options.h"
#include "server/service_notifier.h"
#include "server/server_context.h"

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

}  // namespace

int run_serve(int argc, char** argv) {
  // Signals are taken synchronously by the main thread; every thread started
  // from here inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  model_options mo;
  engine_options eo;
  serve_options so;
  po::options_description desc("spate serve: OpenAI-compatible HTTP/WebSocket server");
  add_model_options(desc, mo);
  add_engine_options(desc, eo);
  add_serve_options(desc, so);
  std::string config_file;
  desc.add_options()("config", po::value(&config_file), "INI-style file with any of these options (name = value); the command line overrides it")
                    ("help,h", "show this help");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
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
  std::string opt_err = finish_model_options(mo);
  if (opt_err.empty()) opt_err = finish_engine_options(eo);
  if (opt_err.empty()) opt_err = finish_serve_options(so);
  if (!opt_err.empty()) {
    std::cerr << "spate serve: " << opt_err << "\n";
    return 2;
  }
  service_notifier notifier;
  std::vector<std::string> api_keys;
  try {
    api_keys = load_api_keys(so);
  } catch (const std::exception& e) {
    std::cerr << "spate serve: " << e.what() << "\n";
    return 2;
  }
  notifier.status("loading model " + mo.model_path);
  std::unique_ptr<loaded_model> model;
  int32_t max_model_len = 0;
  if (const int rc = load_model_for_command("serve", mo, model, max_model_len); rc != 0) return rc;

  std::unique_ptr<chat_template> tmpl;
  std::string tmpl_error;
  try {
    std::string src = so.chat_template_file.empty() ? model->chat_template : read_small_file(so.chat_template_file);
    if (!src.empty()) {
      tmpl = std::make_unique<chat_template>(std::move(src), special_text(*model->tok, model->tok->bos_id()),
                                             special_text(*model->tok, model->tok->eos_id()));
    }
  } catch (const std::exception& e) {
    if (!so.chat_template_file.empty()) {
      std::cerr << "spate serve: --chat-template: " << e.what() << "\n";
      return 2;
    }
    tmpl_error = e.what();
    spdlog::warn("the model's chat template cannot be used ({}); chat endpoints will answer 400", tmpl_error);
  }

  std::string served = so.served_model_name;
  if (served.empty()) served = std::filesystem::path(mo.model_path).stem().string();

  try {
    engine_config ecfg = make_engine_config(mo, eo, max_model_len);
    // The systemd watchdog is fed by the engine loop only: a wedged engine stops it.
    ecfg.heartbeat_interval_us = notifier.heartbeat_interval_us();
    if (ecfg.heartbeat_interval_us > 0) ecfg.on_heartbeat = [&notifier] { notifier.watchdog(); };
    ecfg.on_warmup_progress = [&notifier](int32_t done, int32_t total) {
      notifier.status("warming up " + std::to_string(done) + "/" + std::to_string(total) + " buckets");
    };
    model_executor exec(*model, make_executor_config(mo));
    engine eng(exec, *model->tok, ecfg);
    server_metrics metrics;
    api::served_model sm{model->tok.get(), model->config.n_vocab, max_model_len, served, tmpl.get(), tmpl_error};
    server_context ctx{std::move(sm), eng, metrics, so, static_cast<int64_t>(std::time(nullptr))};
    ctx.set_api_keys(api_keys);
    http_listener listener(ctx);
    const int n_fds = sd_listen_fds(1);
    if (n_fds > 1) throw std::runtime_error("socket activation passed " + std::to_string(n_fds) + " sockets; spate serves one");
    if (n_fds == 1) {
      listener.adopt(SD_LISTEN_FDS_START);
      spdlog::info("Using the socket passed by systemd (LISTEN_FDS), port {}", listener.port());
    } else {
      listener.listen();
    }
    listener.start();
    spdlog::info("Listening on {}://{}:{} (model '{}', max_model_len {}); warming up", listener.tls() ? "https" : "http", so.host,
                 listener.port(), served, max_model_len);
    eng.start();
    ctx.ready = true;
    notifier.ready();
    spdlog::info("Ready: {}://{}:{}/v1", listener.tls() ? "https" : "http", so.host, listener.port());

    int sig = 0;
    while ((sig = wait_signal(sigs, -1)) == SIGHUP) {
      // Reload what can change without a restart: TLS certificate/key and API keys.
      std::string err = listener.reload_tls();
      try {
        auto keys = load_api_keys(so);
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
    spdlog::info("Received {}: draining (up to {} s)", sig == SIGINT ? "SIGINT" : "SIGTERM", so.shutdown_timeout_s);
    notifier.stopping();
    ctx.ready = false;
    ctx.draining = true;
    listener.stop_accepting();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(so.shutdown_timeout_s);
    bool forced = false;
    while (ctx.n_inflight.load() > 0) {
      const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) break;
      const int again = wait_signal(sigs, std::min(left, 0.05));
      if (again == SIGINT || again == SIGTERM) {
        forced = true;
        break;
      }
    }
    if (ctx.n_inflight.load() > 0) {
      spdlog::warn("{}: cancelling {} request(s) still in flight", forced ? "second signal" : "shutdown timeout", ctx.n_inflight.load());
    }
    eng.stop();  // in-flight requests finish with reason abort
    // Let the sessions write their final events (bounded).
    const auto flush_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (ctx.n_inflight.load() > 0 && std::chrono::steady_clock::now() < flush_deadline) {
      const int again = wait_signal(sigs, 0.02);
      if (again == SIGINT || again == SIGTERM) break;
    }
    listener.stop();
    spdlog::info("Stopped");
  } catch (const std::exception& e) {
    const std::string msg = flag_names(e.what());
    spdlog::error("{}", msg);
    std::cerr << "spate serve: " << msg << "\n";
    return 1;
  }
  return 0;
}

}  // namespace spate::cli
