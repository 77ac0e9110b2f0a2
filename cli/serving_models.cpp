#include "cli/serving_models.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <filesystem>
#include <fstream>
#include <spdlog/spdlog.h>
#include <sstream>
#include <stdexcept>

#include "cli/fault_injection.h"
#include "engine/engine_api.h"
#include "model/kv_cache.h"
#include "model/lora.h"
#include "model/model_executor.h"
#include "protocol/constraint_compiler.h"
#include "protocol/harmony_constraint.h"
#include "protocol/reasoning_constraint.h"
#include "tokenizer/tokenizer.h"
#include "util/regular_file.h"

namespace spate::cli {

namespace {

constexpr size_t k_max_template_bytes = 1u << 20;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_small_file(const std::string& path) {
  std::string s;
  if (auto err = read_regular_file(path, s, k_max_template_bytes); !err.empty()) throw std::runtime_error(path + ": " + err);
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

// Compiles the chat-template file, or else the model's template (if any),
// into p.tmpl. A bad file is an error ("" otherwise); a bad model template is
// logged as a warning and kept in p.tmpl_error (chat endpoints then answer 400).
std::string load_chat_template(const serve_options& so, model_parts& p) {
  const loaded_model& model = *p.model;
  try {
    std::string src = so.chat_template_file.empty() ? model.chat_template : read_small_file(so.chat_template_file);
    if (!src.empty()) {
      p.tmpl = std::make_unique<chat_template>(std::move(src), special_text(*model.tok, model.tok->bos_id()),
                                               special_text(*model.tok, model.tok->eos_id()));
    }
  } catch (const std::exception& e) {
    if (!so.chat_template_file.empty()) return std::string("--chat-template: ") + e.what();
    p.tmpl_error = e.what();
    spdlog::warn("the model's chat template cannot be used ({}); chat endpoints will answer 400", p.tmpl_error);
  }
  return "";
}

// The tool-call-parser, else the format the chat template writes.
api::tool_call_format tool_format_of(const serve_options& so, const chat_template* tmpl) {
  if (!so.tool_call_parser.empty()) return *api::tool_call_format_from_name(so.tool_call_parser);
  return tmpl ? api::detect_tool_call_format(tmpl->source()) : api::tool_call_format::generic;
}

// The reasoning-parser, else the one the chat template calls for; logs which.
// The tokens the think-tag constraints need come with it (null otherwise).
// Throws when the flag names a parser the model's vocabulary cannot serve.
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

// The pooling option, else the GGUF's pooling_type, else last (as vLLM pools decoder-only models).
pooling_type pooling_of(const serve_options& so, const model_config& c) {
  if (so.pooling == "mean" || (so.pooling.empty() && c.gguf_pooling == 1)) return pooling_type::mean;
  if (so.pooling == "cls" || (so.pooling.empty() && c.gguf_pooling == 2)) return pooling_type::cls;
  return pooling_type::last;
}

}  // namespace

std::string load_model_parts(catalog_model& m, model_parts& out, int& exit_code, const load_progress_fn& on_progress) {
  exit_code = 1;
  try {
    out.model = load_model(m.model.model_path, kernels::active_isa(), on_progress);
  } catch (const std::exception& e) {
    return e.what();
  }
  exit_code = 2;
  if (auto err = fit_loaded_model(m.model, *out.model, out.max_model_len); !err.empty()) return err;
  if (m.engine.speculative.kind == speculative_config::method::draft_model) {
    if (auto err = load_draft_model(m.engine.draft_model_path, *out.model, out.draft); !err.empty())
      return "--speculative-config: " + err;
  }
  if (auto err = load_chat_template(m.serve, out); !err.empty()) return err;
  exit_code = 0;
  return "";
}

// A built model: its parts, executors and engine. Members are destroyed in
// reverse order: the engine stops first, then the executors, then the weights.
class serving_models::live_model final : public serving_model {
 public:
  live_model(serving_models& owner, model_parts p) : owner_(owner), parts(std::move(p)) {
    std::lock_guard lock(owner_.mu_);
    owner_.live_.insert(this);
  }
  ~live_model() override {
    eng_.reset();
    {
      std::lock_guard lock(owner_.mu_);
      owner_.live_.erase(this);
    }
  }

