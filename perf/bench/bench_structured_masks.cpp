// Per-schema cost of structured outputs on the real model (issue 12's
// per-schema figures): for every schema of the corpus
// (tests/integration/schemas/*.json, {"prompt", "schema"}), the first-request
// compile time and the per-token mask time at p50 / p99 / max, next to the
// batch-1 decode step it is paid in.
//
//   compile_ms  prepare_generation() of a chat request with response_format
//               json_schema, the schema new to the compiler (chat template,
//               tokenization, schema -> grammar; masks are built lazily,
//               during generation)
//   mask_us     every token_constraint::mask_logits() call of one generation
//               (temperature 0.7, seed 1, max_tokens 400), timed by a
//               decorator around the request's constraint on the engine thread;
//               the first calls of a state pay its mask walk, later ones hit
//   repeat_*    the same schema's second request (seed 2), as a server sees
//               a schema again: its compiled grammar and the masks of the
//               states already met are cached, new states still walk
//   step_ms     median inter-token gap of the same prompt unconstrained
//               (batch 1): the decode step the mask competes with
//
// Compile times are taken before the engine starts, so its thread pool does
// not compete for the cores.
//
// Usage: bench_structured_masks [--model FILE] [--threads N] [--schemas DIR]
// Prints one JSON line per schema and a summary line; logs to stderr.
#include <algorithm>
#include <cstdlib>
#include <boost/json.hpp>
#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_args.h"
#include "cli/cli_options.h"
#include "engine/engine_api.h"
#include "jinja/chat_template.h"
#include "model/model_executor.h"
#include "model/model_loader.h"
#include "protocol/constraint_compiler.h"
#include "protocol/generation.h"
#include "protocol/openai_request.h"

namespace po = boost::program_options;
namespace json = boost::json;
using namespace spate;

