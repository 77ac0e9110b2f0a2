// Tests of the quantized KV cache dtypes q8_0 and fp8_e5m2 (kernels/ops.h
// kv_dtype): q8_0's quantization bit for bit against llama.cpp's
// quantize_row_q8_0_ref formula (written out here), fp8_e5m2's rounding
// against a search for the nearest e5m2 value, and store-then-dequantize
// round trips through every level's kv_store within each dtype's error bound.
// The attention kernels over these dtypes are tested with the others in
// test_ops_attention.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "isa_test_util.h"
#include "kernels/fp16.h"
#include "kernels/ops.h"
#include "kernels/ops_internal.h"
#include "ops_test_util.h"

namespace spate::kernels {
namespace {

using namespace spate::kernels::test;

// llama.cpp's quantize_row_q8_0_ref (ggml-quants.c) for one block of 32, as its formula reads.
struct q8_block {
  uint16_t d;
  int8_t qs[32];
};
q8_block llama_q8_0(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / ((1 << 7) - 1);
  const float id = d ? 1.0f / d : 0.0f;
  q8_block b{};
  b.d = f32_to_fp16(d);
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(roundf(x[j] * id));
  return b;
}

// One layer's pools for n_blocks blocks of n_kv_heads heads.
struct kvq_pools {
  paged_kv_view view;
  std::vector<uint8_t> k, v;
  kvq_pools(kv_dtype dt, int32_t bs, int32_t n_kv_heads, int32_t hd, int32_t n_blocks) {
    view.dtype = dt;
    view.block_size = bs;
    view.n_kv_heads = n_kv_heads;
    view.head_dim = hd;
    const size_t bytes = static_cast<size_t>(n_blocks) * n_kv_heads * kv_head_block_bytes(dt, bs, hd);
    k.assign(bytes, 0x7e);
    v.assign(bytes, 0x7e);
    view.k = k.data();
    view.v = v.data();
  }
  const uint8_t* head(bool is_k, int32_t block, int32_t h) const {
    return (is_k ? k : v).data() + detail::kv_head_base_bytes(view, block, h);
  }
};

uint16_t half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// Rows with the cases that matter: zeros (d = 0), ties of x * id at .5, a lone large value, negatives.
std::vector<float> q8_test_row(std::mt19937& rng, int32_t hd, int kind) {
  auto x = random_vec(rng, hd, -3.0f, 3.0f);
  if (kind == 1) std::fill(x.begin(), x.end(), 0.0f);
  if (kind == 2) {
    for (int32_t d = 0; d < hd; ++d) x[d] = (d % 32 == 0) ? 127.0f : static_cast<float>(d % 32) - 15.5f;  // id = 1: .5 ties
  }
  if (kind == 3) x[hd / 2] = -1e4f;
  if (kind == 4) {
    for (float& e : x) e *= 1e-6f;  // d below f16's normal range
  }
  return x;
}

TEST_P(OpsLevel, KvQ8StoreIsLlamaCppQ8_0BitForBit) {
  const int32_t hd = 96, bs = 5, n_heads = 2;
  kvq_pools c(kv_dtype::q8_0, bs, n_heads, hd, 4);
  std::mt19937 rng(31);
  for (int kind = 0; kind < 5; ++kind) {
    for (int32_t slot : {0, 3, 4}) {
      const int32_t block = 1 + slot % 3, h = slot % n_heads;
      const auto kx = q8_test_row(rng, hd, kind), vx = q8_test_row(rng, hd, (kind + 2) % 5);
      ops_at().kv_store(c.view, block, slot, h, kx.data(), vx.data());
      const uint8_t* kb = c.head(true, block, h);
      const uint8_t* vb = c.head(false, block, h);
      for (int32_t g = 0; g < hd / 32; ++g) {
        const q8_block wk = llama_q8_0(kx.data() + 32 * g), wv = llama_q8_0(vx.data() + 32 * g);
        EXPECT_EQ(wk.d, half_at(kb + detail::kv_q8_k_scale_offset(c.view, slot, g))) << "kind " << kind << " g " << g;
        EXPECT_EQ(wv.d, half_at(vb + detail::kv_q8_v_scale_offset(c.view, slot, g))) << "kind " << kind << " g " << g;
        for (int32_t j = 0; j < 32; ++j) {
          const int32_t d = 32 * g + j;
          ASSERT_EQ(wk.qs[j], static_cast<int8_t>(kb[d * bs + slot])) << "K kind " << kind << " d " << d;
          ASSERT_EQ(wv.qs[j], static_cast<int8_t>(vb[slot * hd + d])) << "V kind " << kind << " d " << d;
        }
      }
    }
  }
  // The other slots and blocks were not touched.
  for (int32_t s : {1, 2})
    for (int32_t d = 0; d < hd; ++d) ASSERT_EQ(c.head(true, 1, 0)[d * bs + s], 0x7e);
  for (size_t i = 0; i < c.k.size() / 4; ++i) ASSERT_EQ(c.k[i], 0x7e);  // block 0
}

// Store, then dequantize (q * f16 scale): within half a step plus the scale's f16 rounding,
// |x - q d| <= d / 2 and |q| <= 127, so |x - q fp16(d)| <= d (1/2 + 127 * 2^-11) for a normal fp16(d).
TEST_P(OpsLevel, KvQ8RoundTripWithinBound) {
  const int32_t hd = 64, bs = 16;
  kvq_pools c(kv_dtype::q8_0, bs, 1, hd, 2);
  std::mt19937 rng(7);
  for (int32_t slot = 0; slot < bs; ++slot) {
    const auto kx = random_vec(rng, hd, -4.0f, 4.0f), vx = random_vec(rng, hd, -0.5f, 0.5f);
    ops_at().kv_store(c.view, 1, slot, 0, kx.data(), vx.data());
    const uint8_t* kb = c.head(true, 1, 0);
    const uint8_t* vb = c.head(false, 1, 0);
    for (int32_t g = 0; g < 2; ++g) {
      float kmax = 0.0f, vmax = 0.0f;
      for (int32_t d = 32 * g; d < 32 * g + 32; ++d) {
        kmax = std::max(kmax, std::fabs(kx[d]));
        vmax = std::max(vmax, std::fabs(vx[d]));
      }
      const float ks = fp16_to_f32(half_at(kb + detail::kv_q8_k_scale_offset(c.view, slot, g)));
      const float vs = fp16_to_f32(half_at(vb + detail::kv_q8_v_scale_offset(c.view, slot, g)));
      for (int32_t d = 32 * g; d < 32 * g + 32; ++d) {
        const float kq = static_cast<float>(static_cast<int8_t>(kb[d * bs + slot])) * ks;
        const float vq = static_cast<float>(static_cast<int8_t>(vb[slot * hd + d])) * vs;
        EXPECT_LE(std::fabs(kq - kx[d]), kmax / 127.0f * 0.5625f) << "slot " << slot << " d " << d;
        EXPECT_LE(std::fabs(vq - vx[d]), vmax / 127.0f * 0.5625f) << "slot " << slot << " d " << d;
      }
    }
  }
}

// The e5m2 byte nearest to the value of half h (ties to the even byte, magnitudes at or past
// 61440 = 57344 + half an ulp to infinity), by searching the 124 finite magnitudes.
uint8_t nearest_e5m2(uint16_t h) {
  const double x = fp16_to_f32(h);
  const uint8_t sign = static_cast<uint8_t>((h >> 8) & 0x80u);
  const double ax = std::fabs(x);
  if (ax >= 61440.0) return static_cast<uint8_t>(sign | 0x7cu);
  uint8_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (uint8_t b = 0; b < 0x7c; ++b) {
    const double err = std::fabs(fp16_to_f32(static_cast<uint16_t>(b << 8)) - ax);
    if (err < best_err || (err == best_err && (b & 1u) == 0)) {
      best = b;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(sign | best);
}

TEST(KvFp8, EveryHalfRoundsToTheNearestE5m2) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float x = fp16_to_f32(static_cast<uint16_t>(h));
    const uint8_t got = detail::f32_to_e5m2(x);
    if ((h & 0x7fffu) > 0x7c00u) {  // NaN stays NaN, sign kept
      ASSERT_TRUE(std::isnan(detail::e5m2_to_f32(got))) << std::hex << h;
      ASSERT_EQ(got & 0x80u, (h >> 8) & 0x80u) << std::hex << h;
      continue;
    }
    ASSERT_EQ(nearest_e5m2(static_cast<uint16_t>(h)), got) << std::hex << "half 0x" << h;
    if ((h & 0xffu) == 0) {
      ASSERT_EQ(x, detail::e5m2_to_f32(got));  // representable values are exact
    }
  }
  EXPECT_EQ(detail::f32_to_e5m2(1e9f), 0x7c);
  EXPECT_EQ(detail::f32_to_e5m2(-std::numeric_limits<float>::infinity()), 0xfc);
  EXPECT_EQ(detail::f32_to_e5m2(57344.0f), 0x7b);
  EXPECT_EQ(detail::f32_to_e5m2(61423.0f), 0x7b);  // f16 61408, below the midpoint 61440
  // The double rounding: 61439 is below the midpoint but rounds to the f16 61440 first, a tie that goes to
  // the even byte 0x7c, infinity.
  EXPECT_EQ(detail::f32_to_e5m2(61439.0f), 0x7c);
}

// Store, then decode: within the relative half-ulp of e5m2 (2^-3) for normal values.
TEST_P(OpsLevel, KvFp8RoundTripWithinBound) {
  const int32_t hd = 13, bs = 7;  // fp8 takes any head_dim
  kvq_pools c(kv_dtype::fp8_e5m2, bs, 2, hd, 3);
  std::mt19937 rng(9);
  for (int32_t slot = 0; slot < bs; ++slot) {
    auto kx = random_vec(rng, hd, -1000.0f, 1000.0f), vx = random_vec(rng, hd, -1.0f, 1.0f);
    ops_at().kv_store(c.view, 2, slot, 1, kx.data(), vx.data());
    const uint8_t* kb = c.head(true, 2, 1);
    const uint8_t* vb = c.head(false, 2, 1);
    for (int32_t d = 0; d < hd; ++d) {
      ASSERT_EQ(kb[d * bs + slot], detail::f32_to_e5m2(kx[d]));
      ASSERT_EQ(vb[slot * hd + d], detail::f32_to_e5m2(vx[d]));
      const float kd = detail::e5m2_to_f32(kb[d * bs + slot]), vd = detail::e5m2_to_f32(vb[slot * hd + d]);
      if (std::fabs(kx[d]) >= 6.2e-5f) {
        EXPECT_LE(std::fabs(kd - kx[d]), 0.125f * std::fabs(kx[d]) * 1.001f) << kx[d];
      }
      if (std::fabs(vx[d]) >= 6.2e-5f) {
        EXPECT_LE(std::fabs(vd - vx[d]), 0.125f * std::fabs(vx[d]) * 1.001f) << vx[d];
      }
    }
  }
}

TEST(KvDtype, SizesAndHeadDims) {
  EXPECT_EQ(kv_head_block_bytes(kv_dtype::f16, 16, 64), 2048);
  EXPECT_EQ(kv_head_block_bytes(kv_dtype::f32, 16, 64), 4096);
  EXPECT_EQ(kv_head_block_bytes(kv_dtype::q8_0, 16, 64), 1024 + 64);
  EXPECT_EQ(kv_head_block_bytes(kv_dtype::fp8_e5m2, 16, 64), 1024);
  EXPECT_EQ(kv_head_block_bytes(kv_dtype::q8_0, 7, 96), 7 * 96 + 2 * 7 * 3);
  EXPECT_TRUE(kv_dtype_supports_head_dim(kv_dtype::q8_0, 64));
  EXPECT_FALSE(kv_dtype_supports_head_dim(kv_dtype::q8_0, 80));
  EXPECT_TRUE(kv_dtype_supports_head_dim(kv_dtype::fp8_e5m2, 80));
  EXPECT_STREQ(kv_dtype_name(kv_dtype::q8_0), "q8_0");
  EXPECT_STREQ(kv_dtype_name(kv_dtype::fp8_e5m2), "fp8_e5m2");
}

}  // namespace
}  // namespace spate::kernels
