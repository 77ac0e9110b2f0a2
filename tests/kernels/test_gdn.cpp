// Tests for kernels/gdn.h (the Gated DeltaNet kernels), parameterized over the ISA levels
// (isa_test_util.h): every level against float64 formulas written here, the same bits at every level
// (gdn.h's contract: one FMA chain per output in a fixed order), state carry-over across calls,
// split invariance (delta_rule bitwise at any split, delta_rule_chunked bitwise at chunk-aligned
// splits), and the chunked form against the recurrent one. Odd channel counts and dims exercise the
// SIMD tails. Levels the CPU lacks are skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "isa_test_util.h"
#include "kernels/gdn.h"
#include "kernels/gdn_internal.h"
#include "kernels/isa.h"
#include "ops_test_util.h"

namespace spate::kernels {
namespace {

using namespace spate::kernels::test;

class Gdn : public isa_test {
 protected:
  const gdn_table& at() const { return gdn_ops_for(level()); }
  static const gdn_table& reference() { return gdn_ops_for(isa_level::scalar); }
};
INSTANTIATE_TEST_SUITE_P(Levels, Gdn, ::testing::ValuesIn(k_all_levels), level_label);

TEST(KernelGdn, DispatchFollowsActiveIsa) {
  EXPECT_EQ(&gdn_ops(), &gdn_ops_for(active_isa()));
  EXPECT_EQ(&gdn_ops_for(isa_level::scalar), &detail::gdn_ref_table());
  if (cpu_supports(isa_level::avx2)) {
    EXPECT_EQ(&gdn_ops_for(isa_level::avx2), &detail::gdn_avx2_table());
  }
  if (cpu_supports(isa_level::avx512)) {
    EXPECT_EQ(&gdn_ops_for(isa_level::avx512), &detail::gdn_avx512_table());
  }
  EXPECT_GE(delta_rule_chunked_scratch_floats(128, 128), 2 * k_delta_rule_chunk * k_delta_rule_chunk);
}

// ------------------------------------------------------------------ short_conv

// x: n rows at stride ld_x; w: n_ch rows of `kernel` taps; state: kernel-1 rows of n_ch (updated).
std::vector<double> short_conv_double(const std::vector<float>& x, int64_t ld_x, const std::vector<float>& w,
                                      int32_t kernel, std::vector<float>& state, int32_t n, int64_t n_ch, bool silu) {
  std::vector<double> y(static_cast<size_t>(n) * n_ch);
  const int32_t ns = kernel - 1;
  auto ext = [&](int64_t r, int64_t c) -> float { return r < ns ? state[r * n_ch + c] : x[(r - ns) * ld_x + c]; };
  for (int32_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < n_ch; ++c) {
      double s = 0.0;
      for (int32_t j = 0; j < kernel; ++j) s += static_cast<double>(w[c * kernel + j]) * ext(t + j, c);
      y[t * n_ch + c] = silu ? s / (1.0 + std::exp(-s)) : s;
    }
  }
  std::vector<float> next(state.size());
  for (int32_t r = 0; r < ns; ++r)
    for (int64_t c = 0; c < n_ch; ++c) next[r * n_ch + c] = ext(n + r, c);
  state = next;
  return y;
}

struct conv_run {
  std::vector<float> y, state;
};

// Runs short_conv over tokens [0, n) in calls split at `cuts` (ascending, within (0, n)).
conv_run run_conv(const gdn_table& t, const std::vector<float>& x, int64_t ld_x, const std::vector<float>& w,
                  int32_t kernel, std::vector<float> state, int32_t n, int64_t n_ch, bool silu,
                  const std::vector<int32_t>& cuts = {}) {
  const int64_t ld_y = n_ch + 3;  // a padded output stride
  conv_run r{std::vector<float>(static_cast<size_t>(std::max(n, 1)) * ld_y, -7.0f), {}};
  int32_t t0 = 0;
  std::vector<int32_t> ends = cuts;
  ends.push_back(n);
  for (int32_t end : ends) {
    t.short_conv(x.data() + t0 * ld_x, ld_x, w.data(), kernel, state.data(), r.y.data() + t0 * ld_y, ld_y, end - t0,
                 n_ch, silu);
    t0 = end;
  }
  // Drop the padding: rows of n_ch, the padding checked untouched.
  std::vector<float> y(static_cast<size_t>(n) * n_ch);
  for (int32_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < n_ch; ++c) y[i * n_ch + c] = r.y[i * ld_y + c];
    for (int64_t c = n_ch; c < ld_y; ++c) EXPECT_EQ(r.y[i * ld_y + c], -7.0f) << "wrote past n_ch";
  }
  r.y = y;
  r.state = state;
  return r;
}

