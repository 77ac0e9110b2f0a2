// Prometheus metrics registry and text exposition (server/metrics.h).
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_api.h"

namespace spate {
namespace {

// Sample lines "name{labels} value" of an exposition, keyed by "name{labels}".
std::map<std::string, std::string> samples(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    out[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return out;
}

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

engine_event finished(finish_reason why, int32_t prompt, int32_t completion, int64_t queue_us, int64_t ttft_us,
                      std::vector<int64_t> itl_us) {
  engine_event e;
  e.type = engine_event::kind::finished;
  e.reason = why;
  e.usage.prompt_tokens = prompt;
  e.usage.completion_tokens = completion;
  e.metrics.queue_us = queue_us;
  e.metrics.ttft_us = ttft_us;
  e.metrics.itl_us = std::move(itl_us);
  return e;
}

TEST(MetricsHistogram, CumulativeBucketsSumAndCount) {
  histogram h({0.1, 1.0, 10.0});
  for (double v : {0.05, 0.1, 0.5, 1.0, 5.0, 50.0, 1e9}) h.observe(v);
  h.observe(std::nan(""));  // dropped
  const auto s = h.snap();
  ASSERT_EQ(s.cumulative.size(), 4u);
  EXPECT_EQ(s.cumulative[0], 2u);  // 0.05, 0.1 (le is inclusive)
  EXPECT_EQ(s.cumulative[1], 4u);  // + 0.5, 1.0
  EXPECT_EQ(s.cumulative[2], 5u);  // + 5.0
  EXPECT_EQ(s.cumulative[3], 7u);  // + 50, 1e9 (+Inf)
  EXPECT_EQ(s.count, 7u);
  EXPECT_DOUBLE_EQ(s.sum, 0.05 + 0.1 + 0.5 + 1.0 + 5.0 + 50.0 + 1e9);
}

TEST(MetricsHistogram, RejectsBadBounds) {
  EXPECT_THROW(histogram({1.0, 1.0}), std::invalid_argument);
  EXPECT_THROW(histogram({2.0, 1.0}), std::invalid_argument);
  EXPECT_THROW(histogram({1.0, std::numeric_limits<double>::infinity()}), std::invalid_argument);
  EXPECT_NO_THROW(histogram({}));
}

TEST(MetricsHistogram, BucketListsAreIncreasing) {
  for (const auto* b : {&ttft_buckets_s(), &itl_buckets_s(), &request_latency_buckets_s(), &token_count_buckets()}) {
    ASSERT_FALSE(b->empty());
    EXPECT_NO_THROW(histogram{*b});
  }
  EXPECT_EQ(token_count_buckets().front(), 1.0);
  EXPECT_EQ(token_count_buckets().back(), 1e6);
  // vLLM's build_1_2_5_buckets(max_model_len).
  EXPECT_EQ(one_two_five_buckets(64), (std::vector<double>{1, 2, 5, 10, 20, 50}));
  EXPECT_EQ(one_two_five_buckets(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(one_two_five_buckets(8192).back(), 5000.0);
}

TEST(MetricsExposition, FamiliesHaveHelpAndTypeLines) {
  server_metrics m("smol");
  const std::string text = m.render_prometheus();
  const std::vector<std::pair<std::string, std::string>> families = {
      {"spate:num_requests_running", "gauge"},
      {"spate:num_requests_waiting", "gauge"},
      {"spate:kv_cache_usage_perc", "gauge"},
      {"spate:prefix_cache_queries_total", "counter"},
      {"spate:prefix_cache_hits_total", "counter"},
      {"spate:kv_disk_hits_total", "counter"},
      {"spate:kv_disk_misses_total", "counter"},
      {"spate:kv_disk_read_bytes_total", "counter"},
      {"spate:kv_disk_written_bytes_total", "counter"},
      {"spate:kv_disk_evictions_total", "counter"},
      {"spate:kv_disk_errors_total", "counter"},
      {"spate:kv_disk_dropped_blocks_total", "counter"},
      {"spate:kv_disk_usage_bytes", "gauge"},
      {"spate:num_preemptions_total", "counter"},
      {"spate:padding_waste_tokens_total", "counter"},
      {"spate:engine_steps_total", "counter"},
      {"spate:prompt_tokens_total", "counter"},
      {"spate:generation_tokens_total", "counter"},
      {"spate:request_success_total", "counter"},
      {"spate:request_cancelled_total", "counter"},
      {"spate:request_rejected_total", "counter"},
      {"spate:request_errors_total", "counter"},
      {"spate:time_to_first_token_seconds", "histogram"},
      {"spate:inter_token_latency_seconds", "histogram"},
      {"spate:e2e_request_latency_seconds", "histogram"},
      {"spate:request_queue_time_seconds", "histogram"},
      {"spate:request_prompt_tokens", "histogram"},
      {"spate:request_generation_tokens", "histogram"},
      {"spate:request_params_n", "histogram"},
      {"spate:request_params_max_tokens", "histogram"},
  };
  for (const auto& [name, type] : families) {
    SCOPED_TRACE(name);
    const size_t help = text.find("# HELP " + name + " ");
    const size_t type_line = text.find("# TYPE " + name + " " + type + "\n");
    ASSERT_NE(help, std::string::npos);
    ASSERT_NE(type_line, std::string::npos);
    EXPECT_LT(help, type_line);
    // Exactly one TYPE line per family.
    EXPECT_EQ(text.find("# TYPE " + name + " ", type_line + 1), std::string::npos);
  }
  EXPECT_EQ(text.back(), '\n');

  // Every sample line: a known family, the model_name label first, a value.
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line[0] == '#') continue;
    EXPECT_EQ(line.rfind("spate:", 0), 0u) << line;
    EXPECT_TRUE(contains(line, "{model_name=\"smol\"")) << line;
  }
}

TEST(MetricsExposition, InitialValuesAreZero) {
  server_metrics m("smol");
  const auto s = samples(m.render_prometheus());
  EXPECT_EQ(s.at("spate:num_requests_running{model_name=\"smol\"}"), "0.0");
  EXPECT_EQ(s.at("spate:prompt_tokens_total{model_name=\"smol\"}"), "0");
  for (const char* reason : {"stop", "length", "abort"})
    EXPECT_EQ(s.at(std::string("spate:request_success_total{model_name=\"smol\",finished_reason=\"") + reason + "\"}"), "0");
  for (const char* reason : {"invalid", "context_length", "queue_full", "other"})
    EXPECT_EQ(s.at(std::string("spate:request_rejected_total{model_name=\"smol\",reason=\"") + reason + "\"}"), "0");
  EXPECT_EQ(s.at("spate:time_to_first_token_seconds_bucket{model_name=\"smol\",le=\"+Inf\"}"), "0");
  EXPECT_EQ(s.at("spate:time_to_first_token_seconds_sum{model_name=\"smol\"}"), "0.0");
  EXPECT_EQ(s.at("spate:time_to_first_token_seconds_count{model_name=\"smol\"}"), "0");
}

TEST(MetricsExposition, HistogramLinesAreCumulativeWithInf) {
  server_metrics m("smol");
  // TTFT 0.03 s and 3 s; inter-token gaps 2 ms, 2 ms, 0.3 s.
  m.observe_finished(finished(finish_reason::stop, 10, 3, 1000, 30000, {2000, 2000}), 0.2);
  m.observe_finished(finished(finish_reason::length, 5, 2, 0, 3000000, {300000}), 4.0);
  const std::string text = m.render_prometheus();
  const auto s = samples(text);
  const std::string t = "spate:time_to_first_token_seconds";
  const std::string ml = "{model_name=\"smol\",le=\"";
  EXPECT_EQ(s.at(t + "_bucket" + ml + "0.001\"}"), "0");
  EXPECT_EQ(s.at(t + "_bucket" + ml + "0.02\"}"), "0");
  EXPECT_EQ(s.at(t + "_bucket" + ml + "0.04\"}"), "1");
  EXPECT_EQ(s.at(t + "_bucket" + ml + "2.5\"}"), "1");
  EXPECT_EQ(s.at(t + "_bucket" + ml + "5.0\"}"), "2");
  EXPECT_EQ(s.at(t + "_bucket" + ml + "2560.0\"}"), "2");
  EXPECT_EQ(s.at(t + "_bucket" + ml + "+Inf\"}"), "2");
  EXPECT_EQ(s.at(t + "_count{model_name=\"smol\"}"), "2");
  EXPECT_DOUBLE_EQ(std::stod(s.at(t + "_sum{model_name=\"smol\"}")), 3.03);

  const std::string itl = "spate:inter_token_latency_seconds";
  EXPECT_EQ(s.at(itl + "_bucket" + ml + "0.001\"}"), "0");
  EXPECT_EQ(s.at(itl + "_bucket" + ml + "0.0025\"}"), "2");
  EXPECT_EQ(s.at(itl + "_bucket" + ml + "0.3\"}"), "3");
  EXPECT_EQ(s.at(itl + "_count{model_name=\"smol\"}"), "3");

  // Bucket lines appear in increasing le order, +Inf last, then _sum and _count.
  const size_t b1 = text.find(t + "_bucket" + ml + "0.001\"}");
  const size_t b2 = text.find(t + "_bucket" + ml + "0.005\"}");
  const size_t inf = text.find(t + "_bucket" + ml + "+Inf\"}");
  const size_t sum = text.find(t + "_sum{");
  const size_t count = text.find(t + "_count{");
  EXPECT_LT(b1, b2);
  EXPECT_LT(b2, inf);
  EXPECT_LT(inf, sum);
  EXPECT_LT(sum, count);

  // Cumulative: non-decreasing over every le of every histogram.
  std::istringstream in(text);
  std::string line, family;
  uint64_t last = 0;
  while (std::getline(in, line)) {
    const size_t pos = line.find("_bucket{");
    if (pos == std::string::npos) continue;
    const std::string f = line.substr(0, pos);
    const uint64_t v = std::stoull(line.substr(line.rfind(' ') + 1));
    if (f == family) {
      EXPECT_GE(v, last) << line;
    }
    family = f;
    last = v;
  }
}

TEST(MetricsExposition, ObserveFinishedRecordsUsageReasonAndTimings) {
  server_metrics m("smol");
  m.observe_finished(finished(finish_reason::stop, 10, 3, 1000, 30000, {2000, 2000}), 0.2);
  m.observe_finished(finished(finish_reason::length, 5, 2, 500, 40000, {1000}), 0.3);
  // Aborted while waiting: no queue time, no TTFT, but usage and e2e.
  m.observe_finished(finished(finish_reason::abort, 7, 0, 0, 0, {}), 0.1);
  // Generated tokens come from the tokens events (count_generated_tokens), a
  // cancelled request's too; the finished events above add none.
  m.count_generated_tokens(5);
  m.count_generated_tokens(29);
  m.count_generated_tokens(0);
  m.count_cancelled();
  m.count_rejected("queue_full");
  m.count_rejected("context_length");
  m.count_rejected("invalid");
  m.count_rejected("invalid");
  m.count_rejected("something else");
  m.count_error();
  const auto s = samples(m.render_prometheus());
  const std::string ml = "{model_name=\"smol\"}";
  EXPECT_EQ(s.at("spate:prompt_tokens_total" + ml), "22");
  EXPECT_EQ(s.at("spate:generation_tokens_total" + ml), "34");
  EXPECT_EQ(s.at("spate:request_success_total{model_name=\"smol\",finished_reason=\"stop\"}"), "1");
  EXPECT_EQ(s.at("spate:request_success_total{model_name=\"smol\",finished_reason=\"length\"}"), "1");
  EXPECT_EQ(s.at("spate:request_success_total{model_name=\"smol\",finished_reason=\"abort\"}"), "1");
  EXPECT_EQ(s.at("spate:request_cancelled_total" + ml), "1");
  EXPECT_EQ(s.at("spate:request_rejected_total{model_name=\"smol\",reason=\"queue_full\"}"), "1");
  EXPECT_EQ(s.at("spate:request_rejected_total{model_name=\"smol\",reason=\"context_length\"}"), "1");
  EXPECT_EQ(s.at("spate:request_rejected_total{model_name=\"smol\",reason=\"invalid\"}"), "2");
  EXPECT_EQ(s.at("spate:request_rejected_total{model_name=\"smol\",reason=\"other\"}"), "1");
  EXPECT_EQ(s.at("spate:request_errors_total" + ml), "1");
  EXPECT_EQ(s.at("spate:e2e_request_latency_seconds_count" + ml), "3");
  EXPECT_DOUBLE_EQ(std::stod(s.at("spate:e2e_request_latency_seconds_sum" + ml)), 0.6);
  EXPECT_EQ(s.at("spate:request_queue_time_seconds_count" + ml), "2");
  EXPECT_DOUBLE_EQ(std::stod(s.at("spate:request_queue_time_seconds_sum" + ml)), 0.0015);
  EXPECT_EQ(s.at("spate:time_to_first_token_seconds_count" + ml), "2");
  EXPECT_EQ(s.at("spate:inter_token_latency_seconds_count" + ml), "3");
  EXPECT_EQ(s.at("spate:request_prompt_tokens_count" + ml), "3");
  EXPECT_EQ(s.at("spate:request_prompt_tokens_bucket{model_name=\"smol\",le=\"5.0\"}"), "1");
  EXPECT_EQ(s.at("spate:request_prompt_tokens_bucket{model_name=\"smol\",le=\"10.0\"}"), "3");
  EXPECT_EQ(s.at("spate:request_generation_tokens_bucket{model_name=\"smol\",le=\"1.0\"}"), "1");
  EXPECT_EQ(s.at("spate:request_generation_tokens_sum" + ml), "5.0");

  // An error reason in a finished event is an error, not a success.
  m.observe_finished(finished(finish_reason::error, 1, 0, 0, 0, {}), 0.0);
  EXPECT_EQ(samples(m.render_prometheus()).at("spate:request_errors_total" + ml), "2");
}

// vLLM's request_params_n and request_params_max_tokens: n once per prompt,
// max_tokens once per choice, max_tokens buckets up to max_model_len.
TEST(MetricsExposition, RequestParamsHistograms) {
  server_metrics m("smol", 64);
  m.observe_request_params(1, 1, 16);
  m.observe_request_params(2, 3, 64);  // a completions request: 2 prompts, n=3 each
  const auto s = samples(m.render_prometheus());
  const std::string ml = "{model_name=\"smol\"}";
  const auto bucket = [&](const std::string& name, const std::string& le) {
    return s.at(name + "_bucket{model_name=\"smol\",le=\"" + le + "\"}");
  };
  EXPECT_EQ(bucket("spate:request_params_n", "1.0"), "1");
  EXPECT_EQ(bucket("spate:request_params_n", "2.0"), "1");
  EXPECT_EQ(bucket("spate:request_params_n", "5.0"), "3");
  EXPECT_EQ(bucket("spate:request_params_n", "20.0"), "3");
  EXPECT_EQ(s.at("spate:request_params_n_sum" + ml), "7.0");
  EXPECT_EQ(bucket("spate:request_params_max_tokens", "10.0"), "0");
  EXPECT_EQ(bucket("spate:request_params_max_tokens", "20.0"), "1");
  EXPECT_EQ(bucket("spate:request_params_max_tokens", "50.0"), "1");
  EXPECT_EQ(bucket("spate:request_params_max_tokens", "+Inf"), "7");
  EXPECT_EQ(s.count("spate:request_params_max_tokens_bucket{model_name=\"smol\",le=\"100.0\"}"), 0u) << "past max_model_len";
  EXPECT_EQ(s.at("spate:request_params_max_tokens_sum" + ml), "400.0");
  // Without max_model_len the buckets go up to 1,000,000.
  size_t n_buckets = 0;
  for (const auto& [key, value] : samples(server_metrics("smol").render_prometheus()))
    n_buckets += key.rfind("spate:request_params_max_tokens_bucket{", 0) == 0;
  EXPECT_EQ(n_buckets, token_count_buckets().size() + 1);
}

TEST(MetricsExposition, UpdateFromEngine) {
  server_metrics m("smol");
  engine_stats st;
  st.n_running = 3;
  st.n_waiting = 7;
  st.kv_usage = 0.25;
  st.prefix_cache_queries = 1000;
  st.prefix_cache_hits = 640;
  st.n_preemptions = 2;
  st.padding_waste_tokens = 123;
  st.n_steps = 50;
  st.kv_disk_hits = 11;
  st.kv_disk_misses = 12;
  st.kv_disk_read_bytes = 13;
  st.kv_disk_written_bytes = 14;
  st.kv_disk_evictions = 15;
  st.kv_disk_errors = 16;
  st.kv_disk_dropped = 17;
  st.kv_disk_usage_bytes = 4096;
  m.update_from_engine(st);
  auto s = samples(m.render_prometheus());
  const std::string ml = "{model_name=\"smol\"}";
  EXPECT_EQ(s.at("spate:num_requests_running" + ml), "3.0");
  EXPECT_EQ(s.at("spate:num_requests_waiting" + ml), "7.0");
  EXPECT_EQ(s.at("spate:kv_cache_usage_perc" + ml), "0.25");
  EXPECT_EQ(s.at("spate:prefix_cache_queries_total" + ml), "1000");
  EXPECT_EQ(s.at("spate:prefix_cache_hits_total" + ml), "640");
  EXPECT_EQ(s.at("spate:num_preemptions_total" + ml), "2");
  EXPECT_EQ(s.at("spate:padding_waste_tokens_total" + ml), "123");
  EXPECT_EQ(s.at("spate:engine_steps_total" + ml), "50");
  EXPECT_EQ(s.at("spate:kv_disk_hits_total" + ml), "11");
  EXPECT_EQ(s.at("spate:kv_disk_misses_total" + ml), "12");
  EXPECT_EQ(s.at("spate:kv_disk_read_bytes_total" + ml), "13");
  EXPECT_EQ(s.at("spate:kv_disk_written_bytes_total" + ml), "14");
  EXPECT_EQ(s.at("spate:kv_disk_evictions_total" + ml), "15");
  EXPECT_EQ(s.at("spate:kv_disk_errors_total" + ml), "16");
  EXPECT_EQ(s.at("spate:kv_disk_dropped_blocks_total" + ml), "17");
  EXPECT_EQ(s.at("spate:kv_disk_usage_bytes" + ml), "4096.0");

  // Gauges follow the latest snapshot; counters never go backwards (an older
  // snapshot applied late by a racing scrape is ignored).
  engine_stats older = st;
  older.n_running = 1;
  older.kv_usage = 0.0;
  older.prefix_cache_queries = 900;
  older.n_steps = 40;
  m.update_from_engine(older);
  s = samples(m.render_prometheus());
  EXPECT_EQ(s.at("spate:num_requests_running" + ml), "1.0");
  EXPECT_EQ(s.at("spate:kv_cache_usage_perc" + ml), "0.0");
  EXPECT_EQ(s.at("spate:prefix_cache_queries_total" + ml), "1000");
  EXPECT_EQ(s.at("spate:engine_steps_total" + ml), "50");

  st.kv_usage = 1.5;  // clamped to [0, 1]
  m.update_from_engine(st);
  EXPECT_EQ(samples(m.render_prometheus()).at("spate:kv_cache_usage_perc" + ml), "1.0");
}

TEST(MetricsExposition, LabelValuesAreEscapedAndEmptyModelOmitted) {
  server_metrics quoted("a\"b\\c\nd");
  EXPECT_TRUE(contains(quoted.render_prometheus(), "spate:request_errors_total{model_name=\"a\\\"b\\\\c\\nd\"} 0\n"));
  server_metrics unnamed;
  const std::string text = unnamed.render_prometheus();
  EXPECT_TRUE(contains(text, "\nspate:request_errors_total 0\n"));
  EXPECT_TRUE(contains(text, "spate:request_success_total{finished_reason=\"stop\"} 0\n"));
  EXPECT_TRUE(contains(text, "spate:e2e_request_latency_seconds_bucket{le=\"0.001\"} 0\n"));
}

TEST(MetricsConcurrency, ThreadsRecordWhileScraping) {
  server_metrics m("smol");
  constexpr int k_threads = 4, k_per_thread = 5000;
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    do {
      const auto s = samples(m.render_prometheus());
      // Within one histogram, _count always equals the +Inf bucket.
      EXPECT_EQ(s.at("spate:e2e_request_latency_seconds_count{model_name=\"smol\"}"),
                s.at("spate:e2e_request_latency_seconds_bucket{model_name=\"smol\",le=\"+Inf\"}"));
      engine_stats st;
      st.n_steps = 1;
      m.update_from_engine(st);
    } while (!done.load());
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < k_threads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < k_per_thread; ++i) {
        m.observe_finished(finished(i % 2 ? finish_reason::stop : finish_reason::length, 4, 2, 100, 1000 * (t + 1), {500}),
                           0.001 * i);
        m.count_generated_tokens(2);
        if (i % 10 == 0) m.count_cancelled();
        if (i % 100 == 0) m.count_rejected("queue_full");
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  scraper.join();
  const auto s = samples(m.render_prometheus());
  const std::string ml = "{model_name=\"smol\"}";
  const int n = k_threads * k_per_thread;
  EXPECT_EQ(s.at("spate:prompt_tokens_total" + ml), std::to_string(4 * n));
  EXPECT_EQ(s.at("spate:generation_tokens_total" + ml), std::to_string(2 * n));
  EXPECT_EQ(s.at("spate:request_success_total{model_name=\"smol\",finished_reason=\"stop\"}"), std::to_string(n / 2));
  EXPECT_EQ(s.at("spate:request_success_total{model_name=\"smol\",finished_reason=\"length\"}"), std::to_string(n / 2));
  EXPECT_EQ(s.at("spate:request_cancelled_total" + ml), std::to_string(n / 10));
  EXPECT_EQ(s.at("spate:request_rejected_total{model_name=\"smol\",reason=\"queue_full\"}"), std::to_string(n / 100));
  EXPECT_EQ(s.at("spate:time_to_first_token_seconds_count" + ml), std::to_string(n));
  EXPECT_EQ(s.at("spate:inter_token_latency_seconds_count" + ml), std::to_string(n));
  EXPECT_EQ(s.at("spate:e2e_request_latency_seconds_count" + ml), std::to_string(n));
  // Sum of e2e: each thread adds 0.001 * (0 + 1 + ... + k_per_thread-1).
  const double expected = k_threads * 0.001 * (k_per_thread - 1) * k_per_thread / 2.0;
  EXPECT_NEAR(std::stod(s.at("spate:e2e_request_latency_seconds_sum" + ml)), expected, 1e-6 * expected);
}

}  // namespace
}  // namespace spate
