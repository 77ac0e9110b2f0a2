// Prompt lookup (vLLM's "ngram" speculative method): proposes the
// continuation of the most recent earlier occurrence of the request's last n
// tokens, searching prompt and output, for n from prompt_lookup_max down to
// prompt_lookup_min (the longest suffix that recurs wins).
//
// Cost per call: O(n_tokens * prompt_lookup_max) comparisons at worst, no
// allocation beyond out. Stateless; engine thread.
#pragma once

#include "engine/draft_proposer.h"

namespace spate {

class ngram_proposer final : public draft_proposer {
 public:
  // Precondition: 1 <= min_n <= max_n.
  ngram_proposer(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {}
  int32_t propose(int64_t request_id, std::span<const int32_t> tokens, int32_t max_k,
                  std::vector<int32_t>& out) override;

 private:
  int32_t min_n_, max_n_;
};

}  // namespace spate
