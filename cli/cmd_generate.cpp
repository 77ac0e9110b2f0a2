// `spate generate`: offline batched inference, like vLLM's LLM.generate.
// Reads JSONL requests from stdin, runs them together, writes one JSONL result
// per input line, in input order, to stdout. Logs go to stderr.
// LoRA adapters (--lora-modules NAME=PATH, repeatable) are selected per line
// with "lora": NAME (or "model": NAME); lines with different adapters and
// lines without one run together in the same batches.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <boost/program_options.hpp>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <limits>
#include <mutex>
#include <set>
#include <spdlog/spdlog.h>
#include <string>
#include <vector>

#include "util/byte_size.h"
#include "engine/engine_api.h"
#include "model/lora.h"
#include "model/model_loader.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "protocol/generation.h"
#include "protocol/generation_format.h"
#include "protocol/constraint_compiler.h"
#include "protocol/openai_request.h"
#include "protocol/output_constraint.h"
#include "cli/draft_model.h"
#include "protocol/sampling_json.h"
#include "tokenizer/tokenizer.h"
#include "util/progress.h"
#include "util/utf8.h"

namespace spate::cli {
namespace {

namespace po = boost::program_options;
namespace json = boost::json;

constexpr size_t k_max_line_bytes = 16u << 20;  // one JSONL request line
constexpr size_t k_max_requests = 65536;

struct offline_request {
  size_t line_no = 0;           // for messages
  std::vector<int32_t> prompt;  // non-empty
  sampling_params params;       // validated; max_tokens set
  int32_t adapter = -1;         // index into the --lora-modules, -1: none
};

// --lora-modules NAME=PATH, in order (an adapter's slot is its index).
using lora_modules = std::vector<std::pair<std::string, std::string>>;

// The adapter a line selects ("lora", else a "model" naming an adapter); "" or the problem.
std::string read_adapter(const json::object& o, const lora_modules& loras, int32_t& out) {
  out = -1;
  for (const char* key : {"lora", "model"}) {
    const json::value* v = o.if_contains(key);
    if (!v || v->is_null()) continue;
    if (!v->is_string()) return std::string("'") + key + "' must be a string";
    for (size_t i = 0; i < loras.size(); ++i)
      if (loras[i].first == v->as_string()) out = static_cast<int32_t>(i);
    if (out >= 0) return "";
    if (std::string_view(key) == "lora") return "unknown LoRA adapter '" + std::string(v->as_string()) + "' (--lora-modules names them)";
  }
  return "";
}

struct offline_result {
  int32_t prompt_tokens = 0;
  // The request's events, accumulated as for a non-streaming server response:
  // text, token ids (a final EOS included, as vLLM reports), finish reason,
  // completion tokens, or the engine's error.
  choice_accumulator acc;
};

// The prompt of one request line, tokenized or as token ids; "" or the problem.
std::string read_prompt(const json::object& o, const tokenizer& tok, int32_t n_vocab, std::vector<int32_t>& out) {
  const json::value* prompt = o.if_contains("prompt");
  const json::value* ids = o.if_contains("prompt_token_ids");
  const std::string bad_ids = "'prompt' token ids must be integers in [0, " + std::to_string(n_vocab) + ")";
  if (prompt && prompt->is_string()) {
    const auto& s = prompt->as_string();
    try {
      out = encode_prompt(tok, std::string_view(s.data(), s.size()));
    } catch (const std::exception& e) {
      return std::string("'prompt': ") + e.what();
    }
  } else if ((prompt && prompt->is_array()) || (ids && ids->is_array())) {
    for (const auto& e : (prompt && prompt->is_array() ? prompt : ids)->as_array()) {
      // The [0, n_vocab) range is check_generation's; ids beyond int32 fail here already.
      if (!e.is_int64() || e.as_int64() < 0 || e.as_int64() > std::numeric_limits<int32_t>::max()) return bad_ids;
      out.push_back(static_cast<int32_t>(e.as_int64()));
    }
  } else if (prompt) {
    return "'prompt' must be a string or a list of token ids";
  } else {
    return "missing 'prompt'";
  }
  return "";
}

// The command line's wording of a failed shared check (see generation_check).
std::string check_message(const generation_check& c) {
  using o = generation_check::outcome;
  switch (c.result) {
    case o::ok: return "";
    case o::empty_prompt: return "'prompt' is empty";
    case o::token_out_of_range: return "'prompt' token ids must be integers in [0, " + std::to_string(c.n_vocab) + ")";
    case o::no_room:
      return "prompt has " + std::to_string(c.n_prompt) + " tokens, which is more than the model length of " +
             std::to_string(c.max_model_len) + " leaves room for";
    case o::invalid_params: return c.message;
    case o::too_long:
      return "prompt (" + std::to_string(c.n_prompt) + " tokens) plus max_tokens (" + std::to_string(c.max_tokens) +
             ") exceeds the model length of " + std::to_string(c.max_model_len);
  }
  return "";
}

// Parses one JSONL request with the server's sampling parser, prompt
// tokenization and checks (max_tokens defaults to 16, as for completions).
// Returns "" or the problem (without the line number). Raw bytes that are not
// valid UTF-8 are replaced by U+FFFD before parsing, so such a prompt is
// accepted (as tokenizers do) instead of failing as malformed JSON.
std::string parse_request(const std::string& raw_line, const loaded_model& m, int32_t max_model_len,
                          api::constraint_compiler& constraints, const lora_modules& loras, offline_request& out) {
  if (raw_line.size() > k_max_line_bytes) return "line is longer than " + std::to_string(k_max_line_bytes) + " bytes";
  const std::string line = utf8::sanitize(raw_line);
  boost::system::error_code ec;
  json::value v = json::parse(line, ec);
  if (ec) return "malformed JSON: " + ec.message();
  if (!v.is_object()) return "expected a JSON object";
  const json::object& o = v.as_object();
  if (auto err = parse_sampling_json(o, out.params); !err.empty()) return err;
  if (auto err = read_prompt(o, *m.tok, m.config.n_vocab, out.prompt); !err.empty()) return err;
  if (auto err = read_adapter(o, loras, out.adapter); !err.empty()) return err;
  const generation_check c = check_generation(out.prompt, out.params, 16, m.config.n_vocab, max_model_len);
  if (!c.ok()) return check_message(c);
  // Structured outputs: the same fields and compiler as the server's completions.
  std::set<std::string, std::less<>> seen{"prompt", "prompt_token_ids", "lora", "model"};
  const auto get = [&](std::string_view k) -> const json::value* {
    seen.emplace(k);
    const json::value* v = o.if_contains(k);
    return v && !v->is_null() ? v : nullptr;
  };
  api::output_constraint oc;
  std::optional<api::api_error> err = api::parse_output_constraint(get, oc);
  if (!err) out.params.constraint = constraints.compile(oc, err);
  if (err) return err->message;
  for (const auto& kv : o) {
    const std::string_view k = kv.key();
    if (!seen.count(k) && !is_sampling_field(k)) spdlog::debug("ignoring unknown field '{}'", k);
  }
  return "";
}

// Reads the JSONL requests from stdin. Returns 0, or the exit code after
// printing every bad line (1).
int read_requests(const loaded_model& m, int32_t max_model_len, const lora_modules& loras, std::vector<offline_request>& requests) {
  api::constraint_compiler constraints(*m.tok);
  std::string line;
  size_t line_no = 0;
  int n_errors = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines are skipped
    if (requests.size() >= k_max_requests) {
      std::cerr << "spate generate: more than " << k_max_requests << " requests\n";
      return 1;
    }
    offline_request r;
    r.line_no = line_no;
    if (auto err = parse_request(line, m, max_model_len, constraints, loras, r); !err.empty()) {
      std::cerr << "spate generate: line " << line_no << ": " << err << "\n";
      ++n_errors;
      continue;
    }
    requests.push_back(std::move(r));
  }
  return n_errors > 0 ? 1 : 0;
}

// Runs every request through one engine (all queued at once) and collects
// their events into results. Returns 0, or 1 after printing why.
int run_requests(const loaded_model& m, const executor_config& xc, engine_config ec, draft_model& draft,
                 const std::vector<std::shared_ptr<const lora_adapter>>& adapters, std::vector<offline_request>& requests,
                 std::vector<offline_result>& results) {
  ec.max_queued_requests = std::max<int32_t>(ec.max_queued_requests, static_cast<int32_t>(requests.size()));
  results.assign(requests.size(), offline_result{});
  std::mutex mu;
  std::condition_variable cv;
  size_t n_done = 0;
  std::atomic<int64_t> n_tokens{0};  // generated so far (the progress bar's rate)
  model_executor exec(m, xc);
  std::unique_ptr<model_executor> draft_exec;
  if (draft.model) draft_exec = attach_draft_model(draft, xc, exec, ec);
  for (size_t i = 0; i < adapters.size(); ++i) exec.set_adapter(static_cast<int32_t>(i), adapters[i]);
  engine eng(exec, *m.tok, ec);
  for (size_t i = 0; i < requests.size(); ++i) {
    auto& req = requests[i];
    offline_result& out = results[i];
    out.prompt_tokens = static_cast<int32_t>(req.prompt.size());
    engine_request er;
    er.prompt = std::move(req.prompt);
    er.params = req.params;
    er.adapter = req.adapter;
    er.cache_salt = static_cast<uint64_t>(req.adapter + 1);  // one prefix-cache key space per adapter
    // Runs on the engine thread; each request writes only its own slot.
    er.on_event = [&out, &mu, &cv, &n_done, &n_tokens](const engine_event& ev) {
      out.acc.add(ev);
      n_tokens.fetch_add(static_cast<int64_t>(ev.token_ids.size()), std::memory_order_relaxed);
      if (!out.acc.done) return;
      std::lock_guard lk(mu);
      ++n_done;
      cv.notify_one();
    };
    const submit_result sr = eng.submit(std::move(er));
    if (!sr.ok()) {
      const std::string msg = flag_names(sr.error);
      spdlog::error("line {}: {}", req.line_no, msg);
      std::cerr << "spate generate: line " << req.line_no << ": " << msg << "\n";
      return 1;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  eng.start();
  {
    // A progress bar on stderr when it is a terminal: requests done, tok/s.
    const bool bar = ::isatty(STDERR_FILENO) == 1;
    std::unique_lock lk(mu);
    while (!cv.wait_for(lk, std::chrono::milliseconds(250), [&] { return n_done == results.size(); })) {
      if (!bar) continue;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cerr << "\r" << progress_bar(static_cast<int64_t>(n_done), static_cast<int64_t>(results.size()), "requests",
                                       s > 0 ? static_cast<double>(n_tokens.load()) / s : 0.0, "tok/s")
                << std::flush;
    }
    if (bar) std::cerr << "\r\033[K" << std::flush;  // the bar's line, cleared
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  eng.wait_idle();  // the snapshot after the last step
  const engine_stats st = eng.stats();
  spdlog::info("Generated {} tokens for {} requests in {} steps, {:.2f} s ({:.1f} tokens/s), {} preemptions, "
               "prefix cache hits {}/{} tokens, padding waste {} tokens",
               st.generated_tokens, results.size(), st.n_steps, secs, secs > 0 ? static_cast<double>(st.generated_tokens) / secs : 0.0,
               st.n_preemptions, st.prefix_cache_hits, st.prefix_cache_queries, st.padding_waste_tokens);
  return 0;
}

// One JSON line per request, in input order; 1 (and nothing on stdout) when
// the engine failed any of them.
int write_results(const std::vector<offline_request>& requests, const std::vector<offline_result>& results) {
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].acc.error.empty()) {
      std::cerr << "spate generate: line " << requests[i].line_no << ": " << results[i].acc.error << "\n";
      return 1;
    }
  }
  for (const auto& r : results) {
    json::object o;
    o["text"] = r.acc.text;
    json::array ids;
    for (int32_t t : r.acc.token_ids) ids.push_back(t);
    o["token_ids"] = std::move(ids);
    o["finish_reason"] = finish_reason_name(r.acc.reason);
    o["prompt_tokens"] = r.prompt_tokens;
    o["completion_tokens"] = r.acc.completion_tokens;
    std::cout << json::serialize(o) << "\n";
  }
  std::cout.flush();
  return 0;
}

// Parses the command line into mo/eo. Returns -1 to go on, else the exit code.
int parse_options(int argc, char** argv, model_options& mo, engine_options& eo, lora_modules& loras) {
  po::options_description desc("spate generate: JSONL prompts on stdin -> JSONL results on stdout");
  add_model_options(desc, mo);
  add_engine_options(desc, eo);
  std::vector<std::string> lora_args;
  desc.add_options()("lora-modules", po::value(&lora_args)->composing(),
                     "LoRA adapter NAME=PATH (repeatable); a line selects it with \"lora\": NAME")
                    ("help,h", "show this help");
  po::variables_map vm;
  if (int rc = parse_command_line("generate", argc, argv, desc, vm); rc >= 0) return rc;
  std::string err = finish_model_options(mo);
  if (err.empty()) err = finish_engine_options(eo);
  for (const auto& a : lora_args) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == a.size()) err = "--lora-modules '" + a + "' must be NAME=PATH";
    else loras.emplace_back(a.substr(0, eq), a.substr(eq + 1));
  }
  if (!err.empty()) {
    std::cerr << "spate generate: " << err << "\n";
    return 2;
  }
  return -1;
}

}  // namespace

