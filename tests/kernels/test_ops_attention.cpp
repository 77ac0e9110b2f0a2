// Tests of the paged KV cache store and of attention (kernels/ops.h), over the
// ISA levels (the suites of ops_test_util.h): every level against naive
// double-precision attention, the SIMD levels against the reference, sliding
// windows, attention sinks, and batch invariance (physical layout, head tiles).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "isa_test_util.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/ops.h"
#include "kernels/ops_internal.h"
#include "ops_test_util.h"

namespace spate::kernels {
namespace {

using namespace spate::kernels::test;

const kv_dtype k_all_dtypes[] = {kv_dtype::f16, kv_dtype::f32, kv_dtype::q8_0, kv_dtype::fp8_e5m2};

// A paged cache for one layer with a random (non-contiguous, permuted) block table.
struct paged_cache {
  paged_kv_view view;
  std::vector<float> kf, vf;
  std::vector<uint16_t> kh, vh;
  std::vector<uint8_t> kb, vb;  // q8_0, fp8_e5m2
  std::vector<int32_t> table;

  paged_cache(kv_dtype dt, int32_t block_size, int32_t n_kv_heads, int32_t head_dim, int32_t n_ctx, uint32_t seed) {
    const int32_t n_used = (n_ctx + block_size - 1) / block_size;
    const int32_t n_blocks = 2 * n_used + 3;
    const size_t elems = static_cast<size_t>(n_blocks) * n_kv_heads * block_size * head_dim;
    std::mt19937 rng(seed);
    view.dtype = dt;
    view.block_size = block_size;
    view.n_kv_heads = n_kv_heads;
    view.head_dim = head_dim;
    if (dt == kv_dtype::q8_0 || dt == kv_dtype::fp8_e5m2) {
      // 0x7e: an fp8 NaN; pairs of it are the f16 NaN 0x7e7e as q8_0 scales.
      const size_t bytes = static_cast<size_t>(n_blocks) * n_kv_heads * kv_head_block_bytes(dt, block_size, head_dim);
      kb.assign(bytes, 0x7e);
      vb.assign(bytes, 0x7e);
      view.k = kb.data();
      view.v = vb.data();
    } else if (dt == kv_dtype::f32) {
      // Poison unused slots so a read outside [0, n_ctx) shows up.
      kf.assign(elems, std::numeric_limits<float>::quiet_NaN());
      vf.assign(elems, std::numeric_limits<float>::quiet_NaN());
      view.k = kf.data();
      view.v = vf.data();
    } else {
      kh.assign(elems, 0x7e00u);
      vh.assign(elems, 0x7e00u);
      view.k = kh.data();
      view.v = vh.data();
    }
    std::vector<int32_t> perm(n_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    table.assign(perm.begin(), perm.begin() + n_used);
  }

  // Fills positions [0, n_ctx) of every kv head with random K/V through kv_store.
  void fill(const ops_table& t, int32_t n_ctx, uint32_t seed, float k_range = 1.0f, int32_t from = 0) {
    std::mt19937 rng(seed);
    for (int32_t p = from; p < n_ctx; ++p)
      for (int32_t h = 0; h < view.n_kv_heads; ++h) {
        const auto k = random_vec(rng, view.head_dim, -k_range, k_range);
        const auto v = random_vec(rng, view.head_dim);
        t.kv_store(view, table[p / view.block_size], p % view.block_size, h, k.data(), v.data());
      }
  }

  // The value stored for (position p, kv head h, dim d), dequantized.
  float elem(bool is_k, int32_t p, int32_t h, int32_t d) const {
    const int32_t block = table[p / view.block_size], slot = p % view.block_size;
    if (view.dtype == kv_dtype::q8_0) {
      const uint8_t* base = (is_k ? kb : vb).data() + detail::kv_head_base_bytes(view, block, h);
      const int32_t g = d / k_kv_q8_group;
      const int64_t q_at = is_k ? static_cast<int64_t>(d) * view.block_size + slot : static_cast<int64_t>(slot) * view.head_dim + d;
      const int64_t s_at = is_k ? detail::kv_q8_k_scale_offset(view, slot, g) : detail::kv_q8_v_scale_offset(view, slot, g);
      uint16_t sc;
      std::memcpy(&sc, base + s_at, 2);
      return static_cast<float>(static_cast<int8_t>(base[q_at])) * fp16_to_f32(sc);
    }
    const int64_t at = is_k ? detail::kv_k_index(view, block, h, slot, d) : detail::kv_v_row_index(view, block, h, slot) + d;
    if (view.dtype == kv_dtype::f32) return (is_k ? kf : vf)[at];
    if (view.dtype == kv_dtype::fp8_e5m2) return detail::e5m2_to_f32((is_k ? kb : vb)[at]);
    return fp16_to_f32((is_k ? kh : vh)[at]);
  }
};

TEST_P(OpsSimd, KvStoreMatchesRefBitwise) {
  for (kv_dtype dt : k_all_dtypes) {
    for (int32_t hd : {1, 7, 8, 13, 32, 64, 128}) {
      if (!kv_dtype_supports_head_dim(dt, hd)) continue;
      paged_cache a(dt, 16, 3, hd, 37, 11), b(dt, 16, 3, hd, 37, 11);
      a.fill(ref(), 37, 12, 70000.0f);  // includes values that overflow to inf in f16
      b.fill(simd(), 37, 12, 70000.0f);
      if (dt == kv_dtype::f32) {
        EXPECT_EQ(0, std::memcmp(a.kf.data(), b.kf.data(), a.kf.size() * 4));
        EXPECT_EQ(0, std::memcmp(a.vf.data(), b.vf.data(), a.vf.size() * 4));
      } else if (dt == kv_dtype::q8_0 || dt == kv_dtype::fp8_e5m2) {
        EXPECT_EQ(a.kb, b.kb) << "hd=" << hd;
        EXPECT_EQ(a.vb, b.vb) << "hd=" << hd;
      } else {
        EXPECT_EQ(a.kh, b.kh) << "hd=" << hd;
        EXPECT_EQ(a.vh, b.vh) << "hd=" << hd;
      }
    }
  }
}

struct attn_case {
  int32_t n_group, head_dim, n_ctx, block_size;
};

std::vector<attn_case> attn_cases() {
  std::vector<attn_case> cs;
  for (int32_t n_ctx = 1; n_ctx <= 67; n_ctx += 3) cs.push_back({3, 64, n_ctx, 16});
  for (int32_t n_ctx : {1, 15, 16, 17, 100, 512, 1000}) {
    cs.push_back({1, 64, n_ctx, 16});
    cs.push_back({3, 64, n_ctx, 16});
    cs.push_back({4, 128, n_ctx, 16});
    cs.push_back({5, 80, n_ctx, 7});    // odd head count, odd block size, 80 = 2*32 + 16
    cs.push_back({8, 12, n_ctx, 32});   // head_dim % 8 != 0
    cs.push_back({2, 3, n_ctx, 1});     // tiny head, one slot per block
    cs.push_back({5, 96, n_ctx, 7});    // q8_0: 3 groups, odd block size and heads
    cs.push_back({2, 32, n_ctx, 1});    // q8_0: one group, one slot per block
  }
  return cs;
}

// Scores of head g in double, -inf outside [first, n_ctx).
std::vector<double> scores_double(const paged_cache& c, const std::vector<float>& q, int32_t g, int32_t kv_head,
                                  int32_t n_ctx, double scale, int32_t first) {
  const int32_t hd = c.view.head_dim;
  std::vector<double> s(n_ctx, -std::numeric_limits<double>::infinity());
  for (int32_t p = first; p < n_ctx; ++p) {
    double dot = 0.0;
    for (int32_t d = 0; d < hd; ++d) dot += static_cast<double>(q[g * hd + d]) * c.elem(true, p, kv_head, d);
    s[p] = dot * scale;
  }
  return s;
}

// Naive dense attention in double on the values actually stored in the cache;
// head g's sink, if sinks is not null, joins the max and the denominator only.
std::vector<double> attention_double(const paged_cache& c, const std::vector<float>& q, int32_t n_group, int32_t kv_head,
                                     int32_t n_ctx, double scale, int32_t first = 0, const float* sinks = nullptr) {
  const int32_t hd = c.view.head_dim;
  std::vector<double> out(static_cast<size_t>(n_group) * hd, 0.0);
  for (int32_t g = 0; g < n_group; ++g) {
    std::vector<double> s = scores_double(c, q, g, kv_head, n_ctx, scale, first);
    double mx = *std::max_element(s.begin(), s.end());
    if (sinks) mx = std::max(mx, static_cast<double>(sinks[g]));
    double sum = sinks ? std::exp(sinks[g] - mx) : 0.0;
    for (auto& v : s) sum += (v = std::exp(v - mx));
    for (int32_t p = first; p < n_ctx; ++p)
      for (int32_t d = 0; d < hd; ++d) out[g * hd + d] += s[p] / sum * c.elem(false, p, kv_head, d);
  }
  return out;
}

// out of one attention call of table t (fresh scratch).
std::vector<float> run_attention(const ops_table& t, const paged_cache& c, const std::vector<float>& q,
                                 const attn_case& ac, int32_t kv_head, float scale, int32_t first = 0,
                                 const float* sinks = nullptr) {
  std::vector<float> scratch(attention_scratch_floats(ac.n_group, ac.n_ctx));
  std::vector<float> out(static_cast<size_t>(ac.n_group) * ac.head_dim);
  t.attention(q.data(), ac.n_group, c.view, kv_head, c.table.data(), first, ac.n_ctx, scale, sinks, out.data(),
              scratch.data());
  return out;
}

// Every level against naive double attention; the SIMD levels also against the
// reference, and avx512 also against avx2.
TEST_P(OpsLevel, AttentionMatchesDoubleAndRef) {
  const int32_t n_kv_heads = 3;
  uint32_t seed = 100;
  for (kv_dtype dt : k_all_dtypes) {
    for (const attn_case& ac : attn_cases()) {
      if (!kv_dtype_supports_head_dim(dt, ac.head_dim)) continue;
      ++seed;
      paged_cache c(dt, ac.block_size, n_kv_heads, ac.head_dim, ac.n_ctx, seed);
      // Large-ish K so the softmax is peaked for some heads and flat for others.
      c.fill(ref(), ac.n_ctx, seed + 1000, 2.0f);
      std::mt19937 rng(seed);
      const auto q = random_vec(rng, static_cast<int64_t>(ac.n_group) * ac.head_dim, -2.0f, 2.0f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(ac.head_dim));
      const int32_t kv_head = static_cast<int32_t>(seed % n_kv_heads);
      const auto want = attention_double(c, q, ac.n_group, kv_head, ac.n_ctx, scale);
      const std::string what = "dtype=" + std::to_string(int(dt)) + " g=" + std::to_string(ac.n_group) +
                               " hd=" + std::to_string(ac.head_dim) + " n_ctx=" + std::to_string(ac.n_ctx) +
                               " bs=" + std::to_string(ac.block_size);
      const auto out = run_attention(ops_at(), c, q, ac, kv_head, scale);
      EXPECT_LT(norm_err(out, want), 2e-6) << what;
      if (level() == isa_level::scalar) continue;
      EXPECT_LT(norm_err(out, run_attention(ref(), c, q, ac, kv_head, scale)), 3e-6) << what;
      if (level() != isa_level::avx512) continue;
      EXPECT_LT(norm_err(out, run_attention(ops_for(isa_level::avx2), c, q, ac, kv_head, scale)), 3e-6) << what;
    }
  }
}

// A sliding window [first, n_ctx): the blocks wholly before it stay
// NaN-poisoned (never written), so any read of them would show; the window's
// first block is written whole, as the engine's cache is.
TEST_P(OpsLevel, AttentionWindowReadsOnlyItsBlocks) {
  uint32_t seed = 700;
  for (kv_dtype dt : k_all_dtypes) {
    for (const attn_case& ac : {attn_case{3, 64, 100, 16}, attn_case{1, 80, 530, 16}, attn_case{4, 12, 67, 7},
                                attn_case{2, 3, 40, 1}, attn_case{4, 96, 67, 7}, attn_case{2, 32, 40, 1}}) {
      if (!kv_dtype_supports_head_dim(dt, ac.head_dim)) continue;
      for (int32_t window : {1, 5, 16, 17, 33, 512}) {
        if (window > ac.n_ctx) continue;
        ++seed;
        const int32_t first = ac.n_ctx - window;
        paged_cache c(dt, ac.block_size, 2, ac.head_dim, ac.n_ctx, seed);
        c.fill(ref(), ac.n_ctx, seed + 1, 2.0f, first / ac.block_size * ac.block_size);
        std::mt19937 rng(seed);
        const auto q = random_vec(rng, static_cast<int64_t>(ac.n_group) * ac.head_dim, -2.0f, 2.0f);
        const float scale = 1.0f / std::sqrt(static_cast<float>(ac.head_dim));
        const auto want = attention_double(c, q, ac.n_group, 1, ac.n_ctx, scale, first);
        std::vector<float> scratch(attention_scratch_floats(ac.n_group, ac.n_ctx));
        std::vector<float> out(static_cast<size_t>(ac.n_group) * ac.head_dim);
        // The runner's prefetch of the same window reads only the window's table
        // entries (ASan builds check the table bounds) and changes nothing.
        prefetch_kv(c.view, 1, c.table.data(), first, ac.n_ctx);
        ops_at().attention(q.data(), ac.n_group, c.view, 1, c.table.data(), first, ac.n_ctx, scale, nullptr, out.data(),
                           scratch.data());
        EXPECT_LT(norm_err(out, want), 2e-6) << "dtype=" << int(dt) << " hd=" << ac.head_dim << " n_ctx=" << ac.n_ctx
                                             << " window=" << window;
      }
    }
  }
}

TEST_P(OpsLevel, AttentionEmptyContextWritesZeros) {
  for (kv_dtype dt : k_all_dtypes) {
    paged_cache c(dt, 16, 1, 64, 1, 1);
    std::vector<float> q(2 * 64, 1.0f), out(2 * 64, 5.0f), scratch(attention_scratch_floats(2, 0));
    ops_at().attention(q.data(), 2, c.view, 0, c.table.data(), 0, 0, 0.125f, nullptr, out.data(), scratch.data());
    for (float v : out) ASSERT_EQ(v, 0.0f);
    const float sinks[2] = {0.5f, -1.0f};  // no value rows: zeros with sinks too
    std::fill(out.begin(), out.end(), 5.0f);
    ops_at().attention(q.data(), 2, c.view, 0, c.table.data(), 0, 0, 0.125f, sinks, out.data(), scratch.data());
    for (float v : out) ASSERT_EQ(v, 0.0f);
  }
}

// Attention depends only on the logical K/V contents: a different physical
// block placement, other block sizes (multiples of the 16- and 8-lane score
// chunks, and sizes whose leftover slots go one by one), q at another
// address, and dirty scratch all give identical bits; with or without sinks.
void expect_layout_independent(const ops_table& t, kv_dtype dt, bool with_sinks) {
  const int32_t n_group = 3, hd = 64, n_ctx = 77, n_wide = 7;
  paged_cache a(dt, 16, 2, hd, n_ctx, 1), b(dt, 16, 2, hd, n_ctx, 2), c(dt, 8, 2, hd, n_ctx, 3);
  a.fill(t, n_ctx, 42);
  b.fill(t, n_ctx, 42);
  c.fill(t, n_ctx, 42);
  ASSERT_NE(a.table, b.table);
  std::mt19937 rng(5);
  const auto q = random_vec(rng, n_group * hd);
  const auto sinks = random_vec(rng, n_wide, -1.0f, 3.0f);
  auto sk = [&](int32_t h) { return with_sinks ? sinks.data() + h : nullptr; };  // head h's sinks
  std::vector<float> qshift(q.size() + 3);
  std::copy(q.begin(), q.end(), qshift.begin() + 3);
  std::vector<float> s1(attention_scratch_floats(n_group, n_ctx), 0.0f), s2(s1.size(), 1e30f);
  std::vector<float> oa(n_group * hd), ob(oa.size()), oc(oa.size());
  t.attention(q.data(), n_group, a.view, 1, a.table.data(), 0, n_ctx, 0.125f, sk(0), oa.data(), s1.data());
  t.attention(qshift.data() + 3, n_group, b.view, 1, b.table.data(), 0, n_ctx, 0.125f, sk(0), ob.data(), s2.data());
  t.attention(q.data(), n_group, c.view, 1, c.table.data(), 0, n_ctx, 0.125f, sk(0), oc.data(), s2.data());
  EXPECT_TRUE(bits_equal(oa, ob));
  EXPECT_TRUE(bits_equal(oa, oc));
  for (int32_t bs : {1, 7, 13, 24, 33, 40, 64, 100}) {
    paged_cache d(dt, bs, 2, hd, n_ctx, 10 + bs);
    d.fill(t, n_ctx, 42);
    std::vector<float> od(oa.size());
    t.attention(q.data(), n_group, d.view, 1, d.table.data(), 0, n_ctx, 0.125f, sk(0), od.data(), s2.data());
    EXPECT_TRUE(bits_equal(oa, od)) << "block_size=" << bs;
  }
  // Each head's result does not depend on which other heads share the call
  // (head tiles of 4, 3, 2 and 1 at the different levels).
  std::vector<float> o1(hd);
  t.attention(q.data() + hd, 1, a.view, 1, a.table.data(), 0, n_ctx, 0.125f, sk(1), o1.data(), s1.data());
  EXPECT_TRUE(bits_equal(o1, std::vector<float>(oa.begin() + hd, oa.begin() + 2 * hd)));
  const auto q7 = random_vec(rng, n_wide * hd);  // 4 + 3 heads at the avx512 level, 3 + 3 + 1 at avx2
  std::vector<float> o7(n_wide * hd), s7(attention_scratch_floats(n_wide, n_ctx));
  t.attention(q7.data(), n_wide, a.view, 1, a.table.data(), 0, n_ctx, 0.125f, sk(0), o7.data(), s7.data());
  for (int32_t h = 0; h < n_wide; ++h) {
    t.attention(q7.data() + h * hd, 1, a.view, 1, a.table.data(), 0, n_ctx, 0.125f, sk(h), o1.data(), s1.data());
    EXPECT_TRUE(bits_equal(o1, std::vector<float>(o7.begin() + h * hd, o7.begin() + (h + 1) * hd))) << "head " << h;
  }
}

TEST_P(OpsLevel, AttentionIndependentOfPhysicalLayout) {
  for (kv_dtype dt : k_all_dtypes) {
    for (bool with_sinks : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "dtype=" << int(dt) << " sinks=" << with_sinks);
      expect_layout_independent(ops_at(), dt, with_sinks);
    }
  }
}

// ------------------------------------------------------------------ attention sinks

// Sinks of every kind, per head g of a group: ordinary (near the scores),
// larger than every score of the head, and very negative (weight ~0).
std::vector<float> mixed_sinks(const paged_cache& c, const std::vector<float>& q, int32_t n_group, int32_t kv_head,
                               int32_t n_ctx, double scale, int32_t first, std::mt19937& rng) {
  std::vector<float> sinks(static_cast<size_t>(n_group));
  std::uniform_real_distribution<float> near(-2.0f, 2.0f);
  for (int32_t g = 0; g < n_group; ++g) {
    const auto s = scores_double(c, q, g, kv_head, n_ctx, scale, first);
    const double mx = *std::max_element(s.begin(), s.end());
    switch (g % 3) {
      case 0: sinks[g] = static_cast<float>(mx) + near(rng); break;
      case 1: sinks[g] = static_cast<float>(mx) + 4.0f; break;  // larger than every score
      default: sinks[g] = -60.0f; break;                         // ~ no sink
    }
  }
  return sinks;
}

// Every level with sinks against naive double attention with the same sinks
// (unscaled), full context and sliding windows, odd head dims and context
// lengths, groups of 1 to 8 heads; the SIMD levels also against the
// reference, avx512 also against avx2 (same tolerances as without sinks).
TEST_P(OpsLevel, AttentionSinksMatchDoubleAndRef) {
  uint32_t seed = 900;
  for (kv_dtype dt : k_all_dtypes) {
    for (const attn_case& ac : {attn_case{1, 64, 37, 16}, attn_case{8, 64, 300, 16}, attn_case{3, 80, 67, 7},
                                attn_case{5, 13, 19, 16}, attn_case{8, 3, 1, 1}, attn_case{2, 128, 130, 32},
                                attn_case{3, 96, 67, 7}, attn_case{5, 32, 19, 13}}) {
      if (!kv_dtype_supports_head_dim(dt, ac.head_dim)) continue;
      for (int32_t first : {0, ac.n_ctx / 2, ac.n_ctx - 1}) {
        ++seed;
        paged_cache c(dt, ac.block_size, 2, ac.head_dim, ac.n_ctx, seed);
        c.fill(ref(), ac.n_ctx, seed + 1, 2.0f);
        std::mt19937 rng(seed);
        const auto q = random_vec(rng, static_cast<int64_t>(ac.n_group) * ac.head_dim, -2.0f, 2.0f);
        const float scale = 1.0f / std::sqrt(static_cast<float>(ac.head_dim));
        const auto sinks = mixed_sinks(c, q, ac.n_group, 1, ac.n_ctx, scale, first, rng);
        const auto want = attention_double(c, q, ac.n_group, 1, ac.n_ctx, scale, first, sinks.data());
        const auto out = run_attention(ops_at(), c, q, ac, 1, scale, first, sinks.data());
        const std::string what = "dtype=" + std::to_string(int(dt)) + " g=" + std::to_string(ac.n_group) +
                                 " hd=" + std::to_string(ac.head_dim) + " n_ctx=" + std::to_string(ac.n_ctx) +
                                 " first=" + std::to_string(first);
        EXPECT_LT(norm_err(out, want), 2e-6) << what;
        // The sinks change the result (the double reference without them is far).
        EXPECT_GT(norm_err(out, attention_double(c, q, ac.n_group, 1, ac.n_ctx, scale, first)), 1e-3) << what;
        if (level() == isa_level::scalar) continue;
        EXPECT_LT(norm_err(out, run_attention(ref(), c, q, ac, 1, scale, first, sinks.data())), 3e-6) << what;
        if (level() != isa_level::avx512) continue;
        EXPECT_LT(norm_err(out, run_attention(ops_for(isa_level::avx2), c, q, ac, 1, scale, first, sinks.data())), 3e-6)
            << what;
      }
    }
  }
}

// nullptr, sinks of -inf and sinks so negative that their weight rounds to 0
// all give the bits of attention without sinks; a sink far above every score
// takes all the weight, so the output is 0 (no NaN).
TEST_P(OpsLevel, AttentionSinkLimits) {
  uint32_t seed = 950;
  for (kv_dtype dt : k_all_dtypes) {
    for (const attn_case& ac : {attn_case{3, 64, 45, 16}, attn_case{8, 80, 17, 7}, attn_case{1, 12, 100, 32},
                                attn_case{8, 96, 17, 7}}) {
      if (!kv_dtype_supports_head_dim(dt, ac.head_dim)) continue;
      for (int32_t first : {0, std::min(20, ac.n_ctx - 1)}) {
        ++seed;
        paged_cache c(dt, ac.block_size, 2, ac.head_dim, ac.n_ctx, seed);
        c.fill(ref(), ac.n_ctx, seed + 1, 2.0f);
        std::mt19937 rng(seed);
        const auto q = random_vec(rng, static_cast<int64_t>(ac.n_group) * ac.head_dim, -2.0f, 2.0f);
        const auto none = run_attention(ops_at(), c, q, ac, 1, 0.3f, first, nullptr);
        for (float s : {-std::numeric_limits<float>::infinity(), -1e4f, -300.0f}) {
          const std::vector<float> sinks(static_cast<size_t>(ac.n_group), s);
          EXPECT_TRUE(bits_equal(none, run_attention(ops_at(), c, q, ac, 1, 0.3f, first, sinks.data()))) << s;
        }
        const std::vector<float> huge(static_cast<size_t>(ac.n_group), 1e4f);
        for (float v : run_attention(ops_at(), c, q, ac, 1, 0.3f, first, huge.data())) ASSERT_EQ(v, 0.0f);
      }
    }
  }
}

}  // namespace
}  // namespace spate::kernels