TEST_P(Gdn, ShortConvMatchesDouble) {
  std::mt19937 rng(11);
  for (int32_t kernel : {1, 2, 3, 4, 5, 8}) {
    for (int64_t n_ch : {1, 7, 8, 9, 16, 17, 33, 100}) {
      for (int32_t n : {1, 2, 3, 6, 19}) {
        for (bool silu : {false, true}) {
          const int64_t ld_x = n_ch + 5;
          const auto x = random_vec(rng, n * ld_x, -2.0f, 2.0f);
          const auto w = random_vec(rng, n_ch * kernel, -1.0f, 1.0f);
          const auto s0 = random_vec(rng, (kernel - 1) * n_ch, -2.0f, 2.0f);
          std::vector<float> s_ref = s0;
          const auto yd = short_conv_double(x, ld_x, w, kernel, s_ref, n, n_ch, silu);
          const conv_run r = run_conv(at(), x, ld_x, w, kernel, s0, n, n_ch, silu);
          EXPECT_LT(norm_err(r.y, yd), 1e-6) << "kernel=" << kernel << " n_ch=" << n_ch << " n=" << n << " silu=" << silu;
          EXPECT_TRUE(bits_equal(r.state, s_ref)) << "state: kernel=" << kernel << " n_ch=" << n_ch << " n=" << n;
        }
      }
    }
  }
}

// Without silu every level gives the reference's bits (one FMA chain per output); with silu, the
// SIMD exp differs from libm's by an ulp or so.
TEST_P(Gdn, ShortConvBitsMatchReference) {
  std::mt19937 rng(12);
  for (int64_t n_ch : {3, 8, 24, 31, 130}) {
    const int32_t kernel = 4, n = 13;
    const auto x = random_vec(rng, n * n_ch, -2.0f, 2.0f);
    const auto w = random_vec(rng, n_ch * kernel, -1.0f, 1.0f);
    const auto s0 = random_vec(rng, (kernel - 1) * n_ch, -2.0f, 2.0f);
    for (bool silu : {false, true}) {
      const conv_run a = run_conv(at(), x, n_ch, w, kernel, s0, n, n_ch, silu);
      const conv_run r = run_conv(reference(), x, n_ch, w, kernel, s0, n, n_ch, silu);
      if (silu) {
        EXPECT_LT(norm_err(a.y, r.y), 1e-6) << "n_ch=" << n_ch;
      } else {
        EXPECT_TRUE(bits_equal(a.y, r.y)) << "n_ch=" << n_ch;
      }
      EXPECT_TRUE(bits_equal(a.state, r.state)) << "n_ch=" << n_ch;
    }
  }
}

// One call, calls split anywhere (fewer tokens than the state's rows included) and token by token:
// the same bits, outputs and state.
TEST_P(Gdn, ShortConvSplitInvariant) {
  std::mt19937 rng(13);
  const int32_t kernel = 4, n = 23;
  for (int64_t n_ch : {5, 40}) {
    const auto x = random_vec(rng, n * n_ch, -2.0f, 2.0f);
    const auto w = random_vec(rng, n_ch * kernel, -1.0f, 1.0f);
    const std::vector<float> s0((kernel - 1) * n_ch, 0.0f);  // a sequence's start
    const conv_run whole = run_conv(at(), x, n_ch, w, kernel, s0, n, n_ch, true);
    std::vector<int32_t> every;
    for (int32_t c = 1; c < n; ++c) every.push_back(c);
    for (const std::vector<int32_t>& cuts : std::vector<std::vector<int32_t>>{{1}, {2}, {1, 2, 3}, {7, 8, 20}, every}) {
      const conv_run split = run_conv(at(), x, n_ch, w, kernel, s0, n, n_ch, true, cuts);
      EXPECT_TRUE(bits_equal(split.y, whole.y)) << "n_ch=" << n_ch << " cuts=" << cuts.size();
      EXPECT_TRUE(bits_equal(split.state, whole.state)) << "n_ch=" << n_ch;
    }
  }
}

