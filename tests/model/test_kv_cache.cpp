// Tests of kv_cache (model/kv_cache.h): the bytes per block of every dtype,
// the per-layer block byte ranges another component copies whole, and the
// refusal of a head_dim q8_0 cannot hold.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/kv_cache.h"
#include "model/model_executor.h"
#include "model/model_loader.h"

namespace spate {
namespace {

using kernels::kv_dtype;

model_config smollm2_shape() {  // SmolLM2-135M: 30 layers, 3 kv heads of 64 dims
  model_config c;
  c.n_layer = 30;
  c.n_head = 9;
  c.n_head_kv = 3;
  c.head_dim = 64;
  return c;
}

TEST(KvCache, BytesPerBlockPerDtype) {
  const model_config c = smollm2_shape();
  EXPECT_EQ(kv_cache::bytes_per_block(c, 16, kv_dtype::f32), 2u * 30 * 3 * 16 * 64 * 4);
  EXPECT_EQ(kv_cache::bytes_per_block(c, 16, kv_dtype::f16), 2u * 30 * 3 * 16 * 64 * 2);        // 368640
  EXPECT_EQ(kv_cache::bytes_per_block(c, 16, kv_dtype::q8_0), 2u * 30 * 3 * (16 * 64 + 16 * 2 * 2));  // 195840
  EXPECT_EQ(kv_cache::bytes_per_block(c, 16, kv_dtype::fp8_e5m2), 2u * 30 * 3 * 16 * 64);      // 184320
}

// Every byte a block's stores write lies in [block_offset(b), + block_bytes_per_layer_pool()) of
// the layer's K and V pools, and no other block's stores write there.
TEST(KvCache, BlockByteRangesHoldTheBlockWhole) {
  for (kv_dtype dt : {kv_dtype::f16, kv_dtype::f32, kv_dtype::q8_0, kv_dtype::fp8_e5m2}) {
    model_config c = smollm2_shape();
    c.n_layer = 2;
    const int32_t bs = 5, n_blocks = 4;
    kv_cache kv(c, n_blocks, bs, dt);
    EXPECT_EQ(kv.block_bytes_per_layer_pool() * 2 * c.n_layer, kv_cache::bytes_per_block(c, bs, dt));
    const auto view = kv.layer_view(1);
    const size_t range = kv.block_bytes_per_layer_pool();
    std::vector<float> k(64), vv(64);
    for (int32_t d = 0; d < 64; ++d) {
      k[d] = 0.37f * static_cast<float>(d) - 5.0f;
      vv[d] = 2.0f - 0.11f * static_cast<float>(d);
    }
    // A byte is written when it differs from a fill of 0x00 or from a fill of 0xff after the stores.
    std::vector<bool> written_k(range * n_blocks), written_v(range * n_blocks);
    for (int fill : {0x00, 0xff}) {
      std::memset(view.k, fill, range * n_blocks);
      std::memset(view.v, fill, range * n_blocks);
      for (int32_t s = 0; s < bs; ++s)
        for (int32_t h = 0; h < c.n_head_kv; ++h)
          kernels::ops_for(kernels::isa_level::scalar).kv_store(view, 2, s, h, k.data(), vv.data());
      for (size_t i = 0; i < range * n_blocks; ++i) {
        if (static_cast<const uint8_t*>(view.k)[i] != fill) written_k[i] = true;
        if (static_cast<const uint8_t*>(view.v)[i] != fill) written_v[i] = true;
      }
    }
    for (size_t i = 0; i < range * n_blocks; ++i) {
      const bool inside = i >= kv.block_offset(2) && i < kv.block_offset(2) + range;
      ASSERT_EQ(written_k[i], inside) << kernels::kv_dtype_name(dt) << " K byte " << i;
      ASSERT_EQ(written_v[i], inside) << kernels::kv_dtype_name(dt) << " V byte " << i;
    }
  }
}

TEST(KvCache, Q8RefusesHeadDimNotMultipleOf32) {
  model_config c = smollm2_shape();
  c.head_dim = 80;
  try {
    kv_cache kv(c, 2, 16, kv_dtype::q8_0);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("q8_0"), std::string::npos) << m;
    EXPECT_NE(m.find("80"), std::string::npos) << m;
  }
  EXPECT_THROW(kv_cache::bytes_per_block(c, 16, kv_dtype::q8_0), std::invalid_argument);
  EXPECT_NO_THROW(kv_cache(c, 2, 16, kv_dtype::fp8_e5m2));
}

// The executor (engine start) refuses it before building anything, with the same message.
TEST(KvCache, ExecutorStartRefusesQ8WithHeadDim80) {
  loaded_model m;
  m.config = smollm2_shape();
  m.config.head_dim = 80;
  executor_config cfg;
  cfg.kv_dtype = kv_dtype::q8_0;
  cfg.kv_cache_bytes = 64ull << 20;
  try {
    model_executor e(m, cfg);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("q8_0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("head_dim is 80"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace spate
