#include "engine/stop_matcher.h"

#include <algorithm>

namespace spate {

stop_matcher::stop_matcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) max_stop_len_ = std::max(max_stop_len_, s.size());
}

size_t stop_matcher::partial_suffix_len() const {
  const std::string_view text(held_);
  const size_t longest = std::min(text.size(), max_stop_len_ == 0 ? 0 : max_stop_len_ - 1);
  for (size_t len = longest; len > 0; --len) {
    const std::string_view suffix = text.substr(text.size() - len);
    for (const auto& s : stops_)
      if (s.size() > len && std::string_view(s).substr(0, len) == suffix) return len;
  }
  return 0;
}

stop_matcher::result stop_matcher::feed(std::string_view delta) {
  result out;
  if (stopped_) return out;
  held_.append(delta);
  if (stops_.empty()) {
    out.text.swap(held_);
    return out;
  }

  // Any occurrence is new: held_ before this delta contained none, and it only kept a suffix
  // that is a prefix of a stop string, so no occurrence can start before held_.
  size_t best_end = std::string::npos, best_start = 0, best_index = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const std::string& s = stops_[i];
    if (s.empty()) continue;
    const size_t pos = held_.find(s);  // first occurrence => earliest end for this string
    if (pos == std::string::npos) continue;
    const size_t end = pos + s.size();
    if (end < best_end || (end == best_end && pos < best_start)) {
      best_end = end;
      best_start = pos;
      best_index = i;
    }
  }
  if (best_end != std::string::npos) {
    out.text = held_.substr(0, best_start);
    out.stopped = true;
    out.stop_index = best_index;
    held_.clear();
    stopped_ = true;
    stop_index_ = best_index;
    return out;
  }

  const size_t keep = partial_suffix_len();
  out.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string stop_matcher::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace spate