namespace {

using clock_type = std::chrono::steady_clock;

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = static_cast<double>(v.size() - 1) * q / 100.0;
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Times mask_logits of the wrapped constraint into *out (engine thread only).
class timed_constraint final : public token_constraint {
 public:
  timed_constraint(std::unique_ptr<token_constraint> inner, std::vector<double>* out) : inner_(std::move(inner)), out_(out) {}
  void mask_logits(std::span<float> logits) override {
    const auto t0 = clock_type::now();
    inner_->mask_logits(logits);
    out_->push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  bool can_end() const override { return inner_->can_end(); }
  void accept(int32_t token) override { inner_->accept(token); }
  bool finished() const override { return inner_->finished(); }

 private:
  std::unique_ptr<token_constraint> inner_;
  std::vector<double>* out_;
};

struct timed_spec final : constraint_spec {
  timed_spec(std::shared_ptr<const constraint_spec> s, std::vector<double>* o) : inner(std::move(s)), out(o) {}
  std::unique_ptr<token_constraint> start() const override { return std::make_unique<timed_constraint>(inner->start(), out); }
  std::shared_ptr<const constraint_spec> inner;
  std::vector<double>* out;
};

struct run_result {
  std::vector<int64_t> itl_us;
  int32_t n_tokens = 0;
  std::string finish;
};

// Runs one request to the end on eng.
run_result run(engine& eng, const prepared_generation& g) {
  engine_request r;
  r.prompt = g.prompt;
  r.params = g.params;
  auto done = std::make_shared<std::promise<run_result>>();
  auto res = std::make_shared<run_result>();
  r.on_event = [done, res](const engine_event& ev) {
    if (ev.type == engine_event::kind::tokens) return;
    res->itl_us = ev.metrics.itl_us;
    res->n_tokens = ev.usage.completion_tokens;
    res->finish = ev.type == engine_event::kind::finished ? finish_reason_name(ev.reason) : "error: " + ev.error;
    done->set_value(*res);
  };
  auto fut = done->get_future();
  const submit_result s = eng.submit(std::move(r));
  if (!s.ok()) throw std::runtime_error("submit: " + s.error);
  return fut.get();
}

std::string chat_body(const std::string& prompt, const json::value* schema) {
  json::object o{{"messages", json::array{json::object{{"role", "user"}, {"content", prompt}}}},
                 {"temperature", 0.7}, {"seed", 1}, {"max_tokens", 400}};
  if (schema) {
    o["response_format"] = json::object{{"type", "json_schema"},
                                        {"json_schema", json::object{{"name", "bench"}, {"schema", *schema}, {"strict", true}}}};
  }
  return json::serialize(o);
}

}  // namespace

int main(int argc, char** argv) {
  cli::model_options mo;
  cli::engine_options eo;
  std::string schema_dir = std::string(SPATE_SOURCE_DIR) + "/tests/integration/schemas";
  po::options_description desc("bench_structured_masks: per-schema compile and mask times (JSON lines on stdout)");
  desc.add_options()("help", "this help")("schemas", po::value(&schema_dir), "directory of {prompt, schema} files");
  cli::add_model_options(desc, mo);
  cli::add_engine_options(desc, eo);
  po::variables_map vm;
  if (const auto code = spate::perf::parse_args("bench_structured_masks", argc, argv, desc, vm)) return *code;
  if (vm["threads"].defaulted()) mo.n_threads = 2;
  for (auto err : {cli::finish_model_options(mo), cli::finish_engine_options(eo)}) {
    if (!err.empty()) {
      std::cerr << "bench_structured_masks: " << err << "\n";
      return 2;
    }
  }
  try {
    const auto model = load_model(mo.model_path, kernels::active_isa());
    const int32_t max_model_len = std::min<int32_t>(model->config.n_ctx_train, 4096);
    const chat_template tmpl(model->chat_template, model->tok->token_to_piece(model->tok->bos_id(), true),
                             model->tok->token_to_piece(model->tok->eos_id(), true));
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(schema_dir)) {
      if (e.path().extension() == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    // Phase 1, before the engine runs (its pool's workers would compete for
    // the cores): every schema's first request prepared on a fresh compiler.
    struct job {
      std::string name;
      prepared_generation constrained, plain;
      double compile_ms = 0.0;
    };
    std::vector<job> jobs;
    // One compiler, as in the server: each schema is new to it, so each
    // request is a first-request compile.
    api::constraint_compiler compiler(*model->tok);
    api::served_model sm{model->tok.get(), model->config.n_vocab, max_model_len, "bench", &tmpl, "", &compiler,
                         api::tool_call_format::generic};
    for (const auto& f : files) {
      std::ifstream in(f);
      std::stringstream ss;
      ss << in.rdbuf();
      const json::value doc = json::parse(ss.str());
      const std::string prompt(doc.at("prompt").as_string());
      job j;
      j.name = f.stem().string();
      api::parsed_request pr;
      if (auto e = api::parse_request(api::endpoint::chat_completions, chat_body(prompt, &doc.at("schema")), pr)) {
        throw std::runtime_error(j.name + ": " + e->message);
      }
      const auto t0 = clock_type::now();
      if (auto e = prepare_generation(sm, pr, j.constrained)) throw std::runtime_error(j.name + ": " + e->message);
      j.compile_ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
      api::parse_request(api::endpoint::chat_completions, chat_body(prompt, nullptr), pr);
      prepare_generation(sm, pr, j.plain);
      jobs.push_back(std::move(j));
    }
    // Phase 2: each constrained generation with its masks timed, then the
    // same prompt unconstrained for the batch-1 decode step.
    model_executor exec(*model, cli::make_executor_config(mo));
    engine_config ec = cli::make_engine_config(mo, eo, max_model_len);
    ec.skip_warmup = true;
    engine eng(exec, *model->tok, ec);
    eng.start();
    std::vector<double> all_p50, all_p99, rep_p50, rep_p99, compile_ms, step_ms;
    int n_within = 0, n_rep_within = 0;  // schemas whose mask p99 <= 10% of the step
    for (job& j : jobs) {
      std::vector<double> masks, masks_rep;
      prepared_generation again = j.constrained;
      again.params.seed = 2;
      again.params.constraint = std::make_shared<timed_spec>(j.constrained.params.constraint, &masks_rep);
      j.constrained.params.constraint = std::make_shared<timed_spec>(j.constrained.params.constraint, &masks);
      const run_result constrained = run(eng, j.constrained);
      const run_result repeated = run(eng, again);
      const run_result free_run = run(eng, j.plain);
      std::vector<double> itl(free_run.itl_us.begin(), free_run.itl_us.end());
      const double step = percentile(itl, 50) / 1000.0;
      const double p50 = percentile(masks, 50), p99 = percentile(masks, 99);
      const double p50_rep = percentile(masks_rep, 50), p99_rep = percentile(masks_rep, 99);
      n_within += p99 / 1000.0 <= 0.1 * step;
      n_rep_within += p99_rep / 1000.0 <= 0.1 * step;
      rep_p50.push_back(p50_rep);
      rep_p99.push_back(p99_rep);
      if (std::getenv("SPATE_BENCH_TRACE")) {
        for (size_t i = 0; i < masks.size(); ++i) std::cerr << j.name << " mask " << i << " " << masks[i] << " us\n";
      }
      compile_ms.push_back(j.compile_ms);
      all_p50.push_back(p50);
      all_p99.push_back(p99);
      step_ms.push_back(step);
      json::object o{{"schema", j.name}, {"compile_ms", j.compile_ms}, {"mask_us_p50", p50}, {"mask_us_p99", p99},
                     {"mask_us_max", masks.empty() ? 0.0 : *std::max_element(masks.begin(), masks.end())},
                     {"n_masks", masks.size()}, {"finish", constrained.finish}, {"step_ms_p50", step},
                     {"p99_share_of_step", step > 0 ? p99 / 1000.0 / step : 0.0},
                     {"repeat_mask_us_p50", p50_rep}, {"repeat_mask_us_p99", p99_rep}, {"repeat_finish", repeated.finish},
                     {"repeat_p99_share_of_step", step > 0 ? p99_rep / 1000.0 / step : 0.0}};
      std::cout << json::serialize(o) << std::endl;
    }
    json::object summary{{"schemas", jobs.size()},
                         {"compile_ms_median", percentile(compile_ms, 50)}, {"compile_ms_max", percentile(compile_ms, 100)},
                         {"mask_us_p50_median", percentile(all_p50, 50)}, {"mask_us_p99_median", percentile(all_p99, 50)},
                         {"mask_us_p99_max", percentile(all_p99, 100)}, {"step_ms_median", percentile(step_ms, 50)},
                         {"n_p99_within_10pct_of_step", n_within},
                         {"repeat_mask_us_p50_median", percentile(rep_p50, 50)}, {"repeat_mask_us_p99_median", percentile(rep_p99, 50)},
                         {"repeat_mask_us_p99_max", percentile(rep_p99, 100)}, {"repeat_n_p99_within_10pct_of_step", n_rep_within}};
    std::cout << json::serialize(json::object{{"summary", summary}}) << std::endl;
    eng.stop();
  } catch (const std::exception& e) {
    std::cerr << "bench_structured_masks: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
