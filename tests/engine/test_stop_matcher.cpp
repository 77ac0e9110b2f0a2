#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/sampler.h"  // rng, for the randomised comparison

namespace spate {
namespace {

struct run_result {
  std::string emitted;  // everything feed() and flush() returned, concatenated
  std::vector<std::string> pieces;
  bool stopped = false;
  std::optional<size_t> stop_index;
};

run_result run(const std::vector<std::string>& stops, const std::vector<std::string>& deltas) {
  stop_matcher m(stops);
  run_result r;
  for (const auto& d : deltas) {
    auto out = m.feed(d);
    r.emitted += out.text;
    r.pieces.push_back(out.text);
    if (out.stopped) {
      EXPECT_FALSE(r.stopped) << "reported stopped twice";
      r.stopped = true;
      r.stop_index = out.stop_index;
      EXPECT_EQ(out.stop_index, m.stop_index());
    }
  }
  r.emitted += m.flush();
  EXPECT_EQ(r.stopped, m.stopped());
  return r;
}

// Brute-force reference on the whole text: the first byte at which some stop string completes;
// among stops completing there, the longest.
run_result reference(const std::vector<std::string>& stops, const std::string& text) {
  run_result r;
  for (size_t end = 1; end <= text.size(); ++end) {
    std::optional<size_t> best;
    for (size_t i = 0; i < stops.size(); ++i) {
      const auto& s = stops[i];
      if (s.empty() || s.size() > end || text.compare(end - s.size(), s.size(), s) != 0) continue;
      if (!best || s.size() > stops[*best].size()) best = i;
    }
    if (best) {
      r.emitted = text.substr(0, end - stops[*best].size());
      r.stopped = true;
      r.stop_index = best;
      return r;
    }
  }
  r.emitted = text;
  return r;
}

TEST(StopMatcher, EmptyListPassesEverythingThrough) {
  stop_matcher m({});
  EXPECT_EQ(m.feed("Hello").text, "Hello");
  EXPECT_EQ(m.feed(" world").text, " world");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopInsideOneDelta) {
  stop_matcher m({"STOP"});
  auto r = m.feed("Hello STOP world");
  EXPECT_EQ(r.text, "Hello ");
  EXPECT_TRUE(r.stopped);
  ASSERT_TRUE(r.stop_index);
  EXPECT_EQ(*r.stop_index, 0u);
  ASSERT_NE(m.stop_string(), nullptr);
  EXPECT_EQ(*m.stop_string(), "STOP");
  // Nothing after a stop.
  EXPECT_EQ(m.feed("more").text, "");
  EXPECT_FALSE(m.feed("more").stopped);
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, StopSplitAcrossDeltasIsNeverEmitted) {
  auto r = run({"STOP"}, {"Hel", "lo S", "TO", "P and more"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emitted, "Hello ");
  ASSERT_EQ(r.pieces.size(), 4u);
  EXPECT_EQ(r.pieces[0], "Hel");
  EXPECT_EQ(r.pieces[1], "lo ");  // "S" held back
  EXPECT_EQ(r.pieces[2], "");     // "STO" held back
  EXPECT_EQ(r.pieces[3], "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  auto r = run({"STOP"}, {"ST", "ART", "!"});
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.pieces[0], "");
  EXPECT_EQ(r.pieces[1], "START");
  EXPECT_EQ(r.pieces[2], "!");
  EXPECT_EQ(r.emitted, "START!");
}

TEST(StopMatcher, FlushReturnsHeldBackText) {
  stop_matcher m({"</s>"});
  EXPECT_EQ(m.feed("abc </").text, "abc ");
  EXPECT_EQ(m.n_held(), 2u);
  EXPECT_EQ(m.flush(), "</");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.n_held(), 0u);
}

TEST(StopMatcher, StopLongerThanDeltas) {
  const std::string stop = "<|end_of_turn|>";
  std::vector<std::string> deltas = {"Answer: 42"};
  for (size_t i = 0; i < stop.size(); i += 2) deltas.push_back(stop.substr(i, 2));
  deltas.push_back("trailing");
  auto r = run({stop}, deltas);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emitted, "Answer: 42");
  for (size_t i = 1; i < r.pieces.size(); ++i) EXPECT_EQ(r.pieces[i], "") << i;
}

TEST(StopMatcher, SelfOverlappingStop) {
  // "aab" inside "aaab": the held-back suffix must restart correctly.
  auto r = run({"aab"}, {"a", "a", "a", "b"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emitted, "a");
  EXPECT_EQ(r.pieces[2], "a");
}

TEST(StopMatcher, EarliestCompletingStopWins) {
  // "bc" completes before "abcd" does, whether the text comes at once or byte by byte.
  auto whole = run({"abcd", "bc"}, {"xabcd"});
  EXPECT_TRUE(whole.stopped);
  EXPECT_EQ(whole.emitted, "xa");
  EXPECT_EQ(whole.stop_index, 1u);
  auto bytes = run({"abcd", "bc"}, {"x", "a", "b", "c", "d"});
  EXPECT_EQ(bytes.emitted, "xa");
  EXPECT_EQ(bytes.stop_index, 1u);
}

TEST(StopMatcher, SameEndPrefersLongest) {
  auto r = run({"bc", "abc"}, {"xab", "c"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emitted, "x");
  EXPECT_EQ(r.stop_index, 1u);
}

TEST(StopMatcher, OverlappingPrefixesHoldLongestCandidate) {
  // "ab" could start "abc" or "abd": held until resolved either way.
  stop_matcher m({"abc", "abd", "b!"});
  EXPECT_EQ(m.feed("xab").text, "x");
  EXPECT_EQ(m.n_held(), 2u);
  auto r = m.feed("e");
  EXPECT_EQ(r.text, "abe");
  EXPECT_FALSE(r.stopped);
  r = m.feed("ab");
  EXPECT_EQ(r.text, "");
  r = m.feed("d tail");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.stop_index, 1u);
}

TEST(StopMatcher, Utf8StopStrings) {
  // Deltas are whole code points; the stop string starts on a code-point boundary.
  auto r = run({"。\n"}, {"你好", "。", "\n再见"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emitted, "你好");
  auto r2 = run({"。\n"}, {"你好", "。", "再见"});
  EXPECT_FALSE(r2.stopped);
  EXPECT_EQ(r2.emitted, "你好。再见");
  EXPECT_EQ(r2.pieces[1], "");  // "。" held
  EXPECT_EQ(r2.pieces[2], "。再见");
}

TEST(StopMatcher, EmptyStopStringIsIgnored) {
  auto r = run({"", "z"}, {"abc", "dz"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emitted, "abcd");
  EXPECT_EQ(r.stop_index, 1u);
}

TEST(StopMatcher, RandomSplitsMatchWholeTextReference) {
  rng gen(1234);
  auto pick = [&](uint64_t n) { return gen.next_u64() % n; };
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<std::string> stops(1 + pick(3));
    for (auto& s : stops) {
      s.resize(1 + pick(4));
      for (auto& c : s) c = char('a' + pick(3));
    }
    std::string text(pick(40), ' ');
    for (auto& c : text) c = char('a' + pick(3));
    std::vector<std::string> deltas;
    for (size_t i = 0; i < text.size();) {
      const size_t len = std::min(text.size() - i, size_t(1 + pick(6)));
      deltas.push_back(text.substr(i, len));
      i += len;
    }
    const auto want = reference(stops, text);
    const auto got = run(stops, deltas);
    ASSERT_EQ(got.stopped, want.stopped) << "text=" << text;
    ASSERT_EQ(got.emitted, want.emitted) << "text=" << text;
    ASSERT_EQ(got.stop_index, want.stop_index) << "text=" << text;
  }
}

}  // namespace
}  // namespace spate
