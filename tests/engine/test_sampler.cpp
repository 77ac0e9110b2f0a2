#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "engine/engine_api.h"

namespace spate {
namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

const std::vector<int32_t> no_tokens;
const eos_set no_eos{};

sampling_params greedy() {
  sampling_params p;
  p.temperature = 0.0f;
  return p;
}

// Logits whose softmax is exactly proportional to probs.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(p > 0 ? float(std::log(p)) : neg_inf);
  return l;
}

int32_t sample_once(sampler& s, std::vector<float> logits, std::span<const int32_t> prompt = no_tokens,
                    std::span<const int32_t> generated = no_tokens, const eos_set& eog = no_eos) {
  return s.sample(logits, prompt, generated, eog).token;
}

// Relative frequencies of n draws from one sampler over the same logits.
std::vector<double> frequencies(const sampling_params& p, const std::vector<float>& logits, int n, uint64_t seed = 7) {
  sampler s(p, seed);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[sample_once(s, logits)];
  std::vector<double> f;
  for (int c : counts) f.push_back(double(c) / n);
  return f;
}

std::vector<float> random_logits(size_t n_vocab, uint64_t seed, float scale = 4.0f) {
  rng g(seed);
  std::vector<float> l(n_vocab);
  for (auto& x : l) x = float((g.next_double() * 2.0 - 1.0) * scale);
  return l;
}

// ---------------------------------------------------------------- rng

TEST(SamplerRng, DeterministicAndInUnitInterval) {
  rng a(99), b(99), c(100);
  bool differs = false;
  double sum = 0.0;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t x = a.next_u64(), y = b.next_u64();
    ASSERT_EQ(x, y);
    differs |= x != c.next_u64();
  }
  EXPECT_TRUE(differs);
  for (int i = 0; i < 100000; ++i) {
    const double u = a.next_double();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(SamplerRng, KnownFirstOutputs) {
  // Pinned so that a change of generator (which would change every seeded completion) is noticed.
  rng g(0);
  const uint64_t first = g.next_u64();
  rng h(0);
  EXPECT_EQ(h.next_u64(), first);
  // splitmix64(0) = 0xe220a8397b1dcdaf is the published first splitmix64 output; xoshiro256**'s
  // first output is rotl(s1 * 5, 7) * 9 of the seeded state.
  uint64_t s1 = 0x6e789e6aa1b965f4ull;  // second splitmix64 output from state 0
  const uint64_t want = ((s1 * 5) << 7 | (s1 * 5) >> 57) * 9;
  EXPECT_EQ(first, want);
}

// ---------------------------------------------------------------- greedy

TEST(SamplerGreedy, PicksArgmax) {
  sampler s(greedy(), 1);
  EXPECT_EQ(sample_once(s, {1.0f, 5.0f, 3.0f, -2.0f}), 1);
  EXPECT_EQ(sample_once(s, {-9.0f, -5.0f, -3.0f, -4.0f}), 2);
}

TEST(SamplerGreedy, TiesGoToLowestId) {
  sampler s(greedy(), 1);
  EXPECT_EQ(sample_once(s, {2.0f, 7.0f, 7.0f, 1.0f, 7.0f}), 1);
  EXPECT_EQ(sample_once(s, {0.0f, 0.0f, 0.0f}), 0);
}

TEST(SamplerGreedy, TinyTemperatureIsGreedy) {
  sampling_params p;
  p.temperature = 1e-6f;
  sampler s(p, 5);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sample_once(s, {1.0f, 1.5f, 1.49f}), 1);
}

TEST(SamplerGreedy, DeterministicOnLargeVocab) {
  auto l = random_logits(152064, 3);
  const auto best = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  sampler a(greedy(), 1), b(greedy(), 2);
  EXPECT_EQ(sample_once(a, l), best);
  EXPECT_EQ(sample_once(b, l), best);
}

TEST(SamplerGreedy, LogprobIsLogSoftmax) {
  auto p = greedy();
  p.logprobs = 2;
  sampler s(p, 1);
  std::vector<float> l = {1.0f, 3.0f, 2.0f, 0.0f};
  auto r = s.sample(l, no_tokens, no_tokens, no_eos);
  double z = 0;
  for (float x : {1.0, 3.0, 2.0, 0.0}) z += std::exp(x);
  EXPECT_EQ(r.token, 1);
  EXPECT_NEAR(r.logprob, 3.0 - std::log(z), 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0].first, 1);
  EXPECT_EQ(r.top_logprobs[1].first, 2);
  EXPECT_NEAR(r.top_logprobs[0].second, 3.0 - std::log(z), 1e-5);
  EXPECT_NEAR(r.top_logprobs[1].second, 2.0 - std::log(z), 1e-5);
}