// ------------------------------------------------------------------ delta rule

// Inputs of one head over n tokens, in padded, interleaved rows as a model has them (q and k of a
// token in one row of the conv output, at stride ld_qk).
struct gdn_inputs {
  int32_t dk = 0, dv = 0, n = 0;
  int64_t ld_qk = 0, ld_v = 0;
  std::vector<float> qk, v, g, beta;  // qk row t: q at [0, dk), k at [dk + 1, 2 dk + 1)
  const float* q(int32_t t) const { return qk.data() + t * ld_qk; }
  const float* k(int32_t t) const { return qk.data() + t * ld_qk + dk + 1; }
};

void l2_normalize(float* x, int32_t n) {
  double ss = 0.0;
  for (int32_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss + 1e-6));
  for (int32_t i = 0; i < n; ++i) x[i] *= inv;
}

// g in [g_lo, g_hi] (log-decays), beta in (0, 1), q and k unit vectors, v in [-1, 1].
gdn_inputs make_inputs(std::mt19937& rng, int32_t dk, int32_t dv, int32_t n, float g_lo = -1.5f, float g_hi = 0.0f) {
  gdn_inputs in;
  in.dk = dk;
  in.dv = dv;
  in.n = n;
  in.ld_qk = 2 * dk + 3;
  in.ld_v = dv + 2;
  in.qk = random_vec(rng, std::max(n, 1) * in.ld_qk, -1.0f, 1.0f);
  for (int32_t t = 0; t < n; ++t) {
    l2_normalize(in.qk.data() + t * in.ld_qk, dk);
    l2_normalize(in.qk.data() + t * in.ld_qk + dk + 1, dk);
  }
  in.v = random_vec(rng, std::max(n, 1) * in.ld_v, -1.0f, 1.0f);
  in.g = random_vec(rng, std::max(n, 1) * 2, g_lo, g_hi);  // stride 2
  in.beta = random_vec(rng, std::max(n, 1) * 3, 0.05f, 0.95f);  // stride 3
  return in;
}

// Args for tokens [t0, t0 + n) of `in`, writing out rows at stride dv + 1.
delta_rule_args args_for(const gdn_inputs& in, int32_t t0, int32_t n, float* state, float* out, int64_t pos0) {
  delta_rule_args a;
  a.q = in.q(t0);
  a.ld_q = in.ld_qk;
  a.k = in.k(t0);
  a.ld_k = in.ld_qk;
  a.v = in.v.data() + t0 * in.ld_v;
  a.ld_v = in.ld_v;
  a.g = in.g.data() + t0 * 2;
  a.ld_g = 2;
  a.beta = in.beta.data() + t0 * 3;
  a.ld_beta = 3;
  a.out = out + t0 * (in.dv + 1);
  a.ld_out = in.dv + 1;
  a.state = state;
  a.n_tokens = n;
  a.dk = in.dk;
  a.dv = in.dv;
  a.scale = 1.0f / std::sqrt(static_cast<float>(in.dk));
  a.pos0 = pos0 + t0;
  return a;
}

struct gdn_run {
  std::vector<float> out, state;  // out: n rows of dv (padding dropped)
};

enum class form { recurrent, chunked };

// Runs one form over all of `in` from state s0 (layout of gdn.h), in calls split at `cuts`; the
// sequence's token 0 is at absolute position pos0.
gdn_run run_gdn(const gdn_table& t, form f, const gdn_inputs& in, std::vector<float> s0, int64_t pos0,
                const std::vector<int32_t>& cuts = {}) {
  const int64_t ld_out = in.dv + 1;
  std::vector<float> out(static_cast<size_t>(std::max(in.n, 1)) * ld_out, -7.0f);
  std::vector<float> scratch(static_cast<size_t>(delta_rule_chunked_scratch_floats(in.dk, in.dv)));
  std::vector<int32_t> ends = cuts;
  ends.push_back(in.n);
  int32_t t0 = 0;
  for (int32_t end : ends) {
    const delta_rule_args a = args_for(in, t0, end - t0, s0.data(), out.data(), pos0);
    if (f == form::recurrent) {
      t.delta_rule(a);
    } else {
      t.delta_rule_chunked(a, scratch.data());
    }
    t0 = end;
  }
  gdn_run r{std::vector<float>(static_cast<size_t>(in.n) * in.dv), s0};
  for (int32_t i = 0; i < in.n; ++i) {
    for (int32_t j = 0; j < in.dv; ++j) r.out[i * in.dv + j] = out[i * ld_out + j];
    EXPECT_EQ(out[i * ld_out + in.dv], -7.0f) << "wrote past dv";
  }
  return r;
}

