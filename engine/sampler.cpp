#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace spate {

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// High 64 bits of a * b (portable): maps a uniform 64-bit a to [0, b).
uint64_t mul_high(uint64_t a, uint64_t b) {
  const uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32, b_lo = b & 0xffffffffu, b_hi = b >> 32;
  const uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + lo_hi;
  return hi_hi + (hi_lo >> 32) + (cross >> 32);
}

// Exact sampling weight of a probability relative to the best token (p in [0, 1]): p in units of
// 2^-42, truncated. n_vocab * 2^42 stays far below 2^64.
uint64_t weight_of(float p) { return uint64_t(double(p) * 0x1p42); }

// The strict total order every truncation uses: higher logit first, ties to the lower id.
bool precedes(std::span<const float> logits, int32_t a, int32_t b) {
  return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

constexpr uint64_t k_watermark_salt = 0x5350415445574d4bull;  // "SPATEWMK"

uint64_t watermark_threshold(double gamma) { return uint64_t(gamma * 0x1p53); }

}  // namespace

uint64_t watermark_hash(int32_t prev, int32_t token) {
  const uint64_t key = mix64(uint64_t(uint32_t(prev)) ^ k_watermark_salt);
  return mix64(key ^ uint64_t(uint32_t(token)));
}

bool watermark_green(int32_t prev, int32_t token, double gamma) {
  return (watermark_hash(prev, token) >> 11) < watermark_threshold(gamma);
}

bool eos_set::contains(int32_t id) const { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

rng::rng(uint64_t seed) {
  uint64_t sm = seed;
  for (auto& s : s_) s = splitmix64(sm);
}

uint64_t rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double rng::next_double() { return double(next_u64() >> 11) * 0x1.0p-53; }

sampler::sampler(const sampling_params& p, uint64_t default_seed)
    : params_(p), rng_(p.seed ? *p.seed : default_seed) {}

int32_t sampler::weighted_select(std::span<const float> logits, size_t n, uint64_t need) {
  auto before = [&logits](int32_t a, int32_t b) { return precedes(logits, a, b); };
  // Invariant: the answer is in order_[lo, hi) and need <= weight of order_[lo, hi); everything
  // before order_[lo] in the total order has been taken already.
  size_t lo = 0, hi = n;
  while (hi - lo > 32) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(order_.begin() + lo, order_.begin() + mid, order_.begin() + hi, before);
    uint64_t upper = 0;  // weight of the best (mid - lo) tokens of the range
    for (size_t j = lo; j < mid; ++j) upper += weight_of(probs_[order_[j]]);
    if (upper >= need) {
      hi = mid;
    } else {
      need -= upper;
      lo = mid;
    }
  }
  std::sort(order_.begin() + lo, order_.begin() + hi, before);
  uint64_t acc = 0;
  for (size_t j = lo; j < hi; ++j) {
    acc += weight_of(probs_[order_[j]]);
    if (acc >= need) return order_[j];
  }
  return order_[hi - 1];  // unreachable while the invariant holds
}

int32_t sampler::truncation_cut(std::span<const float> logits, float max) {
  // Tokens are bucketed by distance from the best logit; the bucket index is monotone in the
  // total order, so whole buckets are either kept or dropped and only the one bucket where a cut
  // falls needs selection.
  constexpr int n_buckets = 64;
  constexpr float buckets_per_nat = 2.0f;
  const size_t n_vocab = logits.size();
  const bool use_top_k = params_.top_k > 0 && size_t(params_.top_k) < n_vocab;
  const bool use_top_p = params_.top_p < 1.0f;

  bucket_.resize(n_vocab);
  uint32_t bucket_count[n_buckets] = {};
  uint64_t bucket_weight[n_buckets] = {};
  for (size_t i = 0; i < n_vocab; ++i) {
    const float d = (max - logits[i]) * buckets_per_nat;  // +inf for -inf logits
    const int b = d < float(n_buckets - 1) ? int(d) : n_buckets - 1;
    bucket_[i] = uint8_t(b);
    ++bucket_count[b];
    bucket_weight[b] += weight_of(probs_[i]);
  }
  auto gather = [&](int b) {
    order_.clear();
    for (size_t i = 0; i < n_vocab; ++i)
      if (bucket_[i] == b) order_.push_back(int32_t(i));
  };
  auto before = [&logits](int32_t a, int32_t b) { return precedes(logits, a, b); };

  int32_t cut = -1;
  int last_bucket = n_buckets - 1;  // candidates: buckets before it, plus order_[0, n_last) of it
  size_t n_last = bucket_count[last_bucket];
  bool last_gathered = false;
  if (use_top_k) {
    size_t rank = size_t(params_.top_k) - 1;  // rank of the cut token, counted from the best
    int b = 0;
    while (bucket_count[b] <= rank) rank -= bucket_count[b++];
    gather(b);
    std::nth_element(order_.begin(), order_.begin() + rank, order_.end(), before);
    cut = order_[rank];
    last_bucket = b;
    n_last = rank + 1;  // order_[0, rank] are the bucket's best, in some arrangement
    last_gathered = true;
    uint64_t w = 0;
    for (size_t j = 0; j < n_last; ++j) w += weight_of(probs_[order_[j]]);
    bucket_weight[b] = w;
  }
  if (use_top_p) {
    uint64_t total = 0;
    for (int b = 0; b <= last_bucket; ++b) total += bucket_weight[b];
    // Smallest prefix with weight >= top_p * total, i.e. >= need (an integer).
    uint64_t need = uint64_t(std::ceil(double(params_.top_p) * double(total)));
    need = std::clamp<uint64_t>(need, 1, total);
    int b = 0;
    while (b < last_bucket && bucket_weight[b] < need) need -= bucket_weight[b++];
    size_t n = n_last;
    if (b != last_bucket || !last_gathered) {
      gather(b);
      n = order_.size();
    }
    cut = weighted_select(logits, n, need);
  }
  return cut;
}

