// The serving benchmark's "throughput" workload run in-process against the
// engine (no HTTP), so that perf/scripts/bench_serving.sh can compare `spate serve`
// over HTTP with the engine it wraps.
//
// Workload (identical to perf/scripts/serving_bench.py --scenario throughput):
// --clients (16) closed-loop clients, each sending --requests-per-client (2)
// requests one after another; request k of client c uses prompt c + clients*k
// of --prompts (perf/data/throughput.jsonl, field "prompt", tokenized as the
// server does: parse special tokens, BOS/EOS as the model asks); greedy,
// ignore_eos, max_tokens --max-tokens (64). A client's next request is
// submitted from the engine's `finished` callback of its previous one.
//
// Timing (steady_clock, taken where the events are delivered):
//   TTFT  submit() -> first `tokens` event carrying a token id
//   ITL   gaps between consecutive `tokens` events of one request
//   e2e   submit() -> `finished`
//   tok/s generated tokens (usage.completion_tokens) / (first submit -> last finished)
// Percentiles interpolate linearly between order statistics, as serving_bench.py.
//
// Each rep builds a fresh engine (empty prefix cache) on the model loaded
// once; engine warmup is not timed. Accepts the model and engine flags of
// `spate generate` / `spate serve` (--threads defaults to 2 here). Prints one
// JSON line per rep on stdout; logs go to stderr. Exit 1 on any failure.
#include <algorithm>
#include <boost/json.hpp>
#include <boost/program_options.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "bench_args.h"
#include "engine/engine_api.h"
#include "model/model_loader.h"
#include "cli/cli_options.h"

namespace po = boost::program_options;
using namespace spate;

namespace {

using clock_type = std::chrono::steady_clock;

double secs(clock_type::time_point a, clock_type::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// q in [0, 100]; linear interpolation between closest ranks (numpy's default).
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = static_cast<double>(v.size() - 1) * q / 100.0;
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::vector<std::string> read_prompts(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open prompts file " + path);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(f, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const boost::json::value v = boost::json::parse(line);
    out.emplace_back(v.at("prompt").as_string().c_str());
  }
  return out;
}

// What one request saw; written only on the engine thread until `done`.
struct request_record {
  clock_type::time_point t_submit, t_first, t_last, t_end;
  bool has_first = false;
  std::vector<double> gaps;
  int32_t generated = 0;
  int32_t prompt_tokens = 0;
  std::string error;
};

struct workload {
  engine* eng = nullptr;
  const std::vector<std::vector<int32_t>>* prompts = nullptr;
  int32_t clients = 16, per_client = 2, max_tokens = 64;
  std::vector<request_record> recs;  // index c + clients * k
  std::mutex mu;
  std::condition_variable cv;
  int32_t n_done = 0;
  std::string failure;

  void finish_one(const std::string& why) {
    std::lock_guard lk(mu);
    if (!why.empty() && failure.empty()) failure = why;
    ++n_done;
    cv.notify_all();
  }

