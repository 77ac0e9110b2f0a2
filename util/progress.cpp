#include "util/progress.h"

#include <algorithm>
#include <cstdio>

namespace spate {

percent_steps::percent_steps(int64_t total, int step_pct) : total_(std::max<int64_t>(1, total)), step_pct_(std::clamp(step_pct, 1, 100)) {}

std::optional<int> percent_steps::advance(int64_t done) {
  done = std::clamp<int64_t>(done, 0, total_);
  const int pct = static_cast<int>(done * 100 / total_);
  const int mark = done == total_ ? 100 : pct / step_pct_ * step_pct_;
  if (mark <= reported_pct_) return std::nullopt;
  reported_pct_ = mark;
  return mark;
}

std::string progress_bar(int64_t done, int64_t total, const std::string& unit, double rate_per_s, const std::string& rate_unit,
                         int width) {
  total = std::max<int64_t>(total, 1);
  done = std::clamp<int64_t>(done, 0, total);
  width = std::max(width, 1);
  const auto filled = static_cast<int>(done * width / total);
  std::string s = "[" + std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '.') + "] ";
  char buf[128];
  std::snprintf(buf, sizeof buf, "%lld/%lld %s, %.1f %s", static_cast<long long>(done), static_cast<long long>(total), unit.c_str(),
                rate_per_s, rate_unit.c_str());
  return s + buf;
}

}  // namespace spate
