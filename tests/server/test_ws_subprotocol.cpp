#include <gtest/gtest.h>

#include "server/ws_subprotocol.h"

namespace spate {
namespace {

TEST(WsSubprotocol, SplitsTrimsAndDropsEmptyEntries) {
  const auto v = offered_subprotocols(" spate-chat ,, openai-insecure-api-key.sk-1\t,x");
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0], "spate-chat");
  EXPECT_EQ(v[1], "openai-insecure-api-key.sk-1");
  EXPECT_EQ(v[2], "x");
  EXPECT_TRUE(offered_subprotocols("").empty());
  EXPECT_TRUE(offered_subprotocols(" , ").empty());
}

TEST(WsSubprotocol, FindsTheKeyEntry) {
  EXPECT_EQ(subprotocol_api_key("spate-chat, openai-insecure-api-key.sk-abc"), "sk-abc");
  EXPECT_EQ(subprotocol_api_key("openai-insecure-api-key."), "");
  EXPECT_FALSE(subprotocol_api_key("spate-chat").has_value());
  EXPECT_FALSE(subprotocol_api_key("xopenai-insecure-api-key.k").has_value());
}

TEST(WsSubprotocol, SelectsTheFirstEntryWithoutAKey) {
  EXPECT_EQ(selected_subprotocol("openai-insecure-api-key.k, spate-chat, other"), "spate-chat");
  EXPECT_EQ(selected_subprotocol("openai-insecure-api-key.k"), "");
  EXPECT_EQ(selected_subprotocol(""), "");
}

}  // namespace
}  // namespace spate
