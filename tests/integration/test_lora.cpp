// LoRA adapters on the real default model (model/lora.h): an adapter changes
// the logits, and a sequence's logits are bitwise the same alone, batched with
// base rows, batched with another adapter's rows, and chunked.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "model/lora.h"
#include "model/model_weights.h"
#include "model_fixture.h"

namespace spate::testing {
namespace {

// Random F32 adapters of rank `rank` on every adapted weight, whose data
// lives as long as the test binary (the scalar level points into it).
std::shared_ptr<const lora_adapter> random_adapter(const loaded_model& m, int32_t rank, uint32_t seed) {
  static std::vector<std::unique_ptr<std::vector<float>>> keep;
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  auto ad = std::make_shared<lora_adapter>();
  ad->alpha = static_cast<float>(2 * rank);
  ad->max_rank = rank;
  ad->layers.resize(m.weights.layers.size());
  for (size_t l = 0; l < m.weights.layers.size(); ++l) {
    const layer_weights& L = m.weights.layers[l];
    const kernels::packed_weight* base[] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down};
    for (int t = 0; t < k_lora_targets; ++t) {
      auto a = std::make_unique<std::vector<float>>(static_cast<size_t>(rank * base[t]->n_in()));
      auto b = std::make_unique<std::vector<float>>(static_cast<size_t>(base[t]->n_out() * rank));
      for (float& v : *a) v = dist(rng);
      for (float& v : *b) v = dist(rng);
      auto mat = std::make_unique<lora_matrix>();
      mat->a = kernels::pack_weight(kernels::ggml_type::f32, a->data(), rank, base[t]->n_in(), kernels::active_isa());
      mat->n_out = base[t]->n_out();
      mat->bt = *b;  // any [rank x n_out] values will do
      mat->scale = ad->alpha / static_cast<float>(rank);
      ad->layers[l][static_cast<size_t>(t)] = std::move(mat);
      keep.push_back(std::move(a));
      keep.push_back(std::move(b));
    }
  }
  return ad;
}

struct lora_seq {
  std::vector<int32_t> tokens;
  int32_t adapter = -1;
  int32_t start_step = 0;
  std::vector<std::vector<float>> logits;  // per step that sampled
};

// Runs the sequences for n_steps greedy tokens each; chunk: prompt tokens per step (0: whole).
void run(runner_env& env, std::vector<lora_seq>& seqs, int n_gen, int32_t chunk) {
  const int32_t V = env.model.config.n_vocab;
  std::vector<block_table> tables;
  std::vector<int32_t> cached(seqs.size(), 0);
  for (auto& s : seqs) {
    tables.emplace_back(env.blocks);
    ASSERT_TRUE(tables.back().grow_to(static_cast<int32_t>(s.tokens.size()) + n_gen + 1, env.kv.block_size()));
  }
  std::vector<float> logits;
  for (int32_t step = 0;; ++step) {
    forward_batch b;
    std::vector<size_t> in;
    bool pending = false;
    for (size_t i = 0; i < seqs.size(); ++i) {
      auto& s = seqs[i];
      if (static_cast<int>(s.logits.size()) >= n_gen) continue;
      pending = true;
      if (step < s.start_step) continue;
      int32_t n_new = static_cast<int32_t>(s.tokens.size()) - cached[i];
      if (chunk > 0) n_new = std::min(n_new, chunk);
      const bool samples = cached[i] + n_new == static_cast<int32_t>(s.tokens.size());
      forward_seq f{std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(cached[i]), static_cast<size_t>(n_new)), cached[i],
                    tables[i].ids(), samples ? 1 : 0};
      f.adapter = s.adapter;
      b.seqs.push_back(f);
      in.push_back(i);
    }
    if (!pending) break;
    if (b.seqs.empty()) continue;
    logits.assign(static_cast<size_t>(b.n_logit_rows() * V), 0.0f);
    env.runner.forward(b, logits.data());
    size_t row = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      auto& s = seqs[in[k]];
      cached[in[k]] += static_cast<int32_t>(b.seqs[k].tokens.size());
      if (b.seqs[k].n_logits == 0) continue;
      const float* l = logits.data() + row++ * static_cast<size_t>(V);
      s.logits.emplace_back(l, l + V);
      s.tokens.push_back(static_cast<int32_t>(std::max_element(l, l + V) - l));
    }
  }
}

TEST(Lora, MixedAdapterBatchEqualsEachAloneBitwise) {
  runner_env env(512);
  const tokenizer& tok = *env.model.tok;
  env.runner.set_adapter(0, random_adapter(env.model, 16, 1));
  env.runner.set_adapter(1, random_adapter(env.model, 8, 2));
  const std::vector<int32_t> p1 = tok.encode("The capital of France is", true);
  const std::vector<int32_t> p2 = tok.encode("def quicksort(xs):\n    if len(xs) <= 1:", true);
  const std::vector<std::pair<std::vector<int32_t>, int32_t>> cases = {{p1, -1}, {p1, 0}, {p2, 1}, {p2, 0}, {p1, 1}};
  const int n_gen = 6;
  std::vector<lora_seq> alone;
  for (const auto& [p, ad] : cases) {
    std::vector<lora_seq> one{{p, ad, 0, {}}};
    run(env, one, n_gen, 0);
    alone.push_back(one[0]);
  }
  // The adapters change the output.
  EXPECT_NE(alone[0].logits[0], alone[1].logits[0]);
  EXPECT_NE(alone[1].logits[0], alone[4].logits[0]);
  for (int32_t chunk : {0, 3}) {
    std::vector<lora_seq> batch;
    for (size_t i = 0; i < cases.size(); ++i) batch.push_back({cases[i].first, cases[i].second, static_cast<int32_t>(i % 3), {}});
    run(env, batch, n_gen, chunk);
    for (size_t i = 0; i < cases.size(); ++i) {
      ASSERT_EQ(batch[i].logits.size(), alone[i].logits.size());
      for (size_t s = 0; s < alone[i].logits.size(); ++s) {
        ASSERT_EQ(0, std::memcmp(batch[i].logits[s].data(), alone[i].logits[s].data(), alone[i].logits[s].size() * sizeof(float)))
            << "sequence " << i << " (adapter " << cases[i].second << "), token " << s << ", chunk " << chunk;
      }
    }
  }
}

TEST(Lora, ForwardRefusesAnEmptySlot) {
  runner_env env(64);
  const std::vector<int32_t> p = env.model.tok->encode("Hello", true);
  block_table table(env.blocks);
  ASSERT_TRUE(table.grow_to(8, env.kv.block_size()));
  forward_batch b;
  forward_seq f{p, 0, table.ids(), 1};
  f.adapter = 5;
  b.seqs.push_back(f);
  std::vector<float> logits(static_cast<size_t>(env.model.config.n_vocab));
  EXPECT_THROW(env.runner.forward(b, logits.data()), std::invalid_argument);
}

}  // namespace
}  // namespace spate::testing
