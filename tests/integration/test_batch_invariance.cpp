// Batch invariance on the real model, and on the random-weight mixture-of-
// experts models (tests/reference/make_random_models.py, in
// SPATE_RANDOM_MODELS_DIR), whose rows share experts within a step: a
// sequence's logits are bitwise the same whether it runs alone, batched with
// others, staggered (prefill next to decodes), chunked, or on a different
// number of threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>

#include "model_fixture.h"

namespace spate::testing {
namespace {

struct seq_run {
  std::vector<int32_t> tokens;        // prompt, then generated
  int32_t n_prompt = 0;
  int32_t n_cached = 0;
  int32_t start_step = 0;             // step at which it joins
  std::vector<std::vector<float>> logits;  // one row per sampled token
};

const std::vector<std::vector<int32_t>>& prompts(const tokenizer& tok) {
  static const std::vector<std::vector<int32_t>> p = {
      tok.encode("The capital of France is", true),
      tok.encode("<|im_start|>user\nWrite a short poem about rain.<|im_end|>\n<|im_start|>assistant\n", true),
      tok.encode("def quicksort(xs):\n    if len(xs) <= 1:\n        return xs\n", true),
      tok.encode("1, 1, 2, 3, 5, 8, 13,", true),
      tok.encode("Hello", true),
  };
  return p;
}

// Runs every sequence to n_gen greedy tokens. chunk: max prompt tokens fed per
// step (0 = whole prompt); starts: step at which each sequence joins.
std::vector<seq_run> run(runner_env& env, const std::vector<size_t>& which, int n_gen, int32_t chunk,
                         const std::vector<int32_t>& starts) {
  const auto& all = prompts(*env.model.tok);
  const int32_t n_vocab = env.model.config.n_vocab;
  std::vector<seq_run> seqs;
  std::vector<block_table> tables;
  for (size_t i = 0; i < which.size(); ++i) {
    seq_run s;
    s.tokens = all[which[i]];
    s.n_prompt = static_cast<int32_t>(s.tokens.size());
    s.start_step = starts.empty() ? 0 : starts[i];
    seqs.push_back(std::move(s));
    tables.emplace_back(env.blocks);
    EXPECT_TRUE(tables.back().grow_to(seqs.back().n_prompt + n_gen + 1, env.kv.block_size()));
  }
  std::vector<float> logits;
  for (int32_t step = 0;; ++step) {
    forward_batch b;
    std::vector<size_t> in_batch;
    bool pending = false;
    for (size_t i = 0; i < seqs.size(); ++i) {
      auto& s = seqs[i];
      if (static_cast<int>(s.logits.size()) >= n_gen) continue;
      pending = true;
      if (step < s.start_step) continue;
      int32_t n_new = static_cast<int32_t>(s.tokens.size()) - s.n_cached;
      if (chunk > 0) n_new = std::min(n_new, chunk);
      const bool samples = s.n_cached + n_new == static_cast<int32_t>(s.tokens.size());
      b.seqs.push_back({std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(s.n_cached), static_cast<size_t>(n_new)),
                        s.n_cached, tables[i].ids(), samples ? 1 : 0});
      in_batch.push_back(i);
    }
    if (!pending) break;
    if (b.seqs.empty()) continue;
    logits.assign(static_cast<size_t>(b.n_logit_rows()) * static_cast<size_t>(n_vocab), 0.0f);
    env.runner.forward(b, logits.data());
    size_t row = 0;
    for (size_t k = 0; k < in_batch.size(); ++k) {
      auto& s = seqs[in_batch[k]];
      s.n_cached += static_cast<int32_t>(b.seqs[k].tokens.size());
      if (b.seqs[k].n_logits == 0) continue;
      const float* l = logits.data() + row++ * static_cast<size_t>(n_vocab);
      s.logits.emplace_back(l, l + n_vocab);
      s.tokens.push_back(static_cast<int32_t>(std::max_element(l, l + n_vocab) - l));
    }
  }
  return seqs;
}

void expect_bitwise_equal(const seq_run& a, const seq_run& b, const char* what) {
  ASSERT_EQ(a.tokens, b.tokens) << what;
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  for (size_t i = 0; i < a.logits.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(a.logits[i].data(), b.logits[i].data(), a.logits[i].size() * sizeof(float)))
        << what << ": logits differ at generated position " << i;
  }
}

constexpr int k_gen = 12;

// The model of a test: "default" (SPATE_MODEL), else random-<name>.gguf in SPATE_RANDOM_MODELS_DIR.
class BatchInvariance : public ::testing::TestWithParam<std::string> {
 protected:
  loaded_model& model() {
    if (GetParam() == "default") return shared_model();
    const char* d = std::getenv("SPATE_RANDOM_MODELS_DIR");
    if (d == nullptr || *d == 0) {
      ADD_FAILURE() << "SPATE_RANDOM_MODELS_DIR is not set (python3 tests/reference/make_random_models.py --out-dir DIR)";
      std::abort();
    }
    return shared_model_at(std::string(d) + "/random-" + GetParam() + ".gguf", "tests/reference/make_random_models.py");
  }
};

