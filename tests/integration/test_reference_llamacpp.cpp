// spate against llama.cpp on the default model and on Gemma 3 270M Q4_K_M
// (fixtures made by tests/reference/make_fixtures.py with llama-cpp-python;
// CI does not need it).
//
// Tolerances, stated once. Over every step's top-5 logits (teacher-forced, so
// both engines see the same tokens) up to the first end-of-generation token
// (past it a model is off its training distribution), |spate - llama.cpp| must have
//   SmolLM2: median <= 0.20, 99th percentile <= 0.75, maximum <= 1.50
//   Gemma 3: median <= 0.25, 99th percentile <= 1.20, maximum <= 2.00
// (logits here range to about 30-45). Both engines quantize activations to 8
// bits per 32-block, but llama.cpp also rounds Q and the attention weights to
// f16 inside attention while spate keeps them in f32, and the fixture rounds
// logits to 4 decimals. Measured when this test was written: SmolLM2 median
// 0.127, p99 0.593, max 1.200; Gemma 3 median 0.18, p99 0.93, max 1.55. Gemma's
// wider gap is numeric, not architectural: the random-weight gemma3 model of
// test_reference_random.cpp (the same forward code, F32/Q8_0 weights, a
// 16-position window) agrees within 0.13; its cause in the real model (Q5_0
// weights, head_dim 256, llama.cpp's f16 GELU table) was not isolated.
// Greedy tokens must be identical, step for step, as long as llama.cpp's
//     margin between its best and second-best logit exceeds the model's tie
//     margin; at a closer near-tie either choice is a correct greedy decode of
//     the same model, and the two continuations legitimately diverge from there.
//     The tie margin follows the logit tolerance: 0.5 for SmolLM2; 1.0 for
//     Gemma 3, whose errors reach 1.55. With 0.5, Gemma's number_sequence step
//     10 (llama.cpp margin 0.66) picked the runner-up on an AVX-512 machine
//     (whose attention kernel sums in another order than AVX2's) and llama.cpp's
//     token on an AVX2 one, with the logit errors within tolerance on both. At
//     1.0, 724 of Gemma's 896 steps are still checked (796 at 0.5).
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>

#include "model_fixture.h"

