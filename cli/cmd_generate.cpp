// `spate generate`: offline batched inference, like vLLM's LLM.generate.
// Reads JSONL requests from stdin, runs them together, writes one JSONL result
// per input line, in input order, to stdout. Logs go to stderr.
#include <boost/json.hpp>
#include <boost/program_options.hpp>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <spdlog/spdlog.h>
#include <string>
#include <vector>

#include "util/byte_size.h"
#include "engine/engine_api.h"
#include "model/model_loader.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "protocol/sampling_json.h"
#include "util/utf8.h"

namespace spate::cli {
namespace {

namespace po = boost::program_options;
namespace json = boost::json;

constexpr size_t k_max_line_bytes = 16u << 20;  // one JSONL request line
constexpr size_t k_max_requests = 65536;

// Parses one JSONL request. Returns "" or the problem (without the line number).
// Raw bytes that are not valid UTF-8 are replaced by U+FFFD before parsing, so such a
// prompt is accepted (as tokenizers do) instead of failing as malformed JSON.
struct offline_request {
  size_t line_no = 0;           // for messages
  std::vector<int32_t> prompt;  // non-empty
  sampling_params params;       // validated; max_tokens set
};

struct offline_result {
  std::string text;
  std::vector<int32_t> token_ids;  // generated tokens (including a final EOS, as vLLM reports)
  std::string finish_reason;       // "stop" or "length"
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  std::string error;               // set when the engine failed the request
};

std::string parse_request(const std::string& raw_line, const loaded_model& m, int32_t max_model_len, offline_request& out) {
  if (raw_line.size() > k_max_line_bytes) return "line is longer than " + std::to_string(k_max_line_bytes) + " bytes";
  const std::string line = utf8::sanitize(raw_line);
  boost::system::error_code ec;
  json::value v = json::parse(line, ec);
  if (ec) return "malformed JSON: " + ec.message();
  if (!v.is_object()) return "expected a JSON object";
  const json::object& o = v.as_object();
  if (auto err = parse_sampling_json(o, out.params); !err.empty()) return err;
  const json::value* prompt = o.if_contains("prompt");
  const json::value* ids = o.if_contains("prompt_token_ids");
  if (prompt && prompt->is_string()) {
    const auto& s = prompt->as_string();
    try {
      out.prompt = m.tok->encode(std::string_view(s.data(), s.size()), true);
    } catch (const std::exception& e) {
      return std::string("'prompt': ") + e.what();
    }
  } else if ((prompt && prompt->is_array()) || (ids && ids->is_array())) {
    for (const auto& e : (prompt && prompt->is_array() ? prompt : ids)->as_array()) {
      if (!e.is_int64() || e.as_int64() < 0 || e.as_int64() >= m.config.n_vocab) {
        return "'prompt' token ids must be integers in [0, " + std::to_string(m.config.n_vocab) + ")";
      }
      out.prompt.push_back(static_cast<int32_t>(e.as_int64()));
    }
  } else if (prompt) {
    return "'prompt' must be a string or a list of token ids";
  } else {
    return "missing 'prompt'";
  }
  if (out.prompt.empty()) return "'prompt' is empty";
  const auto n_prompt = static_cast<int32_t>(out.prompt.size());
  if (n_prompt >= max_model_len) {
    return "prompt has " + std::to_string(n_prompt) + " tokens, which is more than the model length of " +
           std::to_string(max_model_len) + " leaves room for";
  }
  if (!out.params.max_tokens) out.params.max_tokens = std::min(16, max_model_len - n_prompt);
  if (auto err = validate(out.params, m.config.n_vocab); !err.empty()) return err;
  if (n_prompt + *out.params.max_tokens > max_model_len) {
    return "prompt (" + std::to_string(n_prompt) + " tokens) plus max_tokens (" + std::to_string(*out.params.max_tokens) +
           ") exceeds the model length of " + std::to_string(max_model_len);
  }
  for (const auto& kv : o) {
    const std::string_view k = kv.key();
    if (k != "prompt" && k != "prompt_token_ids" && !is_sampling_field(k)) spdlog::debug("ignoring unknown field '{}'", k);
  }
  return "";
}

}  // namespace

int run_generate(int argc, char** argv) {
  model_options mo;
  engine_options eo;
  po::options_description desc("spate generate: JSONL prompts on stdin -> JSONL results on stdout");
  add_model_options(desc, mo);
  add_engine_options(desc, eo);
  desc.add_options()("help,h", "show this help");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "spate generate: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (auto err = finish_model_options(mo); !err.empty()) {
    std::cerr << "spate generate: " << err << "\n";
    return 2;
  }
  if (auto err = finish_engine_options(eo); !err.empty()) {
    std::cerr << "spate generate: " << err << "\n";
    return 2;
  }
  std::unique_ptr<loaded_model> model;
  int32_t max_model_len = 0;
  if (const int rc = load_model_for_command("generate", mo, model, max_model_len); rc != 0) return rc;

