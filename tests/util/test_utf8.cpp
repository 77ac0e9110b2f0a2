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

}  // namespace
}  // namespace spate
