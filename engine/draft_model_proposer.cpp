#include "engine/draft_model_proposer.h"

#include <algorithm>
#include <spdlog/spdlog.h>

#include "engine/sampler.h"

namespace spate {

draft_model_proposer::draft_model_proposer(forward_executor& draft) : exec_(draft), pool_(draft.n_kv_blocks()) {}

int32_t draft_model_proposer::step(request_kv& r, std::span<const int32_t> tokens, int32_t n_past) {
  forward_batch b;
  b.seqs.push_back({tokens, n_past, r.blocks.ids(), 1, false});
  logits_.resize(static_cast<size_t>(exec_.n_vocab()));
  exec_.forward(b, logits_.data(), nullptr);
  r.cached.resize(static_cast<size_t>(n_past));
  r.cached.insert(r.cached.end(), tokens.begin(), tokens.end());
  return sampler::argmax(logits_);
}

int32_t draft_model_proposer::propose_or_throw(request_kv& r, std::span<const int32_t> tokens, int32_t max_k,
                                               std::vector<int32_t>& out) {
  const auto n_tokens = static_cast<int32_t>(tokens.size());
  // Keep the cached prefix that still matches; the last token is always fed
  // again (its logits give the first draft).
  const auto mismatch = std::mismatch(r.cached.begin(), r.cached.end(), tokens.begin(), tokens.end());
  const auto n_valid = std::min(static_cast<int32_t>(mismatch.first - r.cached.begin()), n_tokens - 1);
  r.cached.resize(static_cast<size_t>(n_valid));
  // Positions needed: the tokens, then the first k - 1 drafts (the last draft is not fed).
  const int32_t bs = exec_.block_size();
  const int64_t room = (static_cast<int64_t>(r.blocks.n_blocks()) + pool_.n_free()) * bs;
  const auto k = static_cast<int32_t>(std::min<int64_t>(max_k, room - n_tokens + 1));
  if (k < 1) return 0;
  r.blocks.shrink_to(static_cast<int32_t>((n_valid + bs - 1) / bs));  // stale blocks past the prefix may be reused
  if (!r.blocks.grow_to(static_cast<int64_t>(n_tokens) + k - 1, bs)) return 0;  // room said it fits
  int32_t next = step(r, tokens.subspan(static_cast<size_t>(n_valid)), n_valid);
  out.push_back(next);
  for (int32_t j = 1; j < k; ++j) {
    const int32_t fed[1] = {next};
    next = step(r, fed, n_tokens + j - 1);
    out.push_back(next);
  }
  return k;
}

int32_t draft_model_proposer::propose(int64_t request_id, std::span<const int32_t> tokens, int32_t max_k,
                                      std::vector<int32_t>& out) {
  if (tokens.empty() || max_k < 1) return 0;
  auto& slot = states_[request_id];
  if (!slot) slot = std::make_unique<request_kv>(pool_);
  const size_t before = out.size();
  try {
    return propose_or_throw(*slot, tokens, max_k, out);
  } catch (const std::exception& e) {
    // The target decodes on without drafts; this request's draft KV starts over.
    spdlog::warn("draft model failed for request {}: {}", request_id, e.what());
    out.resize(before);
    states_.erase(request_id);
    return 0;
  }
}

void draft_model_proposer::release(int64_t request_id) { states_.erase(request_id); }

}  // namespace spate
