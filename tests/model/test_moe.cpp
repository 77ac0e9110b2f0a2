// The mixture-of-experts FFN (model/moe_routing.h, blocks::moe_ffn) and the
// qwen3moe / Mixtral-style llama keys and tensors (model_config, model_weights).
//
// The block runs on a tiny qwen3moe image (gguf_builder.h: F32 router, Q8_0 or
// MXFP4 experts, so both activation formats run) at every ISA level this CPU has,
// and is checked against a per-row reference written here from the contract
// (double precision, dequantized weights, each row routed and computed on its
// own); the grouped execution must equal running each row alone, bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "gguf_builder.h"
#include "kernels/dequant.h"
#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"
#include "model/gguf_file.h"
#include "model/kv_cache.h"
#include "model/layers.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/moe_routing.h"
#include "model/op_timeline.h"

namespace spate {
namespace {

using testing::gguf_builder;

TEST(MoeRouting, SoftmaxTopKRenormalized) {
  const float logits[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  float p[5], sum = 0;
  for (int i = 0; i < 5; ++i) sum += (p[i] = std::exp(logits[i] - 2.0f));
  for (float& v : p) v /= sum;
  int32_t ids[5];
  float w[5], scratch[5];
  route_row(logits, 5, 3, expert_gating::softmax_all, false, ids, w, scratch);
  EXPECT_EQ(ids[0], 1);  // a tie: the lower id first
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 4);
  EXPECT_NEAR(w[0], p[1], 1e-6f);
  EXPECT_NEAR(w[2], p[4], 1e-6f);
  route_row(logits, 5, 3, expert_gating::softmax_all, true, ids, w, scratch);
  EXPECT_NEAR(w[0] + w[1] + w[2], 1.0f, 1e-6f);
  EXPECT_NEAR(w[2], p[4] / (p[1] + p[3] + p[4]), 1e-6f);
  route_row(logits, 5, 5, expert_gating::softmax_all, true, ids, w, scratch);  // k == n_expert: every expert once
  std::vector<int32_t> all(ids, ids + 5);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

TEST(MoeRouting, SoftmaxOverTheTopKLogits) {  // gpt-oss's gating
  const float logits[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  int32_t ids[5];
  float w[5], scratch[5];
  route_row(logits, 5, 3, expert_gating::softmax_topk, false, ids, w, scratch);
  EXPECT_EQ((std::vector<int32_t>{ids[0], ids[1], ids[2]}), (std::vector<int32_t>{1, 3, 4}));
  const double e1 = std::exp(2.0 - 2.0), e4 = std::exp(1.0 - 2.0), z = 2 * e1 + e4;
  EXPECT_NEAR(w[0], e1 / z, 1e-6);
  EXPECT_NEAR(w[1], e1 / z, 1e-6);
  EXPECT_NEAR(w[2], e4 / z, 1e-6);
  // Differs from softmax over all experts: the unchosen ones take no mass.
  route_row(logits, 5, 3, expert_gating::softmax_all, false, ids, w, scratch);
  EXPECT_LT(w[0] + w[1] + w[2], 0.99f);
}

TEST(MoeRouting, GroupByExpertCoversEveryAssignmentOnce) {
  std::mt19937 rng(7);
  const int32_t E = 9, K = 3;
  const int64_t T = 23;
  std::vector<int32_t> ids(static_cast<size_t>(T * K));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> perm(E);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::copy_n(perm.begin(), K, ids.begin() + t * K);
  }
  expert_groups g;
  group_by_expert(ids.data(), T, K, E, g);
  ASSERT_EQ(g.offset.back(), T * K);
  for (int64_t i = 0; i < T * K; ++i) {
    const int32_t a = g.index[static_cast<size_t>(i)];
    const int32_t e = ids[static_cast<size_t>(i)];
    EXPECT_GE(a, g.offset[static_cast<size_t>(e)]);
    EXPECT_LT(a, g.offset[static_cast<size_t>(e) + 1]);
    EXPECT_EQ(g.row[static_cast<size_t>(a)], i / K);
    EXPECT_EQ(g.expert[static_cast<size_t>(a)], e);
  }
  for (int32_t e = 0; e < E; ++e) {
    const bool used = std::find(ids.begin(), ids.end(), e) != ids.end();
    EXPECT_EQ(used, std::find(g.active.begin(), g.active.end(), e) != g.active.end());
    for (int32_t a = g.offset[static_cast<size_t>(e)] + 1; a < g.offset[static_cast<size_t>(e) + 1]; ++a) {
      EXPECT_LT(g.row[static_cast<size_t>(a) - 1], g.row[static_cast<size_t>(a)]) << "rows ascend within an expert";
    }
  }
}

constexpr uint32_t k_embd = 64, k_ff_exp = 32, k_expert = 8, k_used = 3;

// Q8_0 bytes of values (a multiple of 32): per block an f16 scale and 32 int8.
std::vector<uint8_t> q8_0(const std::vector<float>& v) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < v.size(); b += 32) {
    float amax = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[b + i]));
    const float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
    const uint16_t h = kernels::f32_to_fp16(d);
    out.push_back(static_cast<uint8_t>(h & 0xff));
    out.push_back(static_cast<uint8_t>(h >> 8));
    for (size_t i = 0; i < 32; ++i) out.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::lround(v[b + i] * id))));
  }
  return out;
}