int32_t sampler::argmax(std::span<const float> logits) {
  // Two passes: the maximum (a reduction the compiler vectorizes; NaNs were removed before), then
  // its first index. Same answer as the one-pass scan: the first maximum, 0 when all are -inf.
  // The maximum runs on GCC vector types (4 x 4 lanes, baseline SSE on x86-64): the vocabulary
  // is scanned once per sampled token, on the engine thread.
  using v4 = float __attribute__((vector_size(16)));
  const size_t n = logits.size();
  const float* x = logits.data();
  v4 m[4];
  for (auto& v : m) v = v4{neg_inf, neg_inf, neg_inf, neg_inf};
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 4; ++j) {
      v4 v;
      std::memcpy(&v, x + i + 4 * j, sizeof v);
      m[j] = v > m[j] ? v : m[j];
    }
  float mx = neg_inf;
  for (const auto& v : m)
    for (int j = 0; j < 4; ++j) mx = v[j] > mx ? v[j] : mx;
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  const float* first = std::find(x, x + n, mx);
  return first == x + n ? 0 : int32_t(first - x);
}

double sampler::log_sum_exp(std::span<const float> logits, float max) {
  if (max == neg_inf) return neg_inf;
  double sum = 0.0;
  for (float l : logits) sum += std::exp(l - max);
  return double(max) + std::log(sum);
}

void sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> prompt,
                              std::span<const int32_t> generated) {
  const size_t n_vocab = logits.size();
  auto valid = [n_vocab](int32_t t) { return t >= 0 && size_t(t) < n_vocab; };

  if (params_.repetition_penalty != 1.0f) {
    if (seen_.size() != n_vocab) seen_.assign(n_vocab, 0);
    touched_.clear();
    for (auto hist : {prompt, generated})
      for (int32_t t : hist)
        if (valid(t) && !seen_[t]) {
          seen_[t] = 1;
          touched_.push_back(t);
        }
    const float rp = params_.repetition_penalty;
    for (int32_t t : touched_) {
      float& l = logits[t];
      l = l > 0.0f ? l / rp : l * rp;
      seen_[t] = 0;
    }
  }

  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    if (counts_.size() != n_vocab) counts_.assign(n_vocab, 0);
    touched_.clear();
    for (int32_t t : generated)
      if (valid(t) && counts_[t]++ == 0) touched_.push_back(t);
    for (int32_t t : touched_) {
      logits[t] -= params_.frequency_penalty * float(counts_[t]) + params_.presence_penalty;
      counts_[t] = 0;
    }
  }
}

void sampler::mark_typical(double mass) {
  // p_i = probs_[i] / mass; H = -sum p_i log p_i; score_i = |-log p_i - H|. Summed in id order.
  const size_t n_vocab = probs_.size();
  const double log_mass = std::log(mass);
  double entropy = 0.0;
  for (size_t i = 0; i < n_vocab; ++i)
    if (probs_[i] > 0.0f) {
      const double p = double(probs_[i]) / mass;
      entropy -= p * (std::log(double(probs_[i])) - log_mass);
    }
  std::vector<double> score(n_vocab, std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < n_vocab; ++i)
    if (probs_[i] > 0.0f) score[i] = std::fabs(log_mass - std::log(double(probs_[i])) - entropy);
  order_.resize(n_vocab);
  std::iota(order_.begin(), order_.end(), 0);
  std::sort(order_.begin(), order_.end(), [&score](int32_t a, int32_t b) { return score[a] < score[b] || (score[a] == score[b] && a < b); });
  uint64_t total = 0;
  for (size_t i = 0; i < n_vocab; ++i) total += weight_of(probs_[i]);
  const uint64_t need = std::clamp<uint64_t>(uint64_t(std::ceil(double(params_.typical_p) * double(total))), 1, total);
  typical_keep_.assign(n_vocab, 0);
  uint64_t acc = 0;
  for (int32_t id : order_) {
    typical_keep_[id] = 1;
    acc += weight_of(probs_[id]);
    if (acc >= need) break;
  }
}