// The recurrence of gdn.h in float64 on the math (not the kernels' order): S (dv x dk) from s0.
struct gdn_double {
  std::vector<double> out, state;  // state in the kernels' layout (st[i * dv + j] = S[j][i])
};
gdn_double delta_rule_double(const gdn_inputs& in, const std::vector<float>& s0) {
  const int32_t dk = in.dk, dv = in.dv;
  std::vector<double> s(s0.begin(), s0.end());  // s[i * dv + j] = S[j][i]
  gdn_double r;
  r.out.resize(static_cast<size_t>(in.n) * dv);
  const double scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int32_t t = 0; t < in.n; ++t) {
    const double decay = std::exp(static_cast<double>(in.g[t * 2])), beta = in.beta[t * 3];
    for (double& x : s) x *= decay;
    for (int32_t j = 0; j < dv; ++j) {
      double sk = 0.0;
      for (int32_t i = 0; i < dk; ++i) sk += s[i * dv + j] * in.k(t)[i];
      const double delta = (in.v[t * in.ld_v + j] - sk) * beta;
      double o = 0.0;
      for (int32_t i = 0; i < dk; ++i) {
        s[i * dv + j] += in.k(t)[i] * delta;
        o += s[i * dv + j] * in.q(t)[i];
      }
      r.out[t * dv + j] = o * scale;
    }
  }
  r.state = s;
  return r;
}

struct shape {
  int32_t dk, dv;
};
const shape k_shapes[] = {{1, 1}, {4, 3}, {8, 8}, {16, 16}, {17, 9}, {24, 40}, {37, 70}, {64, 64}, {128, 128}};

std::vector<float> random_state(std::mt19937& rng, const shape& sh) { return random_vec(rng, sh.dk * sh.dv, -0.5f, 0.5f); }

TEST_P(Gdn, DeltaRuleMatchesDouble) {
  std::mt19937 rng(21);
  for (const shape& sh : k_shapes) {
    for (int32_t n : {1, 5, 70}) {
      const gdn_inputs in = make_inputs(rng, sh.dk, sh.dv, n);
      const std::vector<float> s0 = random_state(rng, sh);
      const gdn_double want = delta_rule_double(in, s0);
      for (form f : {form::recurrent, form::chunked}) {
        const gdn_run got = run_gdn(at(), f, in, s0, 0);
        EXPECT_LT(norm_err(got.out, want.out), 2e-6) << "dk=" << sh.dk << " dv=" << sh.dv << " n=" << n << " chunked=" << (f == form::chunked);
        EXPECT_LT(norm_err(got.state, want.state), 2e-6) << "dk=" << sh.dk << " dv=" << sh.dv << " n=" << n;
      }
    }
  }
}

// Decays near 1 (g ~ 0, the state carries over many tokens) and strong ones (g down to -60: exp(g)
// and the chunk's cumulative decays underflow to 0, which must not give NaN or inf).
TEST_P(Gdn, DeltaRuleExtremeDecays) {
  std::mt19937 rng(22);
  for (const auto& [g_lo, g_hi] : {std::pair{-1e-3f, 0.0f}, std::pair{-60.0f, -20.0f}, std::pair{-60.0f, 0.0f}}) {
    const shape sh{32, 24};
    const gdn_inputs in = make_inputs(rng, sh.dk, sh.dv, 150, g_lo, g_hi);
    const std::vector<float> s0 = random_state(rng, sh);
    const gdn_double want = delta_rule_double(in, s0);
    for (form f : {form::recurrent, form::chunked}) {
      const gdn_run got = run_gdn(at(), f, in, s0, 0);
      EXPECT_LT(norm_err(got.out, want.out), 1e-5) << "g in [" << g_lo << ", " << g_hi << "] chunked=" << (f == form::chunked);
      EXPECT_LT(norm_err(got.state, want.state), 1e-5) << "g in [" << g_lo << ", " << g_hi << "]";
    }
  }
}