  serving_models& owner_;
  model_parts parts;
  std::unique_ptr<model_executor> exec;
  std::unique_ptr<model_executor> draft_exec;  // runs on exec's threads; outlives the engine
  std::unique_ptr<fault_injecting_executor> fault_exec;
  std::unique_ptr<api::constraint_compiler> constraints;
  std::unique_ptr<engine> eng_;
  std::atomic<int64_t> last_beat_us{now_us()};
  int32_t max_lora_rank = 0;
  std::atomic<bool> running{false};  // warmup done, the engine loop beats

  void install_adapter(const std::string& name, const std::string& path) override {
    {
      std::lock_guard lock(lora_mu_);
      if (adapters_.count(name)) return;
    }
    auto ad = load_lora_adapter(path, parts.model->config, parts.model->weights, max_lora_rank, kernels::active_isa());
    std::lock_guard lock(lora_mu_);
    if (adapters_.count(name)) return;
    if (slot_used_.size() < static_cast<size_t>(max_loras)) slot_used_.resize(static_cast<size_t>(max_loras), false);
    const auto free_slot = std::find(slot_used_.begin(), slot_used_.end(), false);
    if (free_slot == slot_used_.end())
      throw std::runtime_error("all " + std::to_string(max_loras) + " LoRA slots of '" + info.name + "' are in use (--max-loras " +
                               std::to_string(max_loras) + "); unload an adapter first");
    const auto slot = static_cast<int32_t>(free_slot - slot_used_.begin());
    exec->set_adapter(slot, std::move(ad));
    *free_slot = true;
    adapters_[name] = lora_slot{slot, owner_.next_salt_.fetch_add(1)};
  }
  void remove_adapter(const std::string& name) override {
    std::lock_guard lock(lora_mu_);
    const auto it = adapters_.find(name);
    if (it == adapters_.end()) return;
    exec->set_adapter(it->second.slot, nullptr);
    slot_used_[static_cast<size_t>(it->second.slot)] = false;
    adapters_.erase(it);
  }
  std::optional<lora_slot> adapter(const std::string& name) const override {
    std::lock_guard lock(lora_mu_);
    const auto it = adapters_.find(name);
    if (it == adapters_.end()) return std::nullopt;
    return it->second;
  }