int run_generate(int argc, char** argv) {
  model_options mo;
  engine_options eo;
  lora_modules loras;
  if (const int rc = parse_options(argc, argv, mo, eo, loras); rc >= 0) return rc;
  std::unique_ptr<loaded_model> model;
  int32_t max_model_len = 0;
  if (const int rc = load_model_for_command("generate", mo, model, max_model_len); rc != 0) return rc;
  draft_model draft;  // declared before the engine that uses it (run_requests)
  if (eo.speculative.kind == speculative_config::method::draft_model) {
    if (auto err = load_draft_model(eo.draft_model_path, *model, draft); !err.empty()) {
      std::cerr << "spate generate: --speculative-config: " << err << "\n";
      return 2;
    }
  }
  std::vector<std::shared_ptr<const lora_adapter>> adapters;
  for (const auto& [name, path] : loras) {
    try {
      adapters.push_back(load_lora_adapter(path, model->config, model->weights, 0, kernels::active_isa()));
    } catch (const std::exception& e) {
      std::cerr << "spate generate: --lora-modules " << name << ": " << e.what() << "\n";
      return 2;
    }
  }
  std::vector<offline_request> requests;
  if (const int rc = read_requests(*model, max_model_len, loras, requests); rc != 0) return rc;
  std::vector<offline_result> results;
  try {
    const int rc = run_requests(*model, make_executor_config(mo), make_engine_config(mo, eo, max_model_len), draft, adapters, requests,
                                results);
    if (rc != 0) return rc;
  } catch (const std::exception& e) {
    const std::string msg = flag_names(e.what());
    spdlog::error("{}", msg);
    std::cerr << "spate generate: " << msg << "\n";
    return 1;
  }
  return write_results(requests, results);
}

}  // namespace spate::cli
