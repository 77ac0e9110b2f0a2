#include <gtest/gtest.h>

#include "util/byte_size.h"

namespace spate {
namespace {

TEST(ByteSize, ParsesUnits) {
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("512mib"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("1.5G"), 3ull << 29);
  EXPECT_EQ(parse_byte_size("1GB"), 1000000000u);
  EXPECT_EQ(parse_byte_size(" 8 KiB "), 8192u);
}

TEST(ByteSize, RejectsMalformed) {
  for (const char* bad : {"", "GiB", "-1GiB", "12XB", "1e400", "nan", "inf", "2PiB", "1..2G"}) {
    EXPECT_FALSE(parse_byte_size(bad).has_value()) << bad;
  }
}

TEST(ByteSize, Formats) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3ull << 20), "3.00 MiB");
}

}  // namespace
}  // namespace spate