 private:
  mutable std::mutex lora_mu_;
  std::map<std::string, lora_slot> adapters_;
  std::vector<bool> slot_used_;
};

serving_models::serving_models(int32_t n_threads, service_notifier& notifier, int64_t debug_fail_forward_at, bool several_models)
    : pool_(n_threads), notifier_(notifier), debug_fail_forward_at_(debug_fail_forward_at), several_models_(several_models),
      next_salt_((static_cast<uint64_t>(std::random_device{}()) << 32 | std::random_device{}()) | 1) {}

void serving_models::feed_watchdog() {
  const int64_t hb = notifier_.heartbeat_interval_us();
  if (hb > 0 && all_engines_alive(2 * hb)) notifier_.watchdog();
}

serving_models::~serving_models() = default;

void serving_models::preload(const std::string& id, model_parts parts) {
  preloaded_id_ = id;
  preloaded_ = std::make_unique<model_parts>(std::move(parts));
}

bool serving_models::all_engines_alive(int64_t max_age_us) const {
  const int64_t now = now_us();
  std::lock_guard lock(mu_);
  for (const live_model* m : live_)
    if (m->running.load() && now - m->last_beat_us.load() > max_age_us) return false;
  return true;
}

std::unique_ptr<serving_model> serving_models::build(const catalog_model& spec) {
  catalog_model m = spec;
  model_parts parts;
  if (preloaded_ && preloaded_id_ == m.spec.id) {
    parts = std::move(*preloaded_);
    preloaded_.reset();
  } else {
    int code = 0;
    if (auto err = load_model_parts(m, parts, code); !err.empty()) throw std::runtime_error(err);
  }
  auto live = std::make_unique<live_model>(*this, std::move(parts));
  const model_parts& p = live->parts;
  const serve_options& so = m.serve;
  engine_config ecfg = make_engine_config(m.model, m.engine, p.max_model_len);
  ecfg.heartbeat_interval_us = notifier_.heartbeat_interval_us();
  if (ecfg.heartbeat_interval_us > 0) {
    ecfg.on_heartbeat = [this, beat = &live->last_beat_us] {
      beat->store(now_us());
      feed_watchdog();
    };
  }
  ecfg.on_warmup_progress = [this, what = several_models_ ? "warming up " + m.spec.id + ": " : std::string("warming up: ")](
                                int32_t pct, int32_t done, int32_t total) {
    notifier_.status(what + std::to_string(pct) + "% (" + std::to_string(done) + "/" + std::to_string(total) +
                     " buckets)");
  };
  const executor_config xcfg = make_executor_config(m.model);
  live->exec = std::make_unique<model_executor>(*p.model, xcfg, pool_, turns_);
  if (p.draft.model) live->draft_exec = attach_draft_model(p.draft, xcfg, *live->exec, ecfg);
  live->fault_exec = std::make_unique<fault_injecting_executor>(*live->exec, debug_fail_forward_at_);
  try {
    live->eng_ = std::make_unique<engine>(*live->fault_exec, *p.model->tok, ecfg);
  } catch (const std::exception& e) {
    throw std::runtime_error(flag_names(e.what()));
  }
  live->cache_config = {{"block_size", std::to_string(live->exec->block_size())},
                        {"cache_dtype", kernels::kv_dtype_name(parse_kv_dtype(m.model.kv_cache_dtype))},
                        {"enable_prefix_caching", ecfg.enable_prefix_caching ? "True" : "False"},
                        {"num_cpu_blocks", std::to_string(live->exec->n_kv_blocks())},
                        {"num_gpu_blocks", "0"},
                        {"kv_cache_memory_bytes", std::to_string(static_cast<uint64_t>(live->exec->n_kv_blocks()) *
                                                                 kv_cache::bytes_per_block(p.model->config, live->exec->block_size(),
                                                                                           parse_kv_dtype(m.model.kv_cache_dtype)))}};
  if (ecfg.speculative.enabled()) live->num_speculative_tokens = ecfg.speculative.num_speculative_tokens;
  live->constraints = std::make_unique<api::constraint_compiler>(*p.model->tok, so.json_whitespace == "compact");
  const api::tool_call_format tool_format = tool_format_of(so, p.tmpl.get());
  spdlog::info("Tool calls: {} format ({})", api::tool_call_format_name(tool_format),
               so.tool_call_parser.empty() ? "from the chat template" : "--tool-call-parser");
  const pooling_type pooling = pooling_of(so, p.model->config);
  spdlog::info("Embeddings: {} pooling over {} dimensions, normalized ({})", pooling_name(pooling), p.model->config.n_embd,
               so.pooling.empty() ? (p.model->config.gguf_pooling > 0 ? "the model's pooling_type" : "default") : "--pooling");
  std::shared_ptr<const api::reasoning_vocab> reasoning_tokens;
  const api::reasoning_parser reasoning = reasoning_parser_of(so, p.tmpl.get(), *p.model->tok, reasoning_tokens);
  live->info = api::served_model{p.model->tok.get(), p.model->config.n_vocab, p.max_model_len, m.spec.id, p.tmpl.get(),
                                 p.tmpl_error, live->constraints.get(), tool_format, p.model->config.n_embd, pooling, reasoning,
                                 reasoning_tokens, harmony_vocab_of(so, reasoning, tool_format, *p.model->tok)};
  std::error_code ec;
  const auto file_bytes = std::filesystem::file_size(m.model.model_path, ec);
  live->memory_bytes = (ec ? 0 : file_bytes) + static_cast<uint64_t>(live->exec->n_kv_blocks()) *
                                                   kv_cache::bytes_per_block(p.model->config, live->exec->block_size(),
                                                                             parse_kv_dtype(m.model.kv_cache_dtype));
  live->eng = live->eng_.get();
  live->max_loras = so.max_loras;
  live->max_lora_rank = so.max_lora_rank;
  try {
    live->eng_->start();  // warmup, then the engine thread
  } catch (const std::exception& e) {
    throw std::runtime_error(flag_names(e.what()));
  }
  live->last_beat_us.store(now_us());
  live->running.store(true);
  live->fault_exec->arm();  // injected failures count from here (warmup passes do not count)
  return live;
}

}  // namespace spate::cli