// gdn.h: both forms give the same bits at every level.
TEST_P(Gdn, DeltaRuleBitsMatchReference) {
  std::mt19937 rng(23);
  for (const shape& sh : k_shapes) {
    const gdn_inputs in = make_inputs(rng, sh.dk, sh.dv, 77);
    const std::vector<float> s0 = random_state(rng, sh);
    for (form f : {form::recurrent, form::chunked}) {
      const gdn_run got = run_gdn(at(), f, in, s0, 3);
      const gdn_run ref = run_gdn(reference(), f, in, s0, 3);
      EXPECT_TRUE(bits_equal(got.out, ref.out)) << "dk=" << sh.dk << " dv=" << sh.dv << " chunked=" << (f == form::chunked);
      EXPECT_TRUE(bits_equal(got.state, ref.state)) << "dk=" << sh.dk << " dv=" << sh.dv << " chunked=" << (f == form::chunked);
    }
  }
}

// delta_rule: one call, any split (a prefill chunked anywhere, then decode token by token): the same bits.
TEST_P(Gdn, DeltaRuleSplitAnywhereBitwise) {
  std::mt19937 rng(24);
  for (const shape& sh : {shape{16, 16}, shape{37, 70}, shape{128, 128}}) {
    const int32_t n = 150;
    const gdn_inputs in = make_inputs(rng, sh.dk, sh.dv, n);
    const std::vector<float> s0(static_cast<size_t>(sh.dk) * sh.dv, 0.0f);
    const gdn_run whole = run_gdn(at(), form::recurrent, in, s0, 0);
    std::vector<int32_t> decode;  // prefill 100 tokens in calls of 33, then one token per call
    for (int32_t c : {33, 66, 99, 100}) decode.push_back(c);
    for (int32_t c = 101; c < n; ++c) decode.push_back(c);
    for (const std::vector<int32_t>& cuts : std::vector<std::vector<int32_t>>{{1}, {64}, {17, 64, 65, 149}, decode}) {
      const gdn_run split = run_gdn(at(), form::recurrent, in, s0, 0, cuts);
      EXPECT_TRUE(bits_equal(split.out, whole.out)) << "dk=" << sh.dk << " cuts=" << cuts.size();
      EXPECT_TRUE(bits_equal(split.state, whole.state)) << "dk=" << sh.dk << " cuts=" << cuts.size();
    }
  }
}

// State carry-over: the state after tokens [0, a) continues exactly where a whole run would be, also
// between the forms (a chunked prefill, then recurrent decode, against the double recurrence).
TEST_P(Gdn, ChunkedPrefillThenRecurrentDecode) {
  std::mt19937 rng(25);
  const shape sh{64, 48};
  const int32_t n = 140, n_prefill = 100;
  const gdn_inputs in = make_inputs(rng, sh.dk, sh.dv, n);
  const std::vector<float> s0(static_cast<size_t>(sh.dk) * sh.dv, 0.0f);
  const gdn_double want = delta_rule_double(in, s0);
  std::vector<float> state = s0, out(static_cast<size_t>(n) * (sh.dv + 1));
  std::vector<float> scratch(static_cast<size_t>(delta_rule_chunked_scratch_floats(sh.dk, sh.dv)));
  at().delta_rule_chunked(args_for(in, 0, n_prefill, state.data(), out.data(), 0), scratch.data());
  for (int32_t t = n_prefill; t < n; ++t) at().delta_rule(args_for(in, t, 1, state.data(), out.data(), 0));
  std::vector<float> got(static_cast<size_t>(n) * sh.dv);
  for (int32_t t = 0; t < n; ++t)
    for (int32_t j = 0; j < sh.dv; ++j) got[t * sh.dv + j] = out[t * (sh.dv + 1) + j];
  EXPECT_LT(norm_err(got, want.out), 2e-6);
  EXPECT_LT(norm_err(state, want.state), 2e-6);
}

