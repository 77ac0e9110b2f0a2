#include "cli/draft_model.h"

#include <spdlog/spdlog.h>

#include "kernels/isa.h"
#include "tokenizer/tokenizer.h"

namespace spate::cli {

namespace {

// "" when the draft can propose tokens for the target, else what differs.
std::string compare(const loaded_model& draft, const loaded_model& target) {
  if (draft.config.arch != target.config.arch) {
    return "the draft model's architecture '" + draft.config.arch + "' differs from the target's '" +
           target.config.arch + "'";
  }
  const tokenizer& a = *draft.tok;
  const tokenizer& b = *target.tok;
  if (draft.config.n_vocab != target.config.n_vocab || a.n_vocab() != b.n_vocab()) {
    return "the draft model's vocabulary has " + std::to_string(a.n_vocab()) + " tokens, the target's " +
           std::to_string(b.n_vocab());
  }
  for (int32_t id = 0; id < a.n_vocab(); ++id) {
    if (a.token_to_piece(id, true) != b.token_to_piece(id, true)) {
      return "the draft model's vocabulary differs from the target's at token " + std::to_string(id) + " ('" +
             a.token_to_piece(id, true) + "' vs '" + b.token_to_piece(id, true) + "')";
    }
  }
  return "";
}

}  // namespace

std::string load_draft_model(const std::string& path, const loaded_model& target, draft_model& out) {
  try {
    out.model = load_model(path, kernels::active_isa());
  } catch (const std::exception& e) {
    return std::string("the draft model: ") + e.what();
  }
  if (auto err = compare(*out.model, target); !err.empty()) return err;
  spdlog::info("Speculative decoding: draft model {} ({}, {} layers)", path, out.model->config.arch, out.model->config.n_layer);
  return "";
}

std::unique_ptr<model_executor> attach_draft_model(const draft_model& d, const executor_config& cfg,
                                                   model_executor& target_exec, engine_config& ecfg) {
  auto exec = std::make_unique<model_executor>(*d.model, cfg, target_exec);
  ecfg.speculative.proposer = std::make_shared<draft_model_proposer>(*exec);
  return exec;
}

}  // namespace spate::cli