  // Submits request k of client c; from main() or from the engine thread.
  void submit(int32_t c, int32_t k) {
    const size_t idx = static_cast<size_t>(c + clients * k);
    request_record& rec = recs[idx];
    engine_request r;
    r.prompt = (*prompts)[idx];
    rec.prompt_tokens = static_cast<int32_t>(r.prompt.size());
    r.params.temperature = 0.0f;
    r.params.ignore_eos = true;
    r.params.max_tokens = max_tokens;
    r.on_event = [this, &rec, c, k](const engine_event& ev) {
      const auto now = clock_type::now();
      switch (ev.type) {
        case engine_event::kind::tokens:
          if (ev.token_ids.empty()) return;
          if (rec.has_first) rec.gaps.push_back(secs(rec.t_last, now));
          else rec.t_first = now, rec.has_first = true;
          rec.t_last = now;
          return;
        case engine_event::kind::finished:
          rec.t_end = now;
          rec.generated = ev.usage.completion_tokens;
          if (k + 1 < per_client) submit(c, k + 1);  // closed loop: the client's next request
          finish_one(rec.has_first ? "" : "request finished without a token");
          return;
        case engine_event::kind::error:
          rec.error = ev.error.empty() ? "error" : ev.error;
          finish_one("engine error: " + rec.error);
          return;
      }
    };
    rec.t_submit = clock_type::now();
    const submit_result sr = eng->submit(std::move(r));
    if (!sr.ok()) {
      // Requests this client would still send are counted as done too, so the wait ends.
      for (int32_t j = k; j < per_client; ++j) finish_one("submit refused: " + sr.error);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  cli::model_options mo;
  cli::engine_options eo;
  std::string prompts_path = (std::filesystem::path(__FILE__).parent_path() / "data" / "throughput.jsonl").string();
  int32_t clients = 16, per_client = 2, max_tokens = 64, reps = 1;
  po::options_description desc("engine_serving_bench: the serving throughput workload in-process (JSON lines on stdout)");
  cli::add_model_options(desc, mo);
  cli::add_engine_options(desc, eo);
  desc.add_options()("prompts", po::value(&prompts_path), "prompts file (JSON lines with \"prompt\")")(
      "clients", po::value(&clients)->default_value(16), "concurrent closed-loop clients")(
      "requests-per-client", po::value(&per_client)->default_value(2), "requests each client sends in sequence")(
      "max-tokens", po::value(&max_tokens)->default_value(64), "generated tokens per request (ignore_eos)")(
      "reps", po::value(&reps)->default_value(1), "repetitions, each with a fresh engine; one JSON line each")(
      "help,h", "show this help");
  po::variables_map vm;
  if (const auto code = spate::perf::parse_args("engine_serving_bench", argc, argv, desc, vm)) return *code;
  if (vm["threads"].defaulted()) mo.n_threads = 2;
  if (clients < 1 || per_client < 1 || max_tokens < 1 || reps < 1) {
    std::cerr << "engine_serving_bench: --clients, --requests-per-client, --max-tokens and --reps must be >= 1\n";
    return 2;
  }
  for (auto err : {cli::finish_model_options(mo), cli::finish_engine_options(eo)}) {
    if (!err.empty()) {
      std::cerr << "engine_serving_bench: " << err << "\n";
      return 2;
    }
  }
  try {
    const auto model = load_model(mo.model_path, kernels::active_isa());
    const int32_t max_model_len = mo.max_model_len > 0 ? mo.max_model_len : model->config.n_ctx_train;
    const auto texts = read_prompts(prompts_path);
    const size_t need = static_cast<size_t>(clients) * static_cast<size_t>(per_client);
    if (texts.size() < need) throw std::runtime_error(prompts_path + " has " + std::to_string(texts.size()) + " prompts, need " + std::to_string(need));
    std::vector<std::vector<int32_t>> prompts;
    for (size_t i = 0; i < need; ++i) prompts.push_back(model->tok->encode(texts[i], true));

    const engine_config ec = cli::make_engine_config(mo, eo, max_model_len);
    for (int rep = 0; rep < reps; ++rep) {
      model_executor exec(*model, cli::make_executor_config(mo));
      engine eng(exec, *model->tok, ec);
      eng.start();  // warmup, untimed
      workload w;
      w.eng = &eng;
      w.prompts = &prompts;
      w.clients = clients;
      w.per_client = per_client;
      w.max_tokens = max_tokens;
      w.recs.resize(need);
      const auto t0 = clock_type::now();
      for (int32_t c = 0; c < clients; ++c) w.submit(c, 0);
      {
        std::unique_lock lk(w.mu);
        w.cv.wait(lk, [&] { return w.n_done == static_cast<int32_t>(need); });
      }
      eng.wait_idle();
      if (!w.failure.empty()) throw std::runtime_error(w.failure);

      std::vector<double> ttft, itl, e2e;
      int64_t generated = 0, prompt_tokens = 0;
      auto t_last = t0;
      for (const auto& r : w.recs) {
        ttft.push_back(secs(r.t_submit, r.t_first));
        e2e.push_back(secs(r.t_submit, r.t_end));
        itl.insert(itl.end(), r.gaps.begin(), r.gaps.end());
        generated += r.generated;
        prompt_tokens += r.prompt_tokens;
        t_last = std::max(t_last, r.t_end);
      }
      const double wall = secs(t0, t_last);
      const engine_stats st = eng.stats();
      // Tokens the steps computed: prompts minus prefix-cache hits, plus every generated token
      // but the last of each request (never fed back). padding_frac = padding / (padding + real):
      // the share of a padded step's rows that would be dummies (spate skips them on the CPU).
      const double real_tokens = static_cast<double>(prompt_tokens - st.prefix_cache_hits + generated) - static_cast<double>(need);
      const double padding_frac = static_cast<double>(st.padding_waste_tokens) /
                                  std::max(1.0, static_cast<double>(st.padding_waste_tokens) + real_tokens);
      std::printf(
          "{\"engine\":\"spate\",\"bench\":\"engine_serving\",\"scenario\":\"throughput\",\"rep\":%d,\"gen_tok_s\":%.2f,"
          "\"ttft_p50_ms\":%.2f,\"ttft_p99_ms\":%.2f,\"itl_p50_ms\":%.2f,\"itl_p99_ms\":%.2f,\"e2e_p50_ms\":%.2f,"
          "\"wall_s\":%.3f,\"requests\":%zu,\"generated_tokens\":%lld,\"prompt_tokens\":%lld,\"threads\":%d,"
          "\"chunked_prefill\":%s,\"prefix_cache_hits\":%lld,\"preemptions\":%lld,\"steps\":%lld,"
          "\"padding_tokens\":%lld,\"padding_frac\":%.4f}\n",
          rep, static_cast<double>(generated) / wall, 1e3 * percentile(ttft, 50), 1e3 * percentile(ttft, 99),
          1e3 * percentile(itl, 50), 1e3 * percentile(itl, 99), 1e3 * percentile(e2e, 50), wall, need,
          static_cast<long long>(generated), static_cast<long long>(prompt_tokens), mo.n_threads,
          eo.enable_chunked_prefill ? "true" : "false", static_cast<long long>(st.prefix_cache_hits),
          static_cast<long long>(st.n_preemptions), static_cast<long long>(st.n_steps),
          static_cast<long long>(st.padding_waste_tokens), padding_frac);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::cerr << "engine_serving_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
