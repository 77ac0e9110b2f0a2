// The draft model of --speculative-config {"model": PATH, ...}: loaded once at
// start-up, checked against the target (same architecture, same vocabulary:
// every token's text and the logit width), then run by its own executor on
// the target executor's threads, behind a draft_model_proposer.
#pragma once

#include <memory>
#include <string>

#include "engine/draft_model_proposer.h"
#include "engine/engine_config.h"
#include "model/model_executor.h"
#include "model/model_loader.h"

namespace spate::cli {

struct draft_model {
  std::unique_ptr<loaded_model> model;
};

// Loads path and checks it against target. Returns "" or a message naming
// what differs (for "spate CMD: --speculative-config: ...").
std::string load_draft_model(const std::string& path, const loaded_model& target, draft_model& out);

// Builds the draft's executor (cfg's KV budget and block size, the target
// executor's threads), puts its proposer into ecfg.speculative.proposer and
// returns the executor. The caller keeps it from after target_exec (which it
// runs on) until after the engine built from ecfg is gone.
// Precondition: d.model loaded and outlives the executor.
std::unique_ptr<model_executor> attach_draft_model(const draft_model& d, const executor_config& cfg,
                                                   model_executor& target_exec, engine_config& ecfg);

}  // namespace spate::cli