namespace spate::testing {
namespace {

namespace json = boost::json;


struct ref_step {
  int32_t token;
  float logit, margin;
  std::vector<std::pair<int32_t, float>> top5;
};
struct ref_case {
  std::string name, prompt;
  std::vector<int32_t> prompt_ids, generated;
  std::vector<ref_step> steps;
  int first_eog = -1;  // step whose token ends generation, -1 if none
};

// One model and its fixture.
struct model_case {
  const char* name;
  const char* fixture;  // in tests/integration/fixtures
  std::string (*path)();
  const char* fetch_hint;
  double max_median, max_p99, max_error;  // logit tolerances (header)
  float tie_margin;                       // llama.cpp margins at or below this are near-ties (header)
};
void PrintTo(const model_case& m, std::ostream* os) { *os << m.name; }
std::string smollm2_path() { return model_path(); }
const model_case k_models[] = {
    {"smollm2", "smollm2_q4_1_greedy.json", smollm2_path, "scripts/fetch-model.sh", 0.20, 0.75, 1.50, 0.5f},
    {"gemma3", "gemma3_270m_q4_k_m_greedy.json", gemma_model_path, "scripts/fetch-model.sh gemma3-270m", 0.25, 1.20, 2.00, 1.0f},
};

std::vector<ref_case> load_cases(const model_case& mc) {
  const auto text = read_file(std::string(SPATE_SOURCE_DIR) + "/tests/integration/fixtures/" + mc.fixture);
  const auto doc = json::parse(text);
  std::vector<ref_case> out;
  for (const auto& c : doc.at("cases").as_array()) {
    ref_case r;
    r.name = json::value_to<std::string>(c.at("name"));
    r.prompt = json::value_to<std::string>(c.at("prompt"));
    r.prompt_ids = json::value_to<std::vector<int32_t>>(c.at("prompt_ids"));
    r.generated = json::value_to<std::vector<int32_t>>(c.at("generated_ids"));
    if (!c.at("first_eog_step").is_null()) r.first_eog = static_cast<int>(c.at("first_eog_step").to_number<int64_t>());
    for (const auto& s : c.at("steps").as_array()) {
      const auto& a = s.as_array();
      ref_step st;
      st.token = static_cast<int32_t>(a[0].to_number<int64_t>());
      st.logit = static_cast<float>(a[1].to_number<double>());
      st.margin = static_cast<float>(a[2].to_number<double>());
      for (const auto& p : a[3].as_array()) {
        st.top5.emplace_back(static_cast<int32_t>(p.as_array()[0].to_number<int64_t>()),
                             static_cast<float>(p.as_array()[1].to_number<double>()));
      }
      r.steps.push_back(std::move(st));
    }
    out.push_back(std::move(r));
  }
  return out;
}

int32_t argmax(const float* x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) if (x[i] > x[best]) best = i;
  return best;
}

// Runs a sequence: prefill, then one token per step. feed(i) gives the token fed at step i.
template <typename Feed, typename Check>
void run_sequence(runner_env& env, const std::vector<int32_t>& prompt, int n_steps, Feed feed, Check check) {
  const auto& cfg = env.model.config;
  block_table bt(env.blocks);
  ASSERT_TRUE(bt.grow_to(static_cast<int64_t>(prompt.size()) + n_steps + 1, env.kv.block_size()));
  std::vector<float> logits(static_cast<size_t>(cfg.n_vocab));
  forward_batch b;
  b.seqs.push_back({prompt, 0, bt.ids(), 1});
  env.runner.forward(b, logits.data());
  int32_t n_past = static_cast<int32_t>(prompt.size());
  for (int i = 0; i < n_steps; ++i) {
    check(i, logits.data());
    const int32_t tok = feed(i, logits.data());
    b.seqs.clear();
    b.seqs.push_back({std::span<const int32_t>(&tok, 1), n_past++, bt.ids(), 1});
    env.runner.forward(b, logits.data());
  }
}

class ReferenceLlamaCpp : public ::testing::TestWithParam<model_case> {
 protected:
  loaded_model& model() { return shared_model_at(GetParam().path(), GetParam().fetch_hint); }
};

TEST_P(ReferenceLlamaCpp, TokenizerMatchesPromptIds) {
  auto& m = model();
  for (const auto& c : load_cases(GetParam())) {
    EXPECT_EQ(m.tok->encode(c.prompt, true), c.prompt_ids) << c.name;
  }
}

TEST_P(ReferenceLlamaCpp, LogitsWithinToleranceTeacherForced) {
  runner_env env(model(), 512);
  const int32_t n_vocab = env.model.config.n_vocab;
  float worst = 0;
  std::vector<float> errs;
  for (const auto& c : load_cases(GetParam())) {
    float case_worst = 0;
    run_sequence(
        env, c.prompt_ids, static_cast<int>(c.steps.size()),
        [&](int i, const float*) { return c.generated[static_cast<size_t>(i)]; },
        [&](int i, const float* logits) {
          if (c.first_eog >= 0 && i > c.first_eog) return;
          const auto& st = c.steps[static_cast<size_t>(i)];
          for (const auto& [id, ref] : st.top5) {
            const float d = std::fabs(logits[id] - ref);
            worst = std::max(worst, d);
            case_worst = std::max(case_worst, d);
            errs.push_back(d);
          }
          if (st.margin > GetParam().tie_margin) {
            EXPECT_EQ(argmax(logits, n_vocab), st.token) << c.name << " step " << i;
          }
        });
    std::printf("  %-22s max |logit - llama.cpp| %.3f\n", c.name.c_str(), case_worst);
  }
  std::sort(errs.begin(), errs.end());
  auto q = [&](double f) { return errs[static_cast<size_t>(f * static_cast<double>(errs.size() - 1))]; };
  std::printf("|logit - llama.cpp| over top-5 at every step: median %.4f p90 %.4f p99 %.4f max %.4f\n", q(0.5), q(0.9), q(0.99), worst);
  EXPECT_LE(q(0.5), GetParam().max_median);
  EXPECT_LE(q(0.99), GetParam().max_p99);
  EXPECT_LE(worst, GetParam().max_error);
}

TEST_P(ReferenceLlamaCpp, GreedyTokensIdentical) {
  runner_env env(model(), 512);
  const int32_t n_vocab = env.model.config.n_vocab;
  int n_full = 0, n_cases = 0;
  for (const auto& c : load_cases(GetParam())) {
    std::vector<int32_t> ours;
    bool tie_seen = false;
    run_sequence(
        env, c.prompt_ids, static_cast<int>(c.steps.size()),
        [&](int, const float* logits) {
          ours.push_back(argmax(logits, n_vocab));
          return ours.back();
        },
        [](int, const float*) {});
    int matched = 0;
    for (size_t i = 0; i < c.generated.size(); ++i) {
      if (c.steps[i].margin <= GetParam().tie_margin) tie_seen = true;
      if (ours[i] != c.generated[i]) {
        EXPECT_TRUE(tie_seen) << c.name << ": diverged at step " << i << " with llama.cpp margin " << c.steps[i].margin;
        break;
      }
      ++matched;
    }
    ++n_cases;
    if (matched == static_cast<int>(c.generated.size())) ++n_full;
    std::printf("%-20s %2d/%zu greedy tokens identical to llama.cpp\n", c.name.c_str(), matched, c.generated.size());
  }
  std::printf("%d of %d cases identical over all tokens\n", n_full, n_cases);
}

INSTANTIATE_TEST_SUITE_P(Models, ReferenceLlamaCpp, ::testing::ValuesIn(k_models),
                         [](const ::testing::TestParamInfo<model_case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace spate::testing