TEST(SamplerGreedy, AllMaskedAndNanAreHandled) {
  auto g = greedy();
  g.logprobs = 2;
  sampler s(g, 1);
  std::vector<float> all_masked(5, neg_inf);
  auto r = s.sample(all_masked, no_tokens, no_tokens, no_eos);
  EXPECT_EQ(r.token, 0);
  EXPECT_EQ(r.logprob, neg_inf);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0], std::make_pair(0, neg_inf));
  EXPECT_EQ(r.top_logprobs[1], std::make_pair(1, neg_inf));
  EXPECT_EQ(sample_once(s, {NAN, 1.0f, NAN, 2.0f}), 3);

  sampling_params hot;
  sampler t(hot, 1);
  EXPECT_EQ(sample_once(t, std::vector<float>(5, neg_inf)), 0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_once(t, {NAN, 1.0f, NAN, neg_inf}), 1);
}

// ---------------------------------------------------------------- seeded sampling

TEST(SamplerSeed, SameSeedSameSequence) {
  sampling_params p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.top_k = 50;
  p.seed = 42;
  sampler a(p, 1), b(p, 2);  // default_seed ignored when p.seed is set
  std::vector<int32_t> gen_a, gen_b;
  for (int step = 0; step < 200; ++step) {
    const auto l = random_logits(32000, 1000 + step, 3.0f);
    gen_a.push_back(sample_once(a, l));
    gen_b.push_back(sample_once(b, l));
  }
  EXPECT_EQ(gen_a, gen_b);
}

TEST(SamplerSeed, DifferentSeedsDiffer) {
  sampling_params p;
  std::vector<int32_t> seq[2];
  for (int k = 0; k < 2; ++k) {
    p.seed = 42 + k;
    sampler s(p, 0);
    for (int step = 0; step < 100; ++step) seq[k].push_back(sample_once(s, random_logits(1000, step, 1.0f)));
  }
  EXPECT_NE(seq[0], seq[1]);
}

TEST(SamplerSeed, DefaultSeedUsedWhenUnset) {
  sampling_params p;
  sampler a(p, 11), b(p, 11), c(p, 12);
  std::vector<int32_t> sa, sb, sc;
  for (int step = 0; step < 100; ++step) {
    const auto l = random_logits(1000, step, 1.0f);
    sa.push_back(sample_once(a, l));
    sb.push_back(sample_once(b, l));
    sc.push_back(sample_once(c, l));
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
}

TEST(SamplerSeed, RequestsAreIndependent) {
  // Interleaving another request's draws does not change this request's sequence.
  sampling_params p;
  p.seed = 5;
  sampler alone(p, 0), interleaved(p, 0), other(p, 0);
  const auto l = random_logits(500, 9, 2.0f);
  for (int i = 0; i < 100; ++i) {
    sample_once(other, l);
    EXPECT_EQ(sample_once(alone, l), sample_once(interleaved, l));
  }
}

// ---------------------------------------------------------------- distribution

TEST(SamplerDistribution, FrequenciesMatchSoftmax) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4, 0.0};
  const auto f = frequencies(sampling_params{}, logits_of(probs), 20000);
  // Standard error <= sqrt(0.25 / 20000) = 0.0035; the seed makes the result fixed.
  for (size_t i = 0; i < probs.size(); ++i) EXPECT_NEAR(f[i], probs[i], 0.012) << i;
  EXPECT_EQ(f[4], 0.0);
}

TEST(SamplerDistribution, TemperatureSharpensAndFlattens) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  sampling_params p;
  p.temperature = 0.5f;  // p^2, renormalised: 1, 4, 9, 16 / 30
  auto f = frequencies(p, logits_of(probs), 20000);
  const double sharp[] = {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], sharp[i], 0.012) << i;

  p.temperature = 2.0f;  // sqrt(p), renormalised
  f = frequencies(p, logits_of(probs), 20000);
  double z = 0;
  for (double q : probs) z += std::sqrt(q);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], std::sqrt(probs[i]) / z, 0.012) << i;
}