// MXFP4 bytes of values (a multiple of 32), quantized as ggml's reference quantizer
// does: per block the E8M0 exponent e = floor(log2(amax)) - 2 + 127 (0 when amax == 0),
// then each value's nearest code book entry at scale 2^(e - 128) (the first on a tie).
std::vector<uint8_t> mxfp4(const std::vector<float>& v) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < v.size(); b += 32) {
    float amax = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[b + i]));
    const uint8_t e = amax > 0 ? static_cast<uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : 0;
    const float d = kernels::e8m0_half_to_f32(e);
    auto nearest = [&](float x) {
      int best = 0;
      for (int i = 1; i < 16; ++i)
        if (std::fabs(kernels::mxfp4_values[i] * d - x) < std::fabs(kernels::mxfp4_values[best] * d - x)) best = i;
      return best;
    };
    out.push_back(e);
    for (size_t i = 0; i < 16; ++i) out.push_back(static_cast<uint8_t>(nearest(v[b + i]) | nearest(v[b + 16 + i]) << 4));
  }
  return out;
}

std::vector<float> random_values(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// type: g_f32, g_q8_0 or g_mxfp4.
void add_tensor(gguf_builder& b, const std::string& name, std::vector<uint64_t> dims, const std::vector<float>& v,
                uint32_t type) {
  testing::tensor_spec t{name, std::move(dims), type, {}, std::nullopt};
  if (type == testing::g_q8_0) {
    t.data = q8_0(v);
  } else if (type == testing::g_mxfp4) {
    t.data = mxfp4(v);
  } else {
    t.data.resize(v.size() * 4);
    std::memcpy(t.data.data(), v.data(), t.data.size());
  }
  b.tensor(std::move(t));
}

// A one-layer qwen3moe image: qwen3 attention, a router and 8 experts of 32 (of type expert_type).
gguf_builder tiny_qwen3moe(uint32_t expert_type = testing::g_q8_0) {
  testing::tiny_llama_params p;
  p.arch = "qwen3moe";
  p.n_embd = k_embd;
  auto b = testing::tiny_llama(p);
  b.erase_tensor("blk.0.ffn_gate.weight").erase_tensor("blk.0.ffn_up.weight").erase_tensor("blk.0.ffn_down.weight");
  b.erase_kv("qwen3moe.feed_forward_length");
  b.kv_u32("qwen3moe.expert_count", k_expert).kv_u32("qwen3moe.expert_used_count", k_used);
  b.kv_u32("qwen3moe.expert_feed_forward_length", k_ff_exp);
  const uint64_t hd = p.n_embd / p.n_head;
  b.tensor_f32("blk.0.attn_q_norm.weight", {hd}, 0.1f).tensor_f32("blk.0.attn_k_norm.weight", {hd}, 0.1f);
  const uint32_t et = expert_type;
  add_tensor(b, "blk.0.ffn_gate_inp.weight", {k_embd, k_expert}, random_values(k_embd * k_expert, 0.5f, 1), testing::g_f32);
  add_tensor(b, "blk.0.ffn_gate_exps.weight", {k_embd, k_ff_exp, k_expert}, random_values(k_embd * k_ff_exp * k_expert, 0.2f, 2), et);
  add_tensor(b, "blk.0.ffn_up_exps.weight", {k_embd, k_ff_exp, k_expert}, random_values(k_embd * k_ff_exp * k_expert, 0.2f, 3), et);
  add_tensor(b, "blk.0.ffn_down_exps.weight", {k_ff_exp, k_embd, k_expert}, random_values(k_embd * k_ff_exp * k_expert, 0.2f, 4), et);
  return b;
}

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

std::string error_of(const gguf_builder& b) {
  auto p = parse(b);
  try {
    load_model_weights(*p.f, read_model_config(*p.f), kernels::isa_level::scalar);
  } catch (const gguf_error& e) {
    return e.what();
  }
  return "";
}

TEST(MoeConfig, Qwen3MoeReadsItsKeysAndExperts) {
  auto p = parse(tiny_qwen3moe());
  const auto c = read_model_config(*p.f);
  EXPECT_TRUE(c.is_moe());
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.n_expert, 8);
  EXPECT_EQ(c.n_expert_used, 3);
  EXPECT_EQ(c.n_ff_exp, 32);
  const auto w = load_model_weights(*p.f, c, kernels::isa_level::scalar);
  ASSERT_EQ(w.layers[0].exp_gate.size(), 8u);
  EXPECT_EQ(w.layers[0].exp_down[7].n_out(), 64);
  EXPECT_EQ(w.layers[0].router.n_out(), 8);
}

