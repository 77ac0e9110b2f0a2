// `spate serve`: the OpenAI-compatible server. Loads the model, binds the
// listener (so /health answers and /ready says 503 during warmup), warms the
// engine up, then serves until SIGINT/SIGTERM: drain (no new connections,
// /ready 503, requests in flight finish up to --shutdown-timeout), then cancel
// what is left and exit 0. A second signal forces the stop.
#include <signal.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <spdlog/spdlog.h>
#include <sstream>

#include "engine/engine.h"
#include "engine/model_loader.h"
#include "server/chat_template.h"
#include "server/cli_options.h"
#include "server/commands.h"
#include "server/http_listener.h"
#include "server/metrics.h"
#include "server/serve_options.h"
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
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  model_options mo;
  engine_options eo;
  serve_options so;
  po::options_description desc("spate serve: OpenAI-compatible HTTP/WebSocket server");
  add_model_options(desc, mo);
  add_engine_options(desc, eo);
  add_serve_options(desc, so);
  desc.add_options()("help,h", "show this help");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
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
  std::unique_ptr<loaded_model> model;
  try {
    model = load_model(mo.model_path, kernels::active_isa());
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    std::cerr << "spate serve: " << e.what() << "\n";
    return 1;
  }
  if (mo.max_model_len > model->config.n_ctx_train) {
    std::cerr << "spate serve: --max-model-len " << mo.max_model_len << " is greater than the model's context length "
              << model->config.n_ctx_train << "\n";
    return 2;
  }
  const int32_t max_model_len = mo.max_model_len > 0 ? mo.max_model_len : model->config.n_ctx_train;

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
    engine eng(*model, make_engine_config(mo, eo, max_model_len));
    server_metrics metrics;
    server_context ctx{*model, eng, tmpl.get(), tmpl_error, metrics, so, served, max_model_len,
                       static_cast<int64_t>(std::time(nullptr))};
    http_listener listener(ctx);
    listener.listen();
    listener.start();
    spdlog::info("Listening on {}://{}:{} (model '{}', max_model_len {}); warming up", listener.tls() ? "https" : "http", so.host,
                 listener.port(), served, max_model_len);
    eng.start();
    ctx.ready = true;
    spdlog::info("Ready: {}://{}:{}/v1", listener.tls() ? "https" : "http", so.host, listener.port());

    const int sig = wait_signal(sigs, -1);
    spdlog::info("Received {}: draining (up to {} s)", sig == SIGINT ? "SIGINT" : "SIGTERM", so.shutdown_timeout_s);
    ctx.ready = false;
    ctx.draining = true;
    listener.stop_accepting();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(so.shutdown_timeout_s);
    bool forced = false;
    while (ctx.n_inflight.load() > 0) {
      const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) break;
      if (wait_signal(sigs, std::min(left, 0.05)) != 0) {
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
      if (wait_signal(sigs, 0.02) != 0) break;
    }
    listener.stop();
    spdlog::info("Stopped");
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    std::cerr << "spate serve: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace spate::cli
