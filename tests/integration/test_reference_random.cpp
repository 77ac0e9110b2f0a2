// spate against llama.cpp on random-weight models of the architectures with no
// real model here (qwen3; gemma3 with a 16-position sliding window, so that a
// 64-token sequence leaves every sliding layer's window several times; phi3
// with fused tensors and LongRoPE, whose long factors apply because the
// reference context of 256 exceeds the model's original 32), and mixtures of
// experts: qwen3moe (Q8_0; and "qwen3moe-mixed", a Q4_K_M-like mix of weight
// types per tensor and layer) and a Mixtral-style llama ("llama-moe"), whose
// routers make top-k choices with wide gaps (make_random_models.py, Routing),
// so that both engines pick the same experts; and gpt-oss (biases, attention
// sinks, alternating 16-position windows, YaRN, MXFP4 experts with biases;
// and "gpt-oss-q", 8 experts with 2 used, no rope scaling keys, the tensors
// byte for byte those llama.cpp's llama-quantize MXFP4_MOE writes from an F32
// file, its reference from tests/reference/llama_greedy_dump.cpp).
//
// The models are written by tests/reference/make_random_models.py into
// SPATE_RANDOM_MODELS_DIR (scripts/test.sh does it, checking each file's
// SHA-256 against the fixture); the reference logits come from
// tests/reference/make_random_fixtures.py (llama-cpp-python, not needed here).
// A fixture entry is keyed by its "name", or its "arch" where it has no name.
//
// Checked: teacher-forced logits over every position's top-8 are within the
// default model's bounds (median <= 0.20, p99 <= 0.75, max <= 1.50, see
// test_reference_llamacpp.cpp; the mixtures of experts within tighter ones),
// and llama.cpp's top-1 is ours wherever its margin exceeds 0.5; logits of a
// one-batch prefill and of token-by-token decoding are bitwise identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>

#include "model_fixture.h"

