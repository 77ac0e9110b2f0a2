#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "util/trace.h"

namespace spate::trace {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

struct TraceTest : ::testing::Test {
  std::string dir = (std::filesystem::temp_directory_path() / ("spate-trace-test-" + std::to_string(::getpid()))).string();
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override {
    if (enabled()) stop();
    std::filesystem::remove_all(dir);
  }
};

TEST_F(TraceTest, RecordsNothingWithoutASession) {
  EXPECT_FALSE(enabled());
  { scoped_span s("idle", "test"); }
  complete("idle", "test", 0, 1);
  ASSERT_EQ(start(dir), "");
  const session_result r = stop();
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.n_events, 0);
  EXPECT_EQ(read_file(r.path).find("idle"), std::string::npos);
}

TEST_F(TraceTest, WritesSpansOfEachThreadOnItsOwnTrack) {
  ASSERT_EQ(start(dir), "");
  EXPECT_TRUE(enabled());
  EXPECT_NE(start(dir), "") << "a second session while one runs";
  set_thread_name("main \"track\"");
  {
    scoped_span s("step", "engine");
    s.add("batch_size", 3);
    s.add("tokens", -7);
  }
  std::thread t([] {
    set_thread_name("worker 1");
    complete("attention", "worker", 100250, 5007, {{"tasks", 2}});  // ns
  });
  t.join();
  const session_result r = stop();
  EXPECT_FALSE(enabled());
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.n_events, 2);
  EXPECT_EQ(r.n_dropped, 0);
  const std::string json = read_file(r.path);
  EXPECT_EQ(json.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0), 0u);
  EXPECT_NE(json.find("\"name\":\"step\",\"args\":{\"batch_size\":3,\"tokens\":-7}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"ts\":100.250,\"dur\":5.007,\"cat\":\"worker\",\"name\":\"attention\",\"args\":{\"tasks\":2}"), std::string::npos);
  EXPECT_NE(json.find("{\"name\":\"main \\\"track\\\"\"}"), std::string::npos) << "escaped thread name";
  EXPECT_NE(json.find("{\"name\":\"worker 1\"}"), std::string::npos);
  EXPECT_EQ(count(json, "\"ph\":\"X\""), 2u);
  EXPECT_NE(stop().error, "") << "stop without a session";
}

TEST_F(TraceTest, ASessionHoldsOnlyItsOwnSpans) {
  ASSERT_EQ(start(dir), "");
  complete("first", "test", 1, 1);
  const session_result a = stop();
  ASSERT_EQ(start(dir), "");
  complete("second", "test", 2, 1);
  const session_result b = stop();
  EXPECT_NE(a.path, b.path);
  EXPECT_NE(read_file(a.path).find("first"), std::string::npos);
  EXPECT_EQ(read_file(b.path).find("first"), std::string::npos);
  EXPECT_NE(read_file(b.path).find("second"), std::string::npos);
}

TEST_F(TraceTest, BoundsSpansPerThreadAndCountsTheRest) {
  ASSERT_EQ(start(dir), "");
  for (int64_t i = 0; i < k_max_events_per_thread + 5; ++i) complete("x", "test", i, 1);
  const session_result r = stop();
  EXPECT_EQ(r.n_events, k_max_events_per_thread);
  EXPECT_EQ(r.n_dropped, 5);
  EXPECT_NE(read_file(r.path).find("\"dropped_events\":5"), std::string::npos);
}

TEST_F(TraceTest, RefusesAMissingDirectory) {
  EXPECT_NE(start(dir + "/missing"), "");
  EXPECT_FALSE(enabled());
}

TEST_F(TraceTest, LongNamesAreCut) {
  ASSERT_EQ(start(dir), "");
  complete(std::string(100, 'n'), "test", 0, 1);
  const std::string json = read_file(stop().path);
  EXPECT_NE(json.find("\"name\":\"" + std::string(39, 'n') + "\""), std::string::npos);
  EXPECT_EQ(json.find(std::string(40, 'n')), std::string::npos);
}

}  // namespace
}  // namespace spate::trace