// ---------------------------------------------------------------- truncation

TEST(SamplerTruncation, TopKKeepsKBest) {
  const std::vector<double> probs = {0.05, 0.4, 0.1, 0.3, 0.15};
  sampling_params p;
  p.top_k = 2;
  const auto f = frequencies(p, logits_of(probs), 20000);
  EXPECT_NEAR(f[1], 0.4 / 0.7, 0.012);
  EXPECT_NEAR(f[3], 0.3 / 0.7, 0.012);
  EXPECT_EQ(f[0] + f[2] + f[4], 0.0);
}

TEST(SamplerTruncation, TopKTiesKeepLowerIds) {
  sampling_params p;
  p.top_k = 2;
  const auto f = frequencies(p, {0.0f, 1.0f, 1.0f, 1.0f, 1.0f}, 4000);
  EXPECT_GT(f[1], 0.4);
  EXPECT_GT(f[2], 0.4);
  EXPECT_EQ(f[0] + f[3] + f[4], 0.0);
}

TEST(SamplerTruncation, TopKOffValues) {
  const std::vector<double> probs = {0.25, 0.25, 0.25, 0.25};
  for (int32_t k : {-1, 0, 4, 100}) {
    sampling_params p;
    p.top_k = k;
    const auto f = frequencies(p, logits_of(probs), 4000);
    for (double x : f) EXPECT_GT(x, 0.2) << "k=" << k;
  }
}

TEST(SamplerTruncation, TopPKeepsSmallestNucleus) {
  const std::vector<double> probs = {0.15, 0.5, 0.05, 0.3};
  sampling_params p;
  p.top_p = 0.7f;  // 0.5 + 0.3 >= 0.7
  auto f = frequencies(p, logits_of(probs), 20000);
  EXPECT_NEAR(f[1], 0.5 / 0.8, 0.012);
  EXPECT_NEAR(f[3], 0.3 / 0.8, 0.012);
  EXPECT_EQ(f[0] + f[2], 0.0);

  p.top_p = 0.85f;  // needs the 0.15 as well
  f = frequencies(p, logits_of(probs), 20000);
  EXPECT_NEAR(f[0], 0.15 / 0.95, 0.012);
  EXPECT_EQ(f[2], 0.0);

  p.top_p = 0.1f;  // always at least the best token
  f = frequencies(p, logits_of(probs), 1000);
  EXPECT_EQ(f[1], 1.0);
}

TEST(SamplerTruncation, TopPAppliesToTopKRenormalised) {
  const std::vector<double> probs = {0.4, 0.3, 0.2, 0.1};
  sampling_params p;
  p.top_k = 2;     // {0.4, 0.3} -> {0.571, 0.429}
  p.top_p = 0.5f;  // 0.571 >= 0.5: only token 0
  auto f = frequencies(p, logits_of(probs), 1000);
  EXPECT_EQ(f[0], 1.0);
  p.top_p = 0.6f;  // needs both
  f = frequencies(p, logits_of(probs), 20000);
  EXPECT_NEAR(f[0], 0.4 / 0.7, 0.012);
  EXPECT_NEAR(f[1], 0.3 / 0.7, 0.012);
}

TEST(SamplerTruncation, TopPOnLargeVocabWithTies) {
  // 300 equally likely tokens scattered over a 50k vocab, the rest at e^-3 relative weight.
  // The nucleus spans several of the sorter's chunks and cuts through the tie, keeping the
  // lowest ids.
  const size_t n_vocab = 20000, n_top = 300;
  std::vector<float> l(n_vocab, -3.0f);
  std::vector<int32_t> top_ids;
  rng g(77);
  while (top_ids.size() < n_top) {
    const auto id = int32_t(g.next_u64() % n_vocab);
    if (l[id] == 0.0f) continue;
    l[id] = 0.0f;
    top_ids.push_back(id);
  }
  std::sort(top_ids.begin(), top_ids.end());
  const double mass = double(n_top) + double(n_vocab - n_top) * double(std::exp(-3.0f));
  sampling_params p;
  p.top_p = 0.1f;
  const double target = double(p.top_p) * mass;
  const auto n_keep = size_t(std::ceil(target));
  ASSERT_GT(n_keep, 64u);
  ASSERT_LT(n_keep, n_top);
  ASSERT_GT(std::abs(target - std::round(target)), 0.01);  // no rounding ambiguity
  const std::set<int32_t> kept(top_ids.begin(), top_ids.begin() + n_keep);

  sampler s(p, 3);
  std::set<int32_t> seen;
  for (int i = 0; i < 3000; ++i) {
    auto logits = l;
    const int32_t t = s.sample(logits, no_tokens, no_tokens, no_eos).token;
    ASSERT_TRUE(kept.count(t)) << t;
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), n_keep);  // each has p = 1/n_keep per draw
}

