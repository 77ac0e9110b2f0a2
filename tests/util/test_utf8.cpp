// util/utf8: validation, repair and character-boundary helpers.
#include <gtest/gtest.h>

#include "util/utf8.h"

namespace spate {
namespace {

TEST(Utf8, Helpers) {
  EXPECT_TRUE(utf8::is_valid("h\xC3\xA9llo \xF0\x9F\x98\x81"));
  EXPECT_FALSE(utf8::is_valid("\xC0\xAF"));          // overlong
  EXPECT_FALSE(utf8::is_valid("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(utf8::is_valid("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_EQ(utf8::complete_prefix_len("ab\xF0\x9F"), 2u);
  EXPECT_EQ(utf8::complete_prefix_len("ab\xF0\x9F\x98\x81"), 6u);
  EXPECT_EQ(utf8::complete_prefix_len("ab\xE2"), 2u);
  EXPECT_EQ(utf8::complete_prefix_len("ab\xE2\x41"), 4u);
  EXPECT_EQ(utf8::complete_prefix_len("\x80"), 1u);
}

TEST(Utf8, SanitizeReplacesEachMaximalIllFormedSubsequence) {
  EXPECT_EQ(utf8::sanitize("ok"), "ok");
  EXPECT_EQ(utf8::sanitize("a\xC3"), "a\xEF\xBF\xBD");              // truncated 2-byte sequence
  EXPECT_EQ(utf8::sanitize("\xE2\x82"), "\xEF\xBF\xBD");            // one maximal prefix, one U+FFFD
  EXPECT_EQ(utf8::sanitize("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // two bad lead bytes
  EXPECT_TRUE(utf8::is_valid(utf8::sanitize("\xED\xA0\x80x\xC0")));
}

TEST(Utf8, AppendEncodesEveryLengthAndRoundTrips) {
  for (uint32_t cp : {0x0u, 0x41u, 0x7Fu, 0x80u, 0xE9u, 0x7FFu, 0x800u, 0x20ACu, 0xFFFFu, 0x10000u, 0x1F600u, 0x10FFFFu}) {
    std::string s;
    utf8::append(s, cp);
    EXPECT_EQ(s.size(), cp < 0x80 ? 1u : cp < 0x800 ? 2u : cp < 0x10000 ? 3u : 4u) << cp;
    EXPECT_TRUE(utf8::is_valid(s)) << cp;
    EXPECT_EQ(utf8::complete_prefix_len(s), s.size()) << cp;
  }
  std::string s = "a";
  utf8::append(s, 0x20AC);
  EXPECT_EQ(s, "a\xE2\x82\xAC");
}

}  // namespace
}  // namespace spate
