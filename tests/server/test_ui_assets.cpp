#include <gtest/gtest.h>

#include <string>

#include "server/ui_assets.h"

namespace spate::ui {
namespace {

std::string header(const http::response<http::string_body>& r, std::string_view name) {
  auto it = r.find(name);
  return it == r.end() ? std::string() : std::string(it->value());
}

TEST(UiAssets, EmbedsThePageAndItsScriptAndStyle) {
  std::vector<std::string> names;
  for (const auto& f : files()) {
    names.emplace_back(f.name);
    EXPECT_GT(f.bytes.size(), 100u) << f.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"index.html", "chat.css", "chat.js"}));
}

TEST(UiAssets, RecognizesOnlyUiPaths) {
  EXPECT_TRUE(is_ui_path("/"));
  EXPECT_TRUE(is_ui_path("/index.html"));
  EXPECT_TRUE(is_ui_path("/ui/chat.js"));
  EXPECT_FALSE(is_ui_path("/v1/models"));
  EXPECT_FALSE(is_ui_path("/uix"));
  EXPECT_FALSE(is_ui_path(""));
}

TEST(UiAssets, ServesEachFileWithItsTypeAndAStrictPolicy) {
  const auto page = ui_response("/", 11);
  EXPECT_EQ(page.result(), http::status::ok);
  EXPECT_EQ(header(page, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page.body().find("<script src=\"/ui/chat.js\">"), std::string::npos);
  EXPECT_NE(header(page, "Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  EXPECT_EQ(header(ui_response("/ui/chat.js", 11), "Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(header(ui_response("/ui/chat.css", 11), "Content-Type"), "text/css; charset=utf-8");
  // Only embedded files: no path escapes, no directory listing.
  EXPECT_EQ(ui_response("/ui/../CMakeLists.txt", 11).result(), http::status::not_found);
  EXPECT_EQ(ui_response("/ui/", 11).result(), http::status::not_found);
}

}  // namespace
}  // namespace spate::ui