TEST(SamplerTruncation, RandomCombinationsMatchSortReference) {
  // Reference: sort by (logit desc, id asc), apply top-k, top-p on the top-k mass, min-p; every
  // sample must be in the kept set, and every kept token with >= 3% of the kept mass must appear.
  rng g(2024);
  for (int iter = 0; iter < 150; ++iter) {
    const size_t n_vocab = 50 + g.next_u64() % 2000;
    const float spread = std::array{1.0f, 6.0f, 30.0f}[g.next_u64() % 3];
    std::vector<float> l(n_vocab);
    for (auto& x : l) x = std::round(float(g.next_double() * 2 - 1) * spread * 4) / 4;  // ties
    sampling_params p;
    p.top_k = std::array{-1, 1, 5, 40, 500}[g.next_u64() % 5];
    p.top_p = std::array{1.0f, 0.95f, 0.5f, 0.2f}[g.next_u64() % 4];
    p.min_p = std::array{0.0f, 0.0f, 0.05f, 0.3f}[g.next_u64() % 4];

    std::vector<int32_t> order(n_vocab);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    const float max = l[order[0]];
    size_t n = p.top_k > 0 ? std::min<size_t>(p.top_k, n_vocab) : n_vocab;
    double mass = 0;
    for (size_t i = 0; i < n; ++i) mass += std::exp(double(l[order[i]] - max));
    double acc = 0;
    for (size_t i = 0; i < n; ++i) {
      acc += std::exp(double(l[order[i]] - max));
      if (acc >= p.top_p * mass * (1 - 1e-12)) {
        n = i + 1;
        break;
      }
    }
    std::map<int32_t, double> kept;
    double kept_mass = 0;
    for (size_t i = 0; i < n; ++i) {
      const double q = std::exp(double(l[order[i]] - max));
      if (q >= p.min_p) {
        kept[order[i]] = q;
        kept_mass += q;
      }
    }

    sampler s(p, iter);
    std::set<int32_t> seen;
    for (int i = 0; i < 300; ++i) {
      auto logits = l;
      const int32_t t = s.sample(logits, no_tokens, no_tokens, no_eos).token;
      ASSERT_TRUE(kept.count(t)) << "iter " << iter << " token " << t;
      seen.insert(t);
    }
    for (const auto& [id, q] : kept) {
      if (q / kept_mass >= 0.03) {
        EXPECT_TRUE(seen.count(id)) << "iter " << iter << " token " << id;
      }
    }
  }
}

TEST(SamplerTruncation, MinPRelativeToBest) {
  const std::vector<double> probs = {0.05, 0.5, 0.15, 0.3};
  sampling_params p;
  p.min_p = 0.2f;  // threshold 0.1: drops 0.05
  auto f = frequencies(p, logits_of(probs), 20000);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_NEAR(f[1], 0.5 / 0.95, 0.012);
  EXPECT_NEAR(f[2], 0.15 / 0.95, 0.012);

  p.min_p = 0.5f;  // threshold 0.25: keeps 0.5 and 0.3
  f = frequencies(p, logits_of(probs), 20000);
  EXPECT_EQ(f[0] + f[2], 0.0);
  EXPECT_NEAR(f[1], 0.5 / 0.8, 0.012);

  p.top_k = 3;  // sorted path gives the same set
  f = frequencies(p, logits_of(probs), 20000);
  EXPECT_EQ(f[0] + f[2], 0.0);
  EXPECT_NEAR(f[1], 0.5 / 0.8, 0.012);

  p.top_k = -1;
  p.min_p = 1.0f;  // only the best
  f = frequencies(p, logits_of(probs), 1000);
  EXPECT_EQ(f[1], 1.0);
}