TEST(MoeConfig, BadExpertKeysAndTensorsAreNamed) {
  auto no_count = tiny_qwen3moe();
  no_count.erase_kv("qwen3moe.expert_count");
  EXPECT_NE(error_of(no_count).find("'qwen3moe.expert_count'"), std::string::npos) << error_of(no_count);
  auto too_many = tiny_qwen3moe();
  too_many.erase_kv("qwen3moe.expert_used_count").kv_u32("qwen3moe.expert_used_count", 9);
  EXPECT_NE(error_of(too_many).find("expert_used_count"), std::string::npos) << error_of(too_many);
  auto no_exps = tiny_qwen3moe();
  no_exps.erase_tensor("blk.0.ffn_up_exps.weight");
  EXPECT_NE(error_of(no_exps).find("'blk.0.ffn_up_exps.weight'"), std::string::npos) << error_of(no_exps);
  // A dense architecture with experts is refused, naming the key.
  testing::tiny_llama_params q;
  q.arch = "qwen3";
  auto dense = testing::tiny_llama(q);
  dense.kv_u32("qwen3.expert_count", 8);
  EXPECT_NE(error_of(dense).find("'qwen3.expert_count'"), std::string::npos) << error_of(dense);
  // Mixtral-style llama: old files with one tensor per expert get a clear message.
  auto mixtral = testing::tiny_llama();
  mixtral.kv_u32("llama.expert_count", 4).kv_u32("llama.expert_used_count", 2);
  mixtral.erase_tensor("blk.0.ffn_gate.weight").tensor_f32("blk.0.ffn_gate.0.weight", {32, 64});
  EXPECT_NE(error_of(mixtral).find("separate tensors"), std::string::npos) << error_of(mixtral);
}

// ---- the block against the per-row reference ----

// Parameter: the ISA level and the experts' GGML type (g_q8_0, g_mxfp4).
class MoeFfn : public ::testing::TestWithParam<std::tuple<kernels::isa_level, uint32_t>> {
 protected:
  void SetUp() override {
    const auto [level, expert_type] = GetParam();
    if (!kernels::cpu_supports(level)) GTEST_SKIP() << "CPU lacks the level";
    img_ = parse(tiny_qwen3moe(expert_type));
    cfg_ = read_model_config(*img_.f);
    w_ = load_model_weights(*img_.f, cfg_, level);
    ASSERT_EQ(uint32_t(w_.layers[0].exp_up[0].type()), expert_type);
  }

