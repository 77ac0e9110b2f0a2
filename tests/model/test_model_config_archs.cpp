// The keys and tensors of the architectures beyond llama (qwen3, gemma3,
// phi3): read into the typed config, and refused with a message naming the
// key or tensor when missing or contradictory. Small GGUF images from
// gguf_builder.h; no weights on disk.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gguf_builder.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace spate {
namespace {

using testing::gguf_builder;
using testing::tiny_llama;
using testing::tiny_llama_params;

struct parsed {
  std::vector<uint8_t> keep;
  std::unique_ptr<gguf_file> f;
};
parsed parse(const gguf_builder& b) {
  parsed p;
  p.keep = b.build();
  p.f = gguf_file::parse(p.keep.data(), p.keep.size(), "test.gguf");
  return p;
}

std::string error_of(const gguf_builder& b, bool weights = false) {
  auto p = parse(b);
  try {
    const auto c = read_model_config(*p.f);
    if (weights) load_model_weights(*p.f, c, kernels::isa_level::scalar);
  } catch (const gguf_error& e) {
    return e.what();
  }
  return "";
}

// A one-layer gemma3 image: llama's tensors plus QK-norm and the two post norms.
gguf_builder tiny_gemma3() {
  tiny_llama_params p;
  p.arch = "gemma3";
  auto b = tiny_llama(p);
  b.kv_u32("gemma3.attention.sliding_window", 4);
  const uint64_t hd = p.n_embd / p.n_head;
  b.tensor_f32("blk.0.attn_q_norm.weight", {hd}, 0.1f).tensor_f32("blk.0.attn_k_norm.weight", {hd}, 0.1f);
  b.tensor_f32("blk.0.post_attention_norm.weight", {p.n_embd}, 0.1f).tensor_f32("blk.0.post_ffw_norm.weight", {p.n_embd}, 0.1f);
  return b;
}

TEST(ModelConfigArchs, Gemma3ReadsItsFeatures) {
  auto p = parse(tiny_gemma3());
  const auto c = read_model_config(*p.f);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.post_norms);
  EXPECT_EQ(c.ffn_act, ffn_activation::gelu_tanh);
  EXPECT_FLOAT_EQ(c.embd_scale, std::sqrt(32.0f));
  EXPECT_EQ(c.n_swa, 4);
  EXPECT_TRUE(c.is_swa_layer(0));  // layer 0 of a 6-layer pattern slides
  EXPECT_EQ(c.rope, kernels::rope_mode::neox);
  EXPECT_FLOAT_EQ(c.rope_freq_base_swa, 10000.0f);
  EXPECT_EQ(c.final_logit_softcap, 0.0f);
  EXPECT_NO_THROW(load_model_weights(*p.f, c, kernels::isa_level::scalar));
}

TEST(ModelConfigArchs, Gemma3KeysAreValidated) {
  auto b = tiny_gemma3();
  b.erase_kv("gemma3.attention.sliding_window");
  EXPECT_NE(error_of(b).find("lacks required metadata 'gemma3.attention.sliding_window'"), std::string::npos) << error_of(b);
  auto b2 = tiny_gemma3();
  b2.kv_f32("gemma3.final_logit_softcapping", -3.0f);
  EXPECT_NE(error_of(b2).find("invalid final_logit_softcapping"), std::string::npos) << error_of(b2);
  auto b3 = tiny_gemma3();
  b3.kv_f32("gemma3.attn_logit_softcapping", 50.0f);
  EXPECT_NE(error_of(b3).find("attn_logit_softcapping"), std::string::npos);
  auto b4 = tiny_gemma3();
  b4.kv_i32_array("gemma3.attention.sliding_window_pattern", {1, 0});
  EXPECT_NE(error_of(b4).find("'gemma3.attention.sliding_window_pattern' should be an integer"), std::string::npos)
      << error_of(b4);
  auto b5 = tiny_gemma3();
  b5.kv_u32("gemma3.pooling_type", 7);
  EXPECT_NE(error_of(b5).find("'gemma3.pooling_type' must be 0 (none), 1 (mean), 2 (cls) or 3 (last)"), std::string::npos);
}

TEST(ModelConfigArchs, Gemma3TensorsAreRequired) {
  auto b = tiny_gemma3();
  b.erase_tensor("blk.0.post_ffw_norm.weight");
  EXPECT_NE(error_of(b, true).find("lacks tensor 'blk.0.post_ffw_norm.weight'"), std::string::npos) << error_of(b, true);
  auto b2 = tiny_gemma3();
  b2.erase_tensor("blk.0.attn_k_norm.weight").tensor_f32("blk.0.attn_k_norm.weight", {7}, 0.1f);
  EXPECT_NE(error_of(b2, true).find("tensor 'blk.0.attn_k_norm.weight' has shape [7], expected [8]"), std::string::npos)
      << error_of(b2, true);
}