TEST(SamplerTruncation, LogprobsAreBeforeTruncation) {
  const std::vector<double> probs = {0.4, 0.3, 0.2, 0.1};
  sampling_params p;
  p.top_k = 1;
  p.temperature = 1.0f;
  p.logprobs = 4;
  sampler s(p, 1);
  auto l = logits_of(probs);
  auto r = s.sample(l, no_tokens, no_tokens, no_eos);
  EXPECT_EQ(r.token, 0);
  EXPECT_NEAR(r.logprob, std::log(0.4), 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r.top_logprobs[i].first, i);
    EXPECT_NEAR(r.top_logprobs[i].second, std::log(probs[i]), 1e-5);
  }
  // logprobs = 0: the sampled token's logprob only.
  p.logprobs = 0;
  sampler s0(p, 1);
  l = logits_of(probs);
  EXPECT_TRUE(s0.sample(l, no_tokens, no_tokens, no_eos).top_logprobs.empty());
}

TEST(SamplerTruncation, LogprobsIncludeTemperature) {
  sampling_params p;
  p.temperature = 0.5f;
  p.logprobs = 1;
  sampler s(p, 1);
  std::vector<float> l = {0.0f, 1.0f};
  auto r = s.sample(l, no_tokens, no_tokens, no_eos);
  // Scaled logits {0, 2}.
  const double lse = std::log(1.0 + std::exp(2.0));
  ASSERT_EQ(r.top_logprobs.size(), 1u);
  EXPECT_EQ(r.top_logprobs[0].first, 1);
  EXPECT_NEAR(r.top_logprobs[0].second, 2.0 - lse, 1e-5);
  EXPECT_NEAR(r.logprob, (r.token == 1 ? 2.0 : 0.0) - lse, 1e-5);
}

// ---------------------------------------------------------------- penalties, bias, min_tokens

TEST(SamplerPenalties, RepetitionCoversPromptAndGenerated) {
  auto p = greedy();
  p.repetition_penalty = 2.0f;
  sampler s(p, 1);
  std::vector<float> l = {2.0f, -2.0f, 2.0f, -2.0f, 4.0f};
  const std::vector<int32_t> prompt = {0, 0, 4}, generated = {1, 4};
  s.sample(l, prompt, generated, no_eos);
  EXPECT_FLOAT_EQ(l[0], 1.0f);   // positive: divided (once, despite repeats)
  EXPECT_FLOAT_EQ(l[1], -4.0f);  // negative: multiplied
  EXPECT_FLOAT_EQ(l[2], 2.0f);   // unseen
  EXPECT_FLOAT_EQ(l[3], -2.0f);
  EXPECT_FLOAT_EQ(l[4], 2.0f);   // in both: once
}

TEST(SamplerPenalties, RepetitionChangesGreedyChoice) {
  auto p = greedy();
  p.repetition_penalty = 1.5f;
  sampler s(p, 1);
  const std::vector<int32_t> generated = {0};
  EXPECT_EQ(sample_once(s, {3.0f, 2.5f}, no_tokens, generated), 1);
  EXPECT_EQ(sample_once(s, {3.0f, 2.5f}), 0);
}