  // tmp rows of blocks::moe_ffn on rows x [T x n_embd].
  std::vector<float> run(const std::vector<float>& x, int64_t T, moe_workspace& ws) {
    thread_pool pool(2);
    projector proj(pool);
    kv_cache kv(cfg_, 1, 16, kernels::kv_dtype::f16);
    op_timeline timeline(pool, cfg_.n_layer);
    forward_batch batch;
    ws.reserve(cfg_, T, pool.n_threads());
    size_t act = kernels::act_bytes(w_.layers[0].router, T);
    for (const auto& e : w_.layers[0].exp_gate) act = std::max(act, kernels::act_bytes(e, T * cfg_.n_expert_used));
    for (const auto& e : w_.layers[0].exp_down) act = std::max(act, kernels::act_bytes(e, T * cfg_.n_expert_used));
    proj.reserve(act);
    std::vector<float> xs = x, xn(x.size()), tmp(x.size());
    const forward_step s{.cfg = cfg_, .w = w_, .kv = kv, .pool = pool, .proj = proj, .timeline = timeline,
                         .batch = batch, .tokens = nullptr, .n_tokens = T, .logit_rows = nullptr, .n_logit_rows = 0,
                         .hidden_rows = nullptr, .n_hidden_rows = 0, .logits = nullptr, .hidden = nullptr,
                         .x = xs.data(), .xn = xn.data(), .q = nullptr, .k = nullptr, .v = nullptr, .attn = nullptr,
                         .tmp = tmp.data(), .gate = nullptr, .up = nullptr, .rope = nullptr, .rope_swa = nullptr,
                         .scratch = nullptr, .scratch_per_thread = 0, .moe = &ws, .lora = nullptr};
    blocks::moe_ffn(s, {}, w_.layers[0]);
    return tmp;
  }

  // Dequantized expert matrix e of tensor `name` ([n_out x n_in] row-major).
  std::vector<float> dense(const std::string& name, int64_t e, int64_t n_in, int64_t n_out) const {
    const gguf_tensor_info* t = img_.f->find_tensor(name);
    const int64_t row = kernels::row_bytes(*kernels::traits_of(t->type), n_in);
    std::vector<float> out(static_cast<size_t>(n_in * n_out));
    for (int64_t r = 0; r < n_out; ++r) {
      kernels::dequantize_row(static_cast<kernels::ggml_type>(t->type), t->data + (e * n_out + r) * row,
                              out.data() + r * n_in, n_in);
    }
    return out;
  }

  // One row's output per the contract, in double; chosen receives its experts.
  std::vector<double> reference(const float* x, std::vector<int32_t>& chosen) const {
    const int D = cfg_.n_embd, F = cfg_.n_ff_exp, E = cfg_.n_expert, K = cfg_.n_expert_used;
    double ss = 0;
    for (int d = 0; d < D; ++d) ss += double(x[d]) * x[d];
    const double inv = 1.0 / std::sqrt(ss / D + cfg_.rms_eps);
    std::vector<double> xn(D);
    for (int d = 0; d < D; ++d) xn[d] = x[d] * inv * w_.layers[0].ffn_norm[static_cast<size_t>(d)];
    const auto router = dense("blk.0.ffn_gate_inp.weight", 0, D, E);
    std::vector<double> p(E);
    for (int e = 0; e < E; ++e) {
      for (int d = 0; d < D; ++d) p[e] += router[static_cast<size_t>(e * D + d)] * xn[d];
    }
    const double mx = *std::max_element(p.begin(), p.end());
    double sum = 0;
    for (double& v : p) sum += (v = std::exp(v - mx));
    std::vector<int32_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    chosen.assign(order.begin(), order.begin() + K);
    double chosen_sum = 0;
    for (int32_t e : chosen) chosen_sum += p[e];
    std::vector<double> out(D, 0.0);
    for (int32_t e : chosen) {
      const auto g = dense("blk.0.ffn_gate_exps.weight", e, D, F), u = dense("blk.0.ffn_up_exps.weight", e, D, F);
      const auto dn = dense("blk.0.ffn_down_exps.weight", e, F, D);
      std::vector<double> h(F);
      for (int f = 0; f < F; ++f) {
        double a = 0, b = 0;
        for (int d = 0; d < D; ++d) {
          a += g[static_cast<size_t>(f * D + d)] * xn[d];
          b += u[static_cast<size_t>(f * D + d)] * xn[d];
        }
        h[f] = a / (1.0 + std::exp(-a)) * b;
      }
      for (int d = 0; d < D; ++d) {
        double y = 0;
        for (int f = 0; f < F; ++f) y += dn[static_cast<size_t>(d * F + f)] * h[f];
        out[d] += p[e] / chosen_sum * y;
      }
    }
    return out;
  }

