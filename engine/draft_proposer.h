// Where speculative decoding's draft tokens come from. The scheduler asks a
// proposer for up to max_k tokens to follow a decoding request's tokens; the
// engine then verifies them with the target model in the same forward as the
// request's next token (engine.cpp, verify_drafts).
//
// A proposer's drafts are deterministic given the tokens (no sampling), so
// verification can sample each row exactly as plain decoding would and keep
// a draft only when it equals the sampled token: the output is the target
// model's, token for token, at any temperature.
//
// Thread-safety: called on the engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace spate {

class draft_proposer {
 public:
  virtual ~draft_proposer() = default;
  // Appends at most max_k (>= 1) proposed tokens to follow tokens (a running
  // request's prompt and output so far) to out; returns how many it appended
  // (0: no proposal). Must not throw.
  virtual int32_t propose(int64_t request_id, std::span<const int32_t> tokens, int32_t max_k,
                          std::vector<int32_t>& out) = 0;
  // The request finished: drop whatever is kept for it. Must not throw.
  virtual void release(int64_t request_id) {}
};

}  // namespace spate