// delta_rule_chunked == delta_rule within float rounding, over chunk-partial calls (pos0 not aligned,
// n around the chunk size).
TEST_P(Gdn, ChunkedMatchesRecurrent) {
  std::mt19937 rng(26);
  for (const shape& sh : {shape{8, 8}, shape{37, 70}, shape{128, 128}}) {
    for (int32_t n : {1, 63, 64, 65, 200}) {
      for (int64_t pos0 : {0, 5, 63, 1000}) {
        const gdn_inputs in = make_inputs(rng, sh.dk, sh.dv, n);
        const std::vector<float> s0 = random_state(rng, sh);
        const gdn_run rec = run_gdn(at(), form::recurrent, in, s0, pos0);
        const gdn_run chk = run_gdn(at(), form::chunked, in, s0, pos0);
        EXPECT_LT(norm_err(chk.out, rec.out), 2e-6) << "dk=" << sh.dk << " n=" << n << " pos0=" << pos0;
        EXPECT_LT(norm_err(chk.state, rec.state), 2e-6) << "dk=" << sh.dk << " n=" << n << " pos0=" << pos0;
      }
    }
  }
}

// delta_rule_chunked: calls split at absolute multiples of the chunk size give one call's bits;
// the first call may start mid-chunk (pos0 % chunk != 0).
TEST_P(Gdn, ChunkedSplitAtChunkBoundariesBitwise) {
  std::mt19937 rng(27);
  const int32_t c = k_delta_rule_chunk;
  for (const shape& sh : {shape{16, 16}, shape{37, 70}, shape{128, 128}}) {
    for (int64_t pos0 : {int64_t{0}, int64_t{10}, int64_t{3 * c - 1}}) {
      const int32_t n = 3 * c + 17;
      const gdn_inputs in = make_inputs(rng, sh.dk, sh.dv, n);
      const std::vector<float> s0 = random_state(rng, sh);
      const gdn_run whole = run_gdn(at(), form::chunked, in, s0, pos0);
      const int32_t first = static_cast<int32_t>((c - pos0 % c) % c);  // token index of the first aligned position
      std::vector<std::vector<int32_t>> splits = {{first + c}, {first + c, first + 2 * c}};
      if (first > 0) splits.push_back({first, first + c, first + 2 * c});
      for (const std::vector<int32_t>& cuts : splits) {
        const gdn_run split = run_gdn(at(), form::chunked, in, s0, pos0, cuts);
        EXPECT_TRUE(bits_equal(split.out, whole.out)) << "dk=" << sh.dk << " pos0=" << pos0 << " cuts=" << cuts.size();
        EXPECT_TRUE(bits_equal(split.state, whole.state)) << "dk=" << sh.dk << " pos0=" << pos0;
      }
      // A split inside a chunk is the same math, rounded otherwise.
      const gdn_run odd = run_gdn(at(), form::chunked, in, s0, pos0, {first + 7});
      EXPECT_LT(norm_err(odd.out, whole.out), 2e-6);
      EXPECT_LT(norm_err(odd.state, whole.state), 2e-6);
    }
  }
}

// n_tokens == 0 reads and writes nothing.
TEST_P(Gdn, EmptyCallsLeaveStateAlone) {
  std::mt19937 rng(28);
  const shape sh{16, 24};
  const std::vector<float> s0 = random_state(rng, sh);
  std::vector<float> state = s0, scratch(static_cast<size_t>(delta_rule_chunked_scratch_floats(sh.dk, sh.dv)));
  delta_rule_args a;
  a.state = state.data();
  a.dk = sh.dk;
  a.dv = sh.dv;
  at().delta_rule(a);
  at().delta_rule_chunked(a, scratch.data());
  EXPECT_TRUE(bits_equal(state, s0));
  std::vector<float> conv_state = random_vec(rng, 3 * 9), before = conv_state;
  at().short_conv(nullptr, 9, nullptr, 4, conv_state.data(), nullptr, 9, 0, 9, true);
  EXPECT_TRUE(bits_equal(conv_state, before));
}

}  // namespace
}  // namespace spate::kernels
