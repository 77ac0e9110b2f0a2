// Speculative decoding with a draft model: a smaller model with the target's
// vocabulary, on its own forward_executor (own paged KV cache, usually the
// target's thread pool), proposes k tokens greedily (the draft's argmax, so
// proposals are deterministic; see draft_proposer.h).
//
// Per request it keeps a block table in the draft's KV and the tokens whose
// KV that holds. propose() keeps the longest prefix of those that still
// matches the request's tokens (drafts the target rejected fall away),
// computes the rest of the tokens in one forward (the catch-up, a prefill
// the first time), and then runs k - 1 single-token steps. A request's
// blocks return when it finishes (release()); when the draft's KV is full,
// fewer or no tokens are proposed.
//
// Cost per propose: one catch-up forward plus k - 1 decode forwards of the
// draft. Thread-safety: engine thread only (and the executor is driven from
// it alone).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/block_pool.h"
#include "engine/draft_proposer.h"
#include "model/forward_executor.h"

namespace spate {

class draft_model_proposer final : public draft_proposer {
 public:
  // draft must outlive the proposer.
  explicit draft_model_proposer(forward_executor& draft);
  int32_t propose(int64_t request_id, std::span<const int32_t> tokens, int32_t max_k,
                  std::vector<int32_t>& out) override;
  void release(int64_t request_id) override;

  int32_t n_free_blocks() const { return pool_.n_free(); }
  int32_t n_total_blocks() const { return pool_.n_total(); }

 private:
  struct request_kv {
    explicit request_kv(block_pool& pool) : blocks(pool) {}
    block_table blocks;
    std::vector<int32_t> cached;  // tokens whose KV the blocks hold, by position
  };
  // One forward of tokens at positions [n_past, ...) for r; returns the
  // draft's argmax after the last of them.
  int32_t step(request_kv& r, std::span<const int32_t> tokens, int32_t n_past);
  int32_t propose_or_throw(request_kv& r, std::span<const int32_t> tokens, int32_t max_k, std::vector<int32_t>& out);

  forward_executor& exec_;
  block_pool pool_;  // declared before states_: tables release into it
  std::unordered_map<int64_t, std::unique_ptr<request_kv>> states_;
  std::vector<float> logits_;
};

}  // namespace spate
