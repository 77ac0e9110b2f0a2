// Progress of long work (model loading, warmup, offline generation) in
// whole percent steps: advance() says when the work crossed the next
// multiple of step_pct, so callers log at every 10% and no more often.
//
// Not thread-safe: one owner.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace spate {

class percent_steps {
 public:
  // total: units of work (> 0; smaller counts as 1). step_pct in [1, 100].
  explicit percent_steps(int64_t total, int step_pct = 10);

  // done units are finished (clamped to [0, total]). Returns the highest
  // multiple of step_pct reached, when it is higher than at the last report;
  // 100 is reported once, when done reaches total.
  std::optional<int> advance(int64_t done);

  int64_t total() const { return total_; }

 private:
  int64_t total_;
  int step_pct_;
  int reported_pct_ = 0;
};

// "[#######.............] 14/40 requests, 532.1 tok/s" for a terminal, width
// characters of bar. done is clamped to total.
std::string progress_bar(int64_t done, int64_t total, const std::string& unit, double rate_per_s, const std::string& rate_unit,
                         int width = 30);

}  // namespace spate
