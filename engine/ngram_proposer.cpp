#include "engine/ngram_proposer.h"

#include <algorithm>

namespace spate {

int32_t ngram_proposer::propose(int64_t /*request_id*/, std::span<const int32_t> tokens, int32_t max_k,
                                std::vector<int32_t>& out) {
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  // The suffix must occur once more, strictly earlier, so n < n_tokens.
  for (int64_t n = std::min<int64_t>(max_n_, n_tokens - 1); n >= min_n_; --n) {
    const std::span<const int32_t> suffix = tokens.last(static_cast<size_t>(n));
    // Most recent occurrence first: start positions n_tokens - n - 1 down to 0.
    for (int64_t start = n_tokens - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;  // what followed the occurrence (may run into the suffix itself)
      const int64_t count = std::min<int64_t>(max_k, n_tokens - from);
      out.insert(out.end(), tokens.begin() + from, tokens.begin() + from + count);
      return static_cast<int32_t>(count);
    }
  }
  return 0;
}

}  // namespace spate
