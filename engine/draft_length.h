// Adaptive speculation length, one per request: how many draft tokens its
// next decode asks the proposer for, from how its recent drafts fared.
//
// A rejected draft costs a row of compute in the verifying forward. While a
// step is bound by reading the weights (one stream) that row is nearly free;
// once several streams share a step it is not, and drafts that keep failing
// (open-ended chat under n-gram lookup) slow everyone down. So:
//  - every draft accepted: ask for one more next time (up to k_max);
//  - some rejected: ask for one more than were accepted;
//  - none accepted: also back off, skipping the next 1, 3, 7, 15 then 31
//    decodes (the streak resets at the first accepted draft).
// The scheduler consults it only while several sequences run: a lone stream
// always asks for k_max (perf/scripts/bench_speculative.sh, grounded, 1 stream:
// 2.52x with k_max at every decode, 1.82x adaptive).
// The output never depends on it: verification keeps exactly the tokens
// plain decoding samples, whatever was proposed.
//
// Thread-safety: none; the scheduler (engine thread) owns it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace spate {

class draft_length {
 public:
  static constexpr int32_t k_max_backoff_shift = 5;  // longest back-off: 2^5 - 1 decodes

  // Drafts to ask for at this decode (0: backing off), at most k_max (>= 0).
  // Counts a skipped decode when it returns 0.
  int32_t next(int32_t k_max) {
    if (n_skip_ > 0) {
      --n_skip_;
      return 0;
    }
    return k_ > 0 ? std::min(k_, k_max) : k_max;
  }

  // The verifying forward kept n_accepted of the n_draft (>= 1) drafts asked
  // for with k_max in effect.
  void on_verified(int32_t n_draft, int32_t n_accepted, int32_t k_max) {
    n_accepted = std::clamp(n_accepted, 0, n_draft);
    if (n_accepted == n_draft) {
      k_ = std::min(k_max, (k_ > 0 ? k_ : k_max) + 1);
      n_misses_ = 0;
      return;
    }
    k_ = std::max(1, n_accepted + 1);
    if (n_accepted > 0) {
      n_misses_ = 0;
      return;
    }
    n_misses_ = std::min(n_misses_ + 1, k_max_backoff_shift);
    n_skip_ = (1 << n_misses_) - 1;
  }

  int32_t current() const { return k_; }         // 0 until the first verification
  int32_t n_skip() const { return n_skip_; }     // decodes left to skip

 private:
  int32_t k_ = 0;         // drafts to ask for (0: k_max)
  int32_t n_misses_ = 0;  // verifications in a row that accepted nothing
  int32_t n_skip_ = 0;    // decodes to skip before drafting again
};

}  // namespace spate