  parsed img_;
  model_config cfg_;
  model_weights w_;
};

TEST_P(MoeFfn, MatchesThePerRowReference) {
  const int64_t T = 17;
  const auto x = random_values(static_cast<size_t>(T) * k_embd, 1.0f, 11);
  moe_workspace ws;
  const auto got = run(x, T, ws);
  std::set<int32_t> experts_used;
  double worst = 0, scale = 0;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> chosen;
    const auto want = reference(x.data() + t * k_embd, chosen);
    std::vector<int32_t> ids(ws.ids.begin() + t * k_used, ws.ids.begin() + (t + 1) * k_used);
    EXPECT_EQ(ids, chosen) << "row " << t << " routed differently";
    experts_used.insert(ids.begin(), ids.end());
    for (int d = 0; d < static_cast<int>(k_embd); ++d) {
      worst = std::max(worst, std::fabs(want[static_cast<size_t>(d)] - got[static_cast<size_t>(t * k_embd + d)]));
      scale = std::max(scale, std::fabs(want[static_cast<size_t>(d)]));
    }
  }
  EXPECT_GE(experts_used.size(), 6u) << "the test should route rows to most experts";
  // Q8_0 / MXFP4 weights are exact in the reference; the activations' int8 rounding is the error.
  EXPECT_LT(worst, 0.02 * scale) << "worst " << worst << " of " << scale;
}

TEST_P(MoeFfn, GroupedRowsEqualEachRowAlone) {
  const int64_t T = 13;
  const auto x = random_values(static_cast<size_t>(T) * k_embd, 1.0f, 12);
  moe_workspace ws;
  const auto batched = run(x, T, ws);
  for (int64_t t = 0; t < T; ++t) {
    moe_workspace one;
    const std::vector<float> row(x.begin() + t * k_embd, x.begin() + (t + 1) * k_embd);
    const auto alone = run(row, 1, one);
    EXPECT_EQ(0, std::memcmp(alone.data(), batched.data() + t * k_embd, k_embd * sizeof(float))) << "row " << t;
  }
}

TEST_P(MoeFfn, ADecodeRowRunsOnlyItsExperts) {
  const auto x = random_values(k_embd, 1.0f, 13);
  moe_workspace ws;
  run(x, 1, ws);
  ASSERT_EQ(ws.groups.active.size(), size_t{k_used});
  std::set<const kernels::packed_weight*> ran, chosen;
  for (const auto& j : ws.jobs) ran.insert(j.w);
  for (int32_t j = 0; j < static_cast<int32_t>(k_used); ++j) chosen.insert(&w_.layers[0].exp_down[static_cast<size_t>(ws.ids[j])]);
  EXPECT_EQ(ran, chosen) << "the down projection ran experts the row did not choose";
}

INSTANTIATE_TEST_SUITE_P(Levels, MoeFfn,
                         ::testing::Combine(::testing::Values(kernels::isa_level::scalar, kernels::isa_level::avx2,
                                                              kernels::isa_level::avx512),
                                            ::testing::Values(uint32_t{testing::g_q8_0}, uint32_t{testing::g_mxfp4})),
                         [](const auto& i) {
                           return std::string(kernels::isa_short_name(std::get<0>(i.param))) + "_" +
                                  kernels::type_name(std::get<1>(i.param));
                         });

}  // namespace
}  // namespace spate