namespace spate::testing {
namespace {

namespace json = boost::json;

struct random_model {
  std::string name, arch, file;  // name: the test parameter (the arch unless the entry names itself)
  std::vector<int32_t> tokens;
  std::vector<std::vector<std::pair<int32_t, float>>> top;  // per position, llama.cpp's top-8
};

std::vector<random_model> load_fixture() {
  const auto doc = json::parse(read_file(std::string(SPATE_SOURCE_DIR) + "/tests/integration/fixtures/random_models.json"));
  std::vector<random_model> out;
  for (const auto& m : doc.at("models").as_array()) {
    random_model r;
    r.arch = json::value_to<std::string>(m.at("arch"));
    r.name = m.as_object().contains("name") ? json::value_to<std::string>(m.at("name")) : r.arch;
    r.file = json::value_to<std::string>(m.at("file"));
    r.tokens = json::value_to<std::vector<int32_t>>(m.at("tokens"));
    for (const auto& pos : m.at("top").as_array()) {
      auto& row = r.top.emplace_back();
      for (const auto& p : pos.as_array()) {
        row.emplace_back(static_cast<int32_t>(p.as_array()[0].to_number<int64_t>()),
                         static_cast<float>(p.as_array()[1].to_number<double>()));
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string models_dir() {
  const char* d = std::getenv("SPATE_RANDOM_MODELS_DIR");
  return d && *d ? d : "";
}

class ReferenceRandom : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (models_dir().empty()) {
      GTEST_FAIL() << "SPATE_RANDOM_MODELS_DIR is not set (python3 tests/reference/make_random_models.py --out-dir DIR "
                      "--check tests/integration/fixtures/random_models.json)";
    }
    for (auto& m : load_fixture()) if (m.name == GetParam()) fixture_ = std::move(m);
    ASSERT_FALSE(fixture_.tokens.empty()) << "no fixture for " << GetParam();
  }
  loaded_model& model() {
    auto& m = shared_model_at(models_dir() + "/" + fixture_.file, "tests/reference/make_random_models.py");
    select_rope_factors(m.weights, m.config, k_reference_ctx);
    return m;
  }
  static constexpr int32_t k_reference_ctx = 256;  // make_random_fixtures.py's n_ctx
  random_model fixture_;
};

// Logits at every position: all tokens in one forward pass (prefill), or one per pass (decode).
std::vector<float> run(runner_env& env, const std::vector<int32_t>& tokens, bool one_pass) {
  const int32_t V = env.model.config.n_vocab;
  const auto n = static_cast<int32_t>(tokens.size());
  block_table bt(env.blocks);
  EXPECT_TRUE(bt.grow_to(n, env.kv.block_size()));
  std::vector<float> logits(static_cast<size_t>(n) * V);
  forward_batch b;
  if (one_pass) {
    b.seqs.push_back({tokens, 0, bt.ids(), n});
    env.runner.forward(b, logits.data());
    return logits;
  }
  for (int32_t i = 0; i < n; ++i) {
    b.seqs.clear();
    b.seqs.push_back({std::span<const int32_t>(&tokens[static_cast<size_t>(i)], 1), i, bt.ids(), 1});
    env.runner.forward(b, logits.data() + static_cast<size_t>(i) * V);
  }
  return logits;
}

TEST_P(ReferenceRandom, ConfigIsTheArchitecture) {
  const auto& c = model().config;
  EXPECT_EQ(c.arch, fixture_.arch);
  EXPECT_EQ(c.qk_norm, fixture_.arch != "phi3" && fixture_.arch != "llama" && fixture_.arch != "gpt-oss");
  // make_random_models.py's MoE shapes; qwen3moe's feed_forward_length (512) is
  // the dense size its converter copies, not the experts' (expert_feed_forward_length).
  struct moe_shape { int32_t n_expert, n_expert_used, n_ff_exp; };
  const auto moe = GetParam() == "qwen3moe"         ? moe_shape{16, 4, 128}
                   : GetParam() == "qwen3moe-mixed" ? moe_shape{16, 4, 256}
                   : GetParam() == "llama-moe"      ? moe_shape{8, 2, 256}
                   : GetParam() == "gpt-oss"        ? moe_shape{8, 4, 128}
                   : GetParam() == "gpt-oss-q"      ? moe_shape{8, 2, 128}
                                                    : moe_shape{0, 0, 0};
  EXPECT_EQ(c.n_expert, moe.n_expert);
  EXPECT_EQ(c.n_expert_used, moe.n_expert_used);
  EXPECT_EQ(c.n_ff_exp, moe.n_ff_exp);
  if (fixture_.arch == "gpt-oss") {  // make_random_models.py's write_gpt_oss_model
    EXPECT_FALSE(c.expert_weights_norm);
    EXPECT_EQ(c.moe_gating, expert_gating::softmax_topk);
    EXPECT_TRUE(c.moe_biases && c.attn_sinks);
    EXPECT_EQ(c.ffn_act, ffn_activation::swiglu_oai);
    EXPECT_EQ(c.n_swa, 16);
    EXPECT_EQ(c.layer_swa, (std::vector<uint8_t>{1, 0, 1, 0, 1, 0}));
    if (GetParam() == "gpt-oss") {
      EXPECT_FLOAT_EQ(c.rope_yarn_factor, 32.0f);
      EXPECT_EQ(c.n_ctx_orig, 4096);
    } else {
      EXPECT_EQ(c.rope_yarn_factor, 0.0f);  // no rope scaling keys: plain NeoX RoPE
    }
    EXPECT_FALSE(model().weights.layers[0].bo.empty());
  } else if (c.is_moe()) {
    EXPECT_TRUE(c.expert_weights_norm);
    EXPECT_EQ(c.head_dim, 64);  // llama-moe has no key_length: n_embd / n_head
    EXPECT_EQ(c.rope, fixture_.arch == "llama" ? kernels::rope_mode::normal : kernels::rope_mode::neox);
  }
  if (GetParam() == "phi3") {
    EXPECT_EQ(c.n_ctx_orig, 32);
    EXPECT_FLOAT_EQ(c.rope_attn_factor, 1.19f);
    EXPECT_EQ(model().weights.rope_freqs, model().weights.rope_long);
    EXPECT_NE(model().weights.rope_long, model().weights.rope_short);
  }
  if (GetParam() == "gemma3") {
    EXPECT_EQ(c.n_swa, 16);
    EXPECT_TRUE(c.post_norms);
    EXPECT_EQ(c.final_logit_softcap, 0.0f);  // llama.cpp has none for gemma3: the fixture's model sets none
    for (int32_t l = 0; l < c.n_layer; ++l) EXPECT_EQ(c.is_swa_layer(l), l != 5) << l;
  }
}

TEST_P(ReferenceRandom, LogitsMatchLlamaCpp) {
  runner_env env(model(), 64, 16);
  const int32_t V = env.model.config.n_vocab;
  const auto prefill = run(env, fixture_.tokens, true);
  const auto decode = run(env, fixture_.tokens, false);
  EXPECT_EQ(0, std::memcmp(prefill.data(), decode.data(), prefill.size() * sizeof(float)))
      << "prefill and decode logits differ";
  std::vector<float> errs;
  for (size_t p = 0; p < fixture_.top.size(); ++p) {
    const float* l = prefill.data() + p * static_cast<size_t>(V);
    const auto& top = fixture_.top[p];
    for (const auto& [id, ref] : top) errs.push_back(std::fabs(l[id] - ref));
    if (top[0].second - top[1].second > 0.5f) {
      EXPECT_EQ(std::max_element(l, l + V) - l, top[0].first) << "position " << p;
    }
  }
  std::sort(errs.begin(), errs.end());
  auto q = [&](double f) { return errs[static_cast<size_t>(f * static_cast<double>(errs.size() - 1))]; };
  std::printf("%s: |logit - llama.cpp| over top-8 at %zu positions: median %.4f p99 %.4f max %.4f (logits up to %.1f)\n",
              GetParam().c_str(), fixture_.top.size(), q(0.5), q(0.99), errs.back(), fixture_.top[0][0].second);
  // The mixtures of experts are held tighter: measured (2026-11-27, AVX-512 and
  // AVX2 alike) median <= 0.049, p99 <= 0.19, max <= 0.23, while dropping the
  // renormalization of the top-k weights gives median 0.18-0.27 and p99 0.62-1.06,
  // which the default model's bounds would let pass on qwen3moe.
  const bool moe = env.model.config.is_moe();
  EXPECT_LE(q(0.5), moe ? 0.10 : 0.20);
  EXPECT_LE(q(0.99), moe ? 0.40 : 0.75);
  EXPECT_LE(errs.back(), moe ? 0.60 : 1.50);
}

// Each architecture's forward keeps a sequence's logits bitwise independent
// of its batch: the fixture's tokens alone in one pass, and the same tokens
// in two chunks next to another sequence that prefills and then decodes at
// other positions (its own RoPE angles and, on gemma3, windows).
TEST_P(ReferenceRandom, BatchedEqualsAlone) {
  runner_env env(model(), 64, 16);
  const int32_t V = env.model.config.n_vocab, n = static_cast<int32_t>(fixture_.tokens.size());
  const auto alone = run(env, fixture_.tokens, true);
  const std::vector<int32_t> other(fixture_.tokens.rbegin(), fixture_.tokens.rend());
  block_table bt(env.blocks), bt_other(env.blocks);
  ASSERT_TRUE(bt.grow_to(n, 16));
  ASSERT_TRUE(bt_other.grow_to(n, 16));
  const int32_t half = n / 2;
  std::vector<float> batched(static_cast<size_t>(n) * V), scratch(static_cast<size_t>(n + 1) * V);
  forward_batch b;
  // Step 1: the first half of the sequence (all its logits) next to 20 tokens of the other.
  b.seqs.push_back({std::span<const int32_t>(fixture_.tokens).first(static_cast<size_t>(half)), 0, bt.ids(), half});
  b.seqs.push_back({std::span<const int32_t>(other).first(20), 0, bt_other.ids(), 1});
  env.runner.forward(b, scratch.data());
  std::copy_n(scratch.begin(), static_cast<size_t>(half) * V, batched.begin());
  // Step 2: the other sequence decodes one token first in the batch, then the rest of ours.
  b.seqs.clear();
  b.seqs.push_back({std::span<const int32_t>(other).subspan(20, 1), 20, bt_other.ids(), 1});
  b.seqs.push_back({std::span<const int32_t>(fixture_.tokens).subspan(static_cast<size_t>(half)), half, bt.ids(), n - half});
  env.runner.forward(b, scratch.data());
  std::copy_n(scratch.begin() + V, static_cast<size_t>(n - half) * V, batched.begin() + static_cast<size_t>(half) * V);
  EXPECT_EQ(0, std::memcmp(alone.data(), batched.data(), alone.size() * sizeof(float)))
      << "a sequence's logits depend on its batch";
}

// Final logit soft-capping (llama.cpp's gemma3 graph has none, so it is
// checked against its formula): the same model with a cap gives
// cap * tanh(logit / cap) of the uncapped logits.
TEST_P(ReferenceRandom, FinalLogitSoftCapping) {
  if (GetParam() != "gemma3") GTEST_SKIP() << "checked once, on gemma3";
  runner_env env(model(), 64, 16);
  const auto plain = run(env, fixture_.tokens, true);
  model_config capped_cfg = env.model.config;
  capped_cfg.final_logit_softcap = 5.0f;
  runner_env capped_env(model(), 64, 16);
  model_runner capped(capped_cfg, env.model.weights, capped_env.kv, capped_env.pool);
  block_table bt(capped_env.blocks);
  ASSERT_TRUE(bt.grow_to(static_cast<int64_t>(fixture_.tokens.size()), 16));
  std::vector<float> logits(plain.size());
  forward_batch b;
  b.seqs.push_back({fixture_.tokens, 0, bt.ids(), static_cast<int32_t>(fixture_.tokens.size())});
  capped.forward(b, logits.data());
  float worst = 0;
  for (size_t i = 0; i < plain.size(); ++i) worst = std::max(worst, std::fabs(logits[i] - 5.0f * std::tanh(plain[i] / 5.0f)));
  EXPECT_LT(worst, 1e-5f);
  EXPECT_LE(*std::max_element(logits.begin(), logits.end()), 5.0f);
}

// Sliding-window attention in the paged cache: with every layer sliding (the
// gemma3 model's config with its one global layer made sliding), decoding
// with the blocks behind each query's window released (k_no_block, as the
// scheduler leaves them) gives bitwise the logits of decoding with every
// block held, so no layer reads outside its window. With the real config,
// whose layer 5 reads everything, a released block is refused.
TEST_P(ReferenceRandom, SlidingLayersNeverReadBehindTheirWindow) {
  if (fixture_.arch != "gemma3" && fixture_.arch != "gpt-oss") GTEST_SKIP() << "gemma3 and gpt-oss have the sliding layers";
  runner_env env(model(), 64, 16);
  model_config all_swa = env.model.config;
  all_swa.layer_swa.assign(static_cast<size_t>(all_swa.n_layer), 1);
  model_runner runner(all_swa, env.model.weights, env.kv, env.pool);
  const int32_t V = all_swa.n_vocab, W = all_swa.n_swa, n = static_cast<int32_t>(fixture_.tokens.size());
  ASSERT_GE(n, 3 * W);  // the window moves past several blocks
  auto decode = [&](bool release) {
    block_table bt(env.blocks);
    EXPECT_TRUE(bt.grow_to(n, 16));
    std::vector<float> logits(static_cast<size_t>(n) * V);
    for (int32_t i = 0; i < n; ++i) {
      if (release) bt.release_front(std::max(0, i + 1 - W) / 16);
      forward_batch b;
      b.seqs.push_back({std::span<const int32_t>(&fixture_.tokens[static_cast<size_t>(i)], 1), i, bt.ids(), 1});
      runner.forward(b, logits.data() + static_cast<size_t>(i) * V);
    }
    EXPECT_EQ(bt.n_released(), release ? (n - W) / 16 : 0);
    return logits;
  };
  const auto held = decode(false);
  const auto released = decode(true);
  EXPECT_EQ(0, std::memcmp(held.data(), released.data(), held.size() * sizeof(float)));

  block_table bt(env.blocks);
  ASSERT_TRUE(bt.grow_to(n, 16));
  bt.release_front(1);
  forward_batch b;
  b.seqs.push_back({std::span<const int32_t>(&fixture_.tokens[static_cast<size_t>(n - 1)], 1), n - 1, bt.ids(), 1});
  std::vector<float> logits(static_cast<size_t>(V));
  EXPECT_THROW(env.runner.forward(b, logits.data()), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Archs, ReferenceRandom,
                         ::testing::Values("qwen3", "gemma3", "phi3", "qwen3moe", "qwen3moe-mixed", "llama-moe", "gpt-oss",
                                           "gpt-oss-q"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;  // a test name is [A-Za-z0-9_]
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace spate::testing