  std::vector<offline_request> requests;
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
    if (auto err = parse_request(line, *model, max_model_len, r); !err.empty()) {
      std::cerr << "spate generate: line " << line_no << ": " << err << "\n";
      ++n_errors;
      continue;
    }
    requests.push_back(std::move(r));
  }
  if (n_errors > 0) return 1;

  engine_config ec = make_engine_config(mo, eo, max_model_len);
  // Offline: every request is queued at once.
  ec.max_queued_requests = std::max<int32_t>(ec.max_queued_requests, static_cast<int32_t>(requests.size()));
  std::vector<offline_result> results(requests.size());
  std::mutex mu;
  std::condition_variable cv;
  size_t n_done = 0;
  try {
    model_executor exec(*model, make_executor_config(mo));
    engine eng(exec, *model->tok, ec);
    std::vector<int64_t> ids;
    for (size_t i = 0; i < requests.size(); ++i) {
      auto& req = requests[i];
      offline_result& out = results[i];
      out.prompt_tokens = static_cast<int32_t>(req.prompt.size());
      engine_request er;
      er.prompt = std::move(req.prompt);
      er.params = req.params;
      // Runs on the engine thread; each request writes only its own slot.
      er.on_event = [&out, &mu, &cv, &n_done](const engine_event& ev) {
        switch (ev.type) {
          case engine_event::kind::tokens:
            out.token_ids.insert(out.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
            out.text += ev.text;
            return;
          case engine_event::kind::finished:
            out.finish_reason = finish_reason_name(ev.reason);
            out.completion_tokens = ev.usage.completion_tokens;
            break;
          case engine_event::kind::error:
            out.error = ev.error.empty() ? "error" : ev.error;
            break;
        }
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
      std::unique_lock lk(mu);
      cv.wait(lk, [&] { return n_done == results.size(); });
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    eng.wait_idle();  // the snapshot after the last step
    const engine_stats st = eng.stats();
    spdlog::info("Generated {} tokens for {} requests in {} steps, {:.2f} s ({:.1f} tokens/s), {} preemptions, "
                 "prefix cache hits {}/{} tokens, padding waste {} tokens",
                 st.generated_tokens, results.size(), st.n_steps, secs, secs > 0 ? static_cast<double>(st.generated_tokens) / secs : 0.0,
                 st.n_preemptions, st.prefix_cache_hits, st.prefix_cache_queries, st.padding_waste_tokens);
  } catch (const std::exception& e) {
    const std::string msg = flag_names(e.what());
    spdlog::error("{}", msg);
    std::cerr << "spate generate: " << msg << "\n";
    return 1;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].error.empty()) {
      std::cerr << "spate generate: line " << requests[i].line_no << ": " << results[i].error << "\n";
      return 1;
    }
  }
  for (const auto& r : results) {
    json::object o;
    o["text"] = r.text;
    json::array ids;
    for (int32_t t : r.token_ids) ids.push_back(t);
    o["token_ids"] = std::move(ids);
    o["finish_reason"] = r.finish_reason;
    o["prompt_tokens"] = r.prompt_tokens;
    o["completion_tokens"] = r.completion_tokens;
    std::cout << json::serialize(o) << "\n";
  }
  std::cout.flush();
  return 0;
}

}  // namespace spate::cli
