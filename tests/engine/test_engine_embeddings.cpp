// Embedding requests through the engine loop (fake executor, no weights): the
// fake's hidden row of a token is {token, position, 1, 0}, so each pooling's
// result is known exactly. Covers mean, cls and last pooling, L2
// normalization, chunked prompts, batching with generating requests, no
// prefix-cache reuse, preemption, and the context-length refusal.
#include <gtest/gtest.h>

#include <cmath>

#include "engine_loop_harness.h"

namespace spate::test_engine {
namespace {

std::vector<float> normalized(std::vector<double> v) {
  double n = 0;
  for (double x : v) n += x * x;
  std::vector<float> out;
  for (double x : v) out.push_back(static_cast<float>(x / std::sqrt(n)));
  return out;
}

// The expected vector of a prompt under each pooling (fake_executor's hidden rows).
std::vector<float> expected(const std::vector<int32_t>& prompt, pooling_type p) {
  const auto n = static_cast<double>(prompt.size());
  if (p == pooling_type::cls) return normalized({static_cast<double>(prompt[0]), 0.0, 1.0, 0.0});
  if (p == pooling_type::last) return normalized({static_cast<double>(prompt.back()), n - 1, 1.0, 0.0});
  double sum_tok = 0;
  for (int32_t t : prompt) sum_tok += t;
  return normalized({sum_tok / n, (n - 1) / 2, 1.0, 0.0});
}

void expect_near_vec(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

TEST(EngineEmbeddings, EachPoolingGivesItsNormalizedVector) {
  harness h;
  h.start();
  const auto prompt = words("embedding");
  for (pooling_type p : {pooling_type::mean, pooling_type::cls, pooling_type::last}) {
    const submit_result res = h.submit_embed(prompt, p);
    ASSERT_TRUE(res.ok()) << res.error;
    h.eng->wait_idle();
    const request_log r = h.log.get(res.id);
    expect_well_formed(r);
    EXPECT_EQ(r.reason, finish_reason::stop) << pooling_name(p);
    EXPECT_TRUE(r.tokens.empty());
    EXPECT_EQ(r.usage.prompt_tokens, static_cast<int32_t>(prompt.size()));
    EXPECT_EQ(r.usage.completion_tokens, 0);
    expect_near_vec(r.embedding, expected(prompt, p));
  }
  EXPECT_EQ(h.eng->stats().generated_tokens, 0);
  h.expect_drained();
}

TEST(EngineEmbeddings, ChunkedPromptAndBatchedWithGenerationGiveTheSameVector) {
  engine_config c = small_config();
  c.sched.enable_chunked_prefill = true;
  c.sched.max_num_batched_tokens = 3;  // a 12-token prompt runs in 4 chunks
  harness h(c);
  h.start();
  const auto prompt = words("abcdefghijkl");
  const int64_t gen = h.submit_ok(words("other"), 10);
  const submit_result mean = h.submit_embed(prompt, pooling_type::mean);
  const submit_result last = h.submit_embed(prompt, pooling_type::last);
  ASSERT_TRUE(mean.ok() && last.ok());
  h.eng->wait_idle();
  expect_near_vec(h.log.get(mean.id).embedding, expected(prompt, pooling_type::mean));
  expect_near_vec(h.log.get(last.id).embedding, expected(prompt, pooling_type::last));
  // The generating request is unaffected by the embeddings beside it.
  EXPECT_EQ(h.log.get(gen).tokens, expected_tokens(words("other"), 10));
  h.expect_drained();
}

TEST(EngineEmbeddings, NoPrefixCacheReuseButItsBlocksServeOthers) {
  harness h;
  h.start();
  const auto prompt = words("abcdefghijklmnop");  // 16 tokens: 4 full blocks of 4
  h.submit_ok(prompt, 2);
  h.eng->wait_idle();
  const int64_t hits_before = h.eng->stats().prefix_cache_hits;
  const submit_result e = h.submit_embed(prompt, pooling_type::mean);
  ASSERT_TRUE(e.ok());
  h.eng->wait_idle();
  EXPECT_EQ(h.eng->stats().prefix_cache_hits, hits_before);  // every position recomputed
  expect_near_vec(h.log.get(e.id).embedding, expected(prompt, pooling_type::mean));
  h.expect_drained();
}

TEST(EngineEmbeddings, PreemptedMidPromptStartsOver) {
  engine_config c = small_config();
  c.sched.enable_chunked_prefill = true;
  c.sched.max_num_batched_tokens = 4;
  harness h(c, kv_shape{6, 4});  // 24 positions: two long requests cannot both fit
  const auto long_gen = words("abcdefghijkl");
  const auto prompt = words("mnopqrstuvwx");
  // Both are queued before the loop starts: otherwise the generation can
  // finish before the embedding arrives and nothing is preempted.
  const int64_t g = h.submit_ok(long_gen, 10);
  const submit_result e = h.submit_embed(prompt, pooling_type::mean);
  ASSERT_TRUE(e.ok());
  h.start();
  h.eng->wait_idle();
  EXPECT_EQ(h.log.get(g).tokens, expected_tokens(long_gen, 10));
  const request_log r = h.log.get(e.id);
  EXPECT_EQ(r.reason, finish_reason::stop);
  expect_near_vec(r.embedding, expected(prompt, pooling_type::mean));
  EXPECT_GT(h.eng->stats().n_preemptions, 0);
  h.expect_drained();
}

TEST(EngineEmbeddings, OverLongInputIsRefused) {
  harness h;  // max_model_len 64
  h.start();
  const submit_result res = h.submit_embed(std::vector<int32_t>(64, 5), pooling_type::mean);
  EXPECT_FALSE(res.ok());
  EXPECT_EQ(res.why, submit_result::refusal::context_length);
  EXPECT_TRUE(h.submit_embed(std::vector<int32_t>(63, 5), pooling_type::mean).ok());
  h.eng->wait_idle();
  h.expect_drained();
}

}  // namespace
}  // namespace spate::test_engine