TEST(ModelConfigArchs, Qwen3RefusesAQkvBias) {
  tiny_llama_params p;
  p.arch = "qwen3";
  auto b = tiny_llama(p);
  b.tensor_f32("blk.0.attn_q_norm.weight", {8}, 0.1f).tensor_f32("blk.0.attn_k_norm.weight", {8}, 0.1f);
  auto ok = parse(b);
  EXPECT_NO_THROW(load_model_weights(*ok.f, read_model_config(*ok.f), kernels::isa_level::scalar));
  b.tensor_f32("blk.0.attn_q.bias", {32}, 0.1f);
  EXPECT_NE(error_of(b, true).find("'blk.0.attn_q.bias' is unexpected for architecture 'qwen3'"), std::string::npos)
      << error_of(b, true);
}

// An F32 vector tensor with the given values.
void add_vector(gguf_builder& b, const std::string& name, const std::vector<float>& v) {
  testing::tensor_spec t{name, {v.size()}, testing::g_f32, std::vector<uint8_t>(v.size() * 4), std::nullopt};
  std::memcpy(t.data.data(), v.data(), t.data.size());
  b.tensor(std::move(t));
}

// phi3: fused QKV [q | k | v] and gate|up, and LongRoPE factor pairs.
gguf_builder tiny_phi3() {
  tiny_llama_params p;
  p.arch = "phi3";
  auto b = tiny_llama(p);
  b.erase_tensor("blk.0.attn_q.weight").erase_tensor("blk.0.attn_k.weight").erase_tensor("blk.0.attn_v.weight");
  b.erase_tensor("blk.0.ffn_gate.weight").erase_tensor("blk.0.ffn_up.weight");
  b.tensor_f32("blk.0.attn_qkv.weight", {32, 32 + 2 * 16}).tensor_f32("blk.0.ffn_up.weight", {32, 2 * 64});
  return b;
}

TEST(ModelConfigArchs, Phi3SplitsFusedTensorsAndPicksRopeFactors) {
  auto b = tiny_phi3();
  b.kv_u32("phi3.rope.scaling.original_context_length", 64).kv_f32("phi3.rope.scaling.attn_factor", 1.2f);
  b.tensor_f32("rope_factors_long.weight", {4}, 0.0f).tensor_f32("rope_factors_short.weight", {4}, 0.0f);
  auto p = parse(b);
  const auto c = read_model_config(*p.f);
  EXPECT_EQ(c.n_ctx_orig, 64);
  EXPECT_FLOAT_EQ(c.rope_attn_factor, 1.2f);
  // tensor_f32 with scale 0 writes zeros: a factor must be positive.
  EXPECT_NE(error_of(b, true).find("LongRoPE factor is not positive"), std::string::npos) << error_of(b, true);
  auto good = tiny_phi3();
  good.kv_u32("phi3.rope.scaling.original_context_length", 64);
  add_vector(good, "rope_factors_long.weight", {4, 8, 16, 32});
  add_vector(good, "rope_factors_short.weight", {1, 1.5f, 2, 2.5f});
  auto q = parse(good);
  const auto cq = read_model_config(*q.f);
  auto w = load_model_weights(*q.f, cq, kernels::isa_level::scalar);
  EXPECT_EQ(w.layers[0].wq.n_out(), 32);
  EXPECT_EQ(w.layers[0].wk.n_out(), 16);
  EXPECT_EQ(w.layers[0].wv.n_out(), 16);
  EXPECT_EQ(w.layers[0].w_gate.n_out(), 64);
  EXPECT_EQ(w.layers[0].w_up.n_out(), 64);
  EXPECT_EQ(w.rope_freqs, w.rope_short);
  select_rope_factors(w, cq, 65);
  EXPECT_EQ(w.rope_freqs, w.rope_long);
  select_rope_factors(w, cq, 64);
  EXPECT_EQ(w.rope_freqs, w.rope_short);
}

TEST(ModelConfigArchs, Phi3NeedsBothFactorSets) {
  auto b = tiny_phi3();
  add_vector(b, "rope_factors_long.weight", {1, 2, 3, 4});
  EXPECT_NE(error_of(b, true).find("only one of 'rope_factors_long.weight' and 'rope_factors_short.weight'"), std::string::npos)
      << error_of(b, true);
  auto b2 = tiny_phi3();
  b2.erase_tensor("blk.0.attn_qkv.weight").tensor_f32("blk.0.attn_qkv.weight", {32, 40});
  EXPECT_NE(error_of(b2, true).find("'blk.0.attn_qkv.weight' has shape [32, 40], expected [32, 64]"), std::string::npos)
      << error_of(b2, true);
}

}  // namespace
}  // namespace spate