// Alone, batched, staggered, chunked and reversed runs of the five prompts give the same bits.
void expect_alone_equals_batched(loaded_model& m, kernels::kv_dtype dtype) {
  runner_env env(m, 1024, 16, 2, dtype);
  std::vector<seq_run> alone;
  for (size_t i = 0; i < 5; ++i) alone.push_back(run(env, {i}, k_gen, 0, {})[0]);

  const auto together = run(env, {0, 1, 2, 3, 4}, k_gen, 0, {});
  for (size_t i = 0; i < 5; ++i) expect_bitwise_equal(alone[i], together[i], "batched");

  // Prefills join while others decode: mixed batches.
  const auto staggered = run(env, {0, 1, 2, 3, 4}, k_gen, 0, {0, 3, 5, 6, 9});
  for (size_t i = 0; i < 5; ++i) expect_bitwise_equal(alone[i], staggered[i], "staggered");

  // Chunked prefill: at most 5 prompt tokens per step, mixed with decodes.
  const auto chunked = run(env, {0, 1, 2, 3, 4}, k_gen, 5, {0, 1, 2, 3, 4});
  for (size_t i = 0; i < 5; ++i) expect_bitwise_equal(alone[i], chunked[i], "chunked");

  // Reversed order in the batch.
  const auto reversed = run(env, {4, 3, 2, 1, 0}, k_gen, 0, {});
  for (size_t i = 0; i < 5; ++i) expect_bitwise_equal(alone[4 - i], reversed[i], "reversed");
}

// Block sizes 4 and 32 (16 above) give the same bits.
void expect_block_size_invariant(loaded_model& m, kernels::kv_dtype dtype) {
  runner_env small(m, 2048, 4, 2, dtype);
  runner_env large(m, 256, 32, 2, dtype);
  const auto a = run(small, {1, 2}, 6, 0, {});
  const auto b = run(large, {1, 2}, 6, 0, {});
  for (size_t i = 0; i < 2; ++i) expect_bitwise_equal(a[i], b[i], "block size");
}

TEST_P(BatchInvariance, AloneVersusBatchedStaggeredChunkedAndThreads) {
  expect_alone_equals_batched(model(), kernels::kv_dtype::f16);
}

TEST_P(BatchInvariance, ThreadCountDoesNotChangeLogits) {
  runner_env one(model(), 256, 16, 1);
  runner_env two(model(), 256, 16, 2);
  const auto a = run(one, {1, 3}, 6, 0, {});
  const auto b = run(two, {1, 3}, 6, 0, {});
  for (size_t i = 0; i < 2; ++i) expect_bitwise_equal(a[i], b[i], "threads");
}

TEST_P(BatchInvariance, BlockSizeDoesNotChangeLogits) { expect_block_size_invariant(model(), kernels::kv_dtype::f16); }

INSTANTIATE_TEST_SUITE_P(Models, BatchInvariance, ::testing::Values("default", "qwen3moe", "qwen3moe-mixed", "llama-moe", "gpt-oss"),
                         [](const auto& i) {
                           std::string n = i.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The quantized KV cache dtypes (and f32) under the same checks, on the default model and on the
// random gpt-oss (attention sinks, sliding-window layers).
class BatchInvarianceKvDtype : public ::testing::TestWithParam<std::tuple<std::string, kernels::kv_dtype>> {
 protected:
  loaded_model& model() {
    const std::string& name = std::get<0>(GetParam());
    if (name == "default") return shared_model();
    const char* d = std::getenv("SPATE_RANDOM_MODELS_DIR");
    if (d == nullptr || *d == 0) {
      ADD_FAILURE() << "SPATE_RANDOM_MODELS_DIR is not set (python3 tests/reference/make_random_models.py --out-dir DIR)";
      std::abort();
    }
    return shared_model_at(std::string(d) + "/random-" + name + ".gguf", "tests/reference/make_random_models.py");
  }
  kernels::kv_dtype dtype() const { return std::get<1>(GetParam()); }
};

TEST_P(BatchInvarianceKvDtype, AloneVersusBatchedStaggeredChunked) { expect_alone_equals_batched(model(), dtype()); }
TEST_P(BatchInvarianceKvDtype, BlockSizeDoesNotChangeLogits) { expect_block_size_invariant(model(), dtype()); }

INSTANTIATE_TEST_SUITE_P(Models, BatchInvarianceKvDtype,
                         ::testing::Combine(::testing::Values("default", "gpt-oss"),
                                            ::testing::Values(kernels::kv_dtype::f32, kernels::kv_dtype::q8_0,
                                                              kernels::kv_dtype::fp8_e5m2)),
                         [](const auto& i) {
                           std::string n = std::get<0>(i.param) + "_" + kernels::kv_dtype_name(std::get<1>(i.param));
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace spate::testing