TEST(SamplerPenalties, PresenceAndFrequencyUseGeneratedOnly) {
  auto p = greedy();
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  sampler s(p, 1);
  std::vector<float> l = {1.0f, 1.0f, 1.0f, 1.0f};
  const std::vector<int32_t> prompt = {3, 3, 3}, generated = {0, 0, 0, 1};
  s.sample(l, prompt, generated, no_eos);
  EXPECT_FLOAT_EQ(l[0], 1.0f - 0.5f - 3 * 0.25f);
  EXPECT_FLOAT_EQ(l[1], 1.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(l[2], 1.0f);
  EXPECT_FLOAT_EQ(l[3], 1.0f);  // prompt-only: untouched
}

TEST(SamplerPenalties, NegativePenaltiesEncourage) {
  auto p = greedy();
  p.presence_penalty = -1.0f;
  sampler s(p, 1);
  const std::vector<int32_t> generated = {1};
  EXPECT_EQ(sample_once(s, {1.0f, 0.5f}, no_tokens, generated), 1);
}

TEST(SamplerPenalties, RepetitionBeforePresence) {
  // vLLM order: repetition first, then frequency/presence.
  auto p = greedy();
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 1.0f;
  sampler s(p, 1);
  std::vector<float> l = {4.0f, 0.0f};
  const std::vector<int32_t> generated = {0};
  s.sample(l, no_tokens, generated, no_eos);
  EXPECT_FLOAT_EQ(l[0], 1.0f);  // 4 / 2 - 1, not (4 - 1) / 2
}

TEST(SamplerPenalties, ScratchIsResetBetweenSteps) {
  auto p = greedy();
  p.frequency_penalty = 1.0f;
  p.repetition_penalty = 1.5f;
  sampler s(p, 1);
  const std::vector<int32_t> generated = {0, 0};
  std::vector<float> l = {3.0f, 0.0f};
  s.sample(l, no_tokens, generated, no_eos);
  EXPECT_FLOAT_EQ(l[0], 0.0f);
  l = {3.0f, 0.0f};
  s.sample(l, no_tokens, no_tokens, no_eos);
  EXPECT_FLOAT_EQ(l[0], 3.0f);
}

TEST(SamplerPenalties, OutOfRangeHistoryIdsIgnored) {
  auto p = greedy();
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  sampler s(p, 1);
  const std::vector<int32_t> bad = {-1, 7, 1};
  std::vector<float> l = {1.0f, 1.0f};
  s.sample(l, bad, bad, no_eos);
  EXPECT_FLOAT_EQ(l[0], 1.0f);
  EXPECT_FLOAT_EQ(l[1], -0.5f);
}

TEST(SamplerLogitBias, BiasForcesAndBans) {
  auto p = greedy();
  p.logit_bias = {{3, 100.0f}};
  sampler s(p, 1);
  EXPECT_EQ(sample_once(s, {5.0f, 4.0f, 3.0f, -20.0f}), 3);

  sampling_params hot;
  hot.logit_bias = {{0, -100.0f}, {2, -100.0f}};
  const auto f = frequencies(hot, {1.0f, 0.0f, 1.0f, 0.0f}, 5000);
  EXPECT_EQ(f[0] + f[2], 0.0);
  EXPECT_NEAR(f[1], 0.5, 0.03);
}

TEST(SamplerLogitBias, AppliedBeforePenalties) {
  auto p = greedy();
  p.logit_bias = {{0, 2.0f}};
  p.repetition_penalty = 2.0f;
  sampler s(p, 1);
  std::vector<float> l = {2.0f, 0.0f};
  const std::vector<int32_t> generated = {0};
  s.sample(l, no_tokens, generated, no_eos);
  EXPECT_FLOAT_EQ(l[0], 2.0f);  // (2 + 2) / 2
}

TEST(SamplerMinTokens, MasksEosAndStopIdsUntilReached) {
  auto p = greedy();
  p.min_tokens = 2;
  p.stop_token_ids = {3};
  const eos_set eog{{2, 4}};
  sampler s(p, 1);
  const std::vector<float> l = {0.0f, 1.0f, 9.0f, 8.0f, 7.0f};
  const std::vector<int32_t> one = {1}, two = {1, 1};
  EXPECT_EQ(sample_once(s, l, no_tokens, no_tokens, eog), 1);
  EXPECT_EQ(sample_once(s, l, no_tokens, one, eog), 1);
  EXPECT_EQ(sample_once(s, l, no_tokens, two, eog), 2);
}

TEST(SamplerMinTokens, IgnoreEosLeavesEosUnmasked) {
  auto p = greedy();
  p.min_tokens = 5;
  p.ignore_eos = true;
  p.stop_token_ids = {3};
  sampler s(p, 1);
  EXPECT_EQ(sample_once(s, {0.0f, 1.0f, 9.0f, 10.0f}, no_tokens, no_tokens, eos_set{{2}}), 2);
}

TEST(SamplerMinTokens, MaskedTokensNeverSampled) {
  sampling_params p;
  p.min_tokens = 1;
  const eos_set eog{{0}};
  sampler s(p, 1);
  for (int i = 0; i < 2000; ++i) EXPECT_NE(sample_once(s, {5.0f, 0.0f, 0.0f}, no_tokens, no_tokens, eog), 0);
}

// ---------------------------------------------------------------- speed smoke test

TEST(SamplerSpeed, LargeVocabTopP) {
  // Not a benchmark: guards against accidental full sorts or per-step quadratic work.
  sampling_params p;
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  p.repetition_penalty = 1.1f;
  p.logprobs = 5;
  sampler s(p, 1);
  const auto base = random_logits(152064, 5, 8.0f);
  std::vector<int32_t> prompt(4000);
  std::iota(prompt.begin(), prompt.end(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    auto l = base;
    s.sample(l, prompt, no_tokens, no_eos);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms / 20, 200.0);
  std::printf("[          ] 152k vocab, top_p 0.9: %.2f ms/sample\n", ms / 20);
}

// ---------------------------------------------------------------- validation

TEST(SamplingParamsValidate, DefaultsAreValid) {
  EXPECT_EQ(validate(sampling_params{}, 1000), "");
  sampling_params p;
  p.temperature = 0.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.stop = {"x"};
  p.stop_token_ids = {0, 999};
  p.logit_bias = {{999, -100.0f}};
  p.logprobs = 20;
  EXPECT_EQ(validate(p, 1000), "");
}

TEST(SamplingParamsValidate, Messages) {
  struct bad_case {
    void (*set)(sampling_params&);
    const char* message;
  };
  const bad_case cases[] = {
      {[](sampling_params& p) { p.temperature = -1.0f; }, "temperature must be in [0, 2], got -1"},
      {[](sampling_params& p) { p.temperature = 2.5f; }, "temperature must be in [0, 2], got 2.5"},
      {[](sampling_params& p) { p.temperature = NAN; }, "temperature must be in [0, 2], got nan"},
      {[](sampling_params& p) { p.top_k = -2; }, "top_k must be -1 or 0 (disabled) or at least 1, got -2"},
      {[](sampling_params& p) { p.top_p = 0.0f; }, "top_p must be in (0, 1], got 0"},
      {[](sampling_params& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1], got 1.5"},
      {[](sampling_params& p) { p.min_p = -0.5f; }, "min_p must be in [0, 1], got -0.5"},
      {[](sampling_params& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty must be in (0, 2], got 0"},
      {[](sampling_params& p) { p.repetition_penalty = 3.0f; }, "repetition_penalty must be in (0, 2], got 3"},
      {[](sampling_params& p) { p.presence_penalty = 2.5f; }, "presence_penalty must be in [-2, 2], got 2.5"},
      {[](sampling_params& p) { p.frequency_penalty = -3.0f; }, "frequency_penalty must be in [-2, 2], got -3"},
      {[](sampling_params& p) { p.max_tokens = 0; }, "max_tokens must be at least 1, got 0"},
      {[](sampling_params& p) { p.min_tokens = -1; }, "min_tokens must be at least 0, got -1"},
      {[](sampling_params& p) { p.max_tokens = 4, p.min_tokens = 5; },
       "min_tokens must be at most max_tokens (4), got 5"},
      {[](sampling_params& p) { p.stop = {"a", ""}; }, "stop must not contain an empty string (stop[1])"},
      {[](sampling_params& p) { p.stop_token_ids = {1000}; }, "stop_token_ids entries must be in [0, 999], got 1000"},
      {[](sampling_params& p) { p.logit_bias = {{-1, 1.0f}}; }, "logit_bias token ids must be in [0, 999], got -1"},
      {[](sampling_params& p) { p.logit_bias = {{5, 101.0f}}; },
       "logit_bias values must be in [-100, 100], got 101 for token 5"},
      {[](sampling_params& p) { p.logprobs = 21; }, "logprobs must be in [0, 20], got 21"},
      {[](sampling_params& p) { p.logprobs = -1; }, "logprobs must be in [0, 20], got -1"},
  };
  for (const auto& c : cases) {
    sampling_params p;
    c.set(p);
    EXPECT_EQ(validate(p, 1000), c.message);
  }
}

// The watermark's hash is an interface: scripts/watermark_detect.py computes the same values.
TEST(SamplerWatermark, HashMatchesTheDetectorScript) {
  EXPECT_EQ(watermark_hash(0, 0), 0x95a52adb82a16485ull);
  EXPECT_EQ(watermark_hash(1, 2), 0xda42b52fa6c6c7cdull);
  EXPECT_EQ(watermark_hash(12345, 678), 0xd11a56c53b787ce9ull);
  EXPECT_EQ(watermark_hash(49151, 3), 0x78fb347e9f8c1e79ull);
  EXPECT_TRUE(watermark_green(49151, 3, 0.5));
  EXPECT_FALSE(watermark_green(49151, 3, 0.25));
  int n_half = 0, n_quarter = 0;
  for (int32_t t = 0; t < 10000; ++t) {
    n_half += watermark_green(7, t, 0.5);
    n_quarter += watermark_green(7, t, 0.25);
  }
  EXPECT_EQ(n_half, 4921);
  EXPECT_EQ(n_quarter, 2451);
}

TEST(SamplerWatermark, BiasesExactlyTheGreenTokensOfThePreviousToken) {
  sampling_params p = greedy();
  p.watermark = true;
  p.watermark_gamma = 0.5;
  p.watermark_delta = 2.0f;
  sampler s(p, 1);
  const std::vector<int32_t> prompt = {5, 9};
  const std::vector<int32_t> generated = {31};
  for (const auto& [gen, prev] : {std::pair{no_tokens, int32_t(9)}, std::pair{generated, int32_t(31)}}) {
    std::vector<float> l(512, 1.0f);
    s.sample(l, prompt, gen, no_eos);
    int n_green = 0;
    for (int32_t t = 0; t < 512; ++t) {
      const bool g = watermark_green(prev, t, 0.5);
      EXPECT_FLOAT_EQ(l[t], g ? 3.0f : 1.0f) << t;
      n_green += g;
    }
    EXPECT_GT(n_green, 200);
    EXPECT_LT(n_green, 312);
  }
  // Off: the logits are left alone.
  sampler plain(greedy(), 1);
  std::vector<float> l(64, 1.0f);
  plain.sample(l, prompt, generated, no_eos);
  for (float x : l) EXPECT_EQ(x, 1.0f);
}

TEST(SamplerWatermark, SampledTokensAreMostlyGreen) {
  sampling_params p;
  p.watermark = true;
  p.seed = 3;
  sampler s(p, 1);
  std::vector<int32_t> gen = {0};
  int n_green = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l(256, 0.0f);  // uniform: without the bias half the draws would be green
    const int32_t t = s.sample(l, no_tokens, gen, no_eos).token;
    n_green += watermark_green(gen.back(), t, 0.5);
    gen.push_back(t);
  }
  // delta 2: a green token is e^2 times as likely, so about e^2 / (1 + e^2) = 0.88 of the draws.
  EXPECT_NEAR(double(n_green) / n, 0.88, 0.03);
}

TEST(SamplerTypicalP, KeepsTheTokensClosestToTheEntropy) {
  // p = 0.5, 0.3, 0.15, 0.05: H = 1.142 nats; |-log p - H| = 0.449, 0.062, 0.755, 1.854, so the
  // order is 1, 0, 2, 3 and typical_p 0.75 keeps {1, 0} (0.8 of the mass).
  sampling_params p;
  p.typical_p = 0.75f;
  const auto f = frequencies(p, logits_of({0.5, 0.3, 0.15, 0.05}), 6000);
  EXPECT_EQ(f[2] + f[3], 0.0);
  EXPECT_NEAR(f[0], 0.5 / 0.8, 0.03);
  EXPECT_NEAR(f[1], 0.3 / 0.8, 0.03);
  // Typical-p 0.2 keeps the single most typical token, which is not the most likely one.
  p.typical_p = 0.2f;
  const auto g = frequencies(p, logits_of({0.5, 0.3, 0.15, 0.05}), 500);
  EXPECT_EQ(g[1], 1.0);
}

TEST(SamplingParamsValidate, WatermarkAndTypicalP) {
  sampling_params p;
  p.typical_p = 0.0f;
  EXPECT_EQ(validate(p, 10), "typical_p must be in (0, 1], got 0");
  p.typical_p = 1.0f;
  p.watermark = true;
  p.watermark_gamma = 1.0;
  EXPECT_EQ(validate(p, 10), "watermark_gamma must be in (0, 1), got 1");
  p.watermark_gamma = 0.25;
  p.watermark_delta = -1.0f;
  EXPECT_EQ(validate(p, 10), "watermark_delta must be in [0, 100], got -1");
  p.watermark_delta = 2.0f;
  EXPECT_EQ(validate(p, 10), "");
}

}  // namespace
}  // namespace spate