void sampler::fill_top_logprobs(std::span<const float> logits, double lse, sample_result& out) const {
  if (!params_.logprobs) return;
  const size_t n = std::min<size_t>(size_t(*params_.logprobs), logits.size());
  if (n == 0) return;
  // The heap keeps the worst kept entry on top.
  auto before = [&logits](int32_t a, int32_t b) { return precedes(logits, a, b); };
  std::vector<int32_t> heap;
  heap.reserve(n + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    const int32_t id = int32_t(i);
    if (heap.size() < n) {
      heap.push_back(id);
      std::push_heap(heap.begin(), heap.end(), before);
    } else if (before(id, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), before);
      heap.back() = id;
      std::push_heap(heap.begin(), heap.end(), before);
    }
  }
  std::sort(heap.begin(), heap.end(), before);
  out.top_logprobs.reserve(n);
  for (int32_t id : heap)
    out.top_logprobs.emplace_back(id, logits[id] == neg_inf ? neg_inf : float(double(logits[id]) - lse));
}

sample_result sampler::sample(std::span<float> logits, std::span<const int32_t> prompt,
                              std::span<const int32_t> generated, const eos_set& eog) {
  const size_t n_vocab = logits.size();
  sample_result out;
  if (n_vocab == 0) return out;
  auto valid = [n_vocab](int32_t t) { return t >= 0 && size_t(t) < n_vocab; };

  // 1-2. Sanitise, bias.
  for (float& l : logits)
    if (std::isnan(l)) l = neg_inf;
  for (const auto& [id, bias] : params_.logit_bias)
    if (valid(id)) logits[id] += bias;
  if (params_.watermark && (!generated.empty() || !prompt.empty())) {
    const int32_t prev = generated.empty() ? prompt.back() : generated.back();
    const uint64_t key = mix64(uint64_t(uint32_t(prev)) ^ k_watermark_salt);
    const uint64_t threshold = watermark_threshold(params_.watermark_gamma);
    for (size_t i = 0; i < n_vocab; ++i)
      if ((mix64(key ^ uint64_t(i)) >> 11) < threshold) logits[i] += params_.watermark_delta;
  }

  // 3. min_tokens: the request may not end yet.
  if (generated.size() < size_t(std::max(params_.min_tokens, 0))) {
    for (int32_t id : params_.stop_token_ids)
      if (valid(id)) logits[id] = neg_inf;
    if (!params_.ignore_eos)
      for (int32_t id : eog.ids)
        if (valid(id)) logits[id] = neg_inf;
  }

  // 4. Penalties.
  apply_penalties(logits, prompt, generated);

  // 5a. Greedy.
  if (!(params_.temperature >= greedy_temperature_eps)) {
    const int32_t best = argmax(logits);
    out.token = best;
    if (!params_.logprobs) return out;  // the log-sum-exp over the vocabulary only when asked for
    const double lse = log_sum_exp(logits, logits[best]);
    out.logprob = logits[best] == neg_inf ? neg_inf : float(double(logits[best]) - lse);
    fill_top_logprobs(logits, lse, out);
    return out;
  }

  // 5b. Temperature and softmax (probs_ are relative to the maximum, so the best token has 1).
  const float temperature = params_.temperature;
  if (temperature != 1.0f)
    for (float& l : logits) l /= temperature;
  const int32_t best = argmax(logits);
  const float max = logits[best];
  if (max == neg_inf) {
    out.token = 0;
    out.logprob = neg_inf;
    fill_top_logprobs(logits, neg_inf, out);
    return out;
  }
  probs_.resize(n_vocab);
  double mass = 0.0;
  for (size_t i = 0; i < n_vocab; ++i) {
    probs_[i] = std::exp(logits[i] - max);
    mass += probs_[i];
  }
  const double lse = double(max) + std::log(mass);

  // Truncation: top-k and top-p keep a prefix of the total order; cut is its last token.
  auto before = [&logits](int32_t a, int32_t b) { return precedes(logits, a, b); };
  const bool truncate = (params_.top_k > 0 && size_t(params_.top_k) < n_vocab) || params_.top_p < 1.0f;
  const int32_t cut = truncate ? truncation_cut(logits, max) : -1;
  const float min_p = params_.min_p;
  const bool typical = params_.typical_p < 1.0f;
  if (typical) mark_typical(mass);
  auto kept = [&](int32_t i) {
    return (cut < 0 || !before(cut, i)) && probs_[i] >= min_p && (!typical || typical_keep_[i]);
  };

  // Draw: exact integer weights of the kept tokens, walked in id order. The best token is always
  // kept (it is first in the order and has probability 1 relative to itself), so total > 0.
  uint64_t total = 0;
  for (size_t i = 0; i < n_vocab; ++i)
    if (kept(int32_t(i))) total += weight_of(probs_[i]);
  const uint64_t target = mul_high(rng_.next_u64(), total);  // uniform in [0, total)
  uint64_t acc = 0;
  out.token = best;
  for (size_t i = 0; i < n_vocab; ++i) {
    if (!kept(int32_t(i))) continue;
    acc += weight_of(probs_[i]);
    if (acc > target) {
      out.token = int32_t(i);
      break;
    }
  }

  out.logprob = float(double(logits[out.token]) - lse);
  fill_top_logprobs(logits, lse, out);
  return out;
}

}  // namespace spate
