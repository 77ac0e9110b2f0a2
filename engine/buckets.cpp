#include "engine/buckets.h"

#include <algorithm>

namespace spate {

std::vector<int32_t> bucket_values(const bucket_range& r) {
  std::vector<int32_t> v;
  int64_t x = r.min;
  while (x < r.step && x <= r.max) {
    v.push_back(static_cast<int32_t>(x));
    x *= 2;
  }
  for (int64_t y = r.step; y <= r.max; y += r.step) {
    if (y >= r.min) v.push_back(static_cast<int32_t>(y));
  }
  if (v.empty() || v.back() < r.max) v.push_back(r.max);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<bucket> make_buckets(const bucket_range& bs, const bucket_range& len) {
  std::vector<bucket> out;
  for (int32_t b : bucket_values(bs)) {
    for (int32_t l : bucket_values(len)) out.push_back({b, l});
  }
  return out;
}

std::optional<bucket> find_bucket(const std::vector<bucket>& buckets, int32_t n_seqs, int32_t len) {
  std::optional<bucket> best;
  for (const auto& b : buckets) {
    if (b.bs < n_seqs || b.len < len) continue;
    const int64_t area = static_cast<int64_t>(b.bs) * b.len;
    if (!best || area < static_cast<int64_t>(best->bs) * best->len || (area == static_cast<int64_t>(best->bs) * best->len && b.bs < best->bs)) {
      best = b;
    }
  }
  return best;
}

std::string validate(const bucket_range& r, const char* name) {
  if (r.min < 1 || r.step < 1 || r.max < 1) return std::string(name) + ": min, step and max must be >= 1";
  if (r.min > r.max) return std::string(name) + ": min must be <= max";
  return "";
}

std::string describe(const bucket_range& bs, const bucket_range& len, const char* len_name) {
  return "bs:[" + std::to_string(bs.min) + ", " + std::to_string(bs.step) + ", " + std::to_string(bs.max) + "], " + len_name + ":[" +
         std::to_string(len.min) + ", " + std::to_string(len.step) + ", " + std::to_string(len.max) + "]";
}

std::string describe(const std::vector<bucket>& buckets) {
  std::string s = "[";
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (i) s += ", ";
    s += "(" + std::to_string(buckets[i].bs) + ", " + std::to_string(buckets[i].len) + ")";
  }
  return s + "]";
}

std::vector<int32_t> warmup_order(int32_t n_prompt, int32_t n_decode) {
  std::vector<int32_t> order;
  std::vector<bool> seen(static_cast<size_t>(std::max(0, n_prompt + n_decode)), false);
  auto push = [&](int32_t i) {
    if (!seen[static_cast<size_t>(i)]) order.push_back(i);
    seen[static_cast<size_t>(i)] = true;
  };
  if (n_prompt > 0) push(0);
  if (n_decode > 0) push(n_prompt);
  for (int32_t i = 0; i < n_prompt + n_decode; ++i) push(i);
  return order;
}

}  // namespace spate
