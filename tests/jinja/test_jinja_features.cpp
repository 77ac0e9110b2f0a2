// Language-feature snippets (tests/jinja/fixtures/chat_templates/features.json): each template
// is rendered with no messages and its variables as extra context, and compared with Python
// Jinja2's output (or its raise_exception message, or the fact that Jinja2 failed).
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "jinja/chat_template.h"

namespace spate {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const fs::path k_features = fs::path(SPATE_SOURCE_DIR) / "tests/jinja/fixtures/chat_templates/features.json";

const json::array& features() {
  static const json::array cases = [] {
    std::ifstream f(k_features, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    json::value v = json::parse(ss.str().empty() ? std::string("[]") : ss.str());
    return v.as_array();
  }();
  return cases;
}

std::vector<std::size_t> indices() {
  std::vector<std::size_t> out(features().size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = i;
  return out;
}

class JinjaSnippet : public testing::TestWithParam<std::size_t> {};

TEST_P(JinjaSnippet, MatchesPythonJinja2) {
  const json::object& c = features().at(GetParam()).as_object();
  const std::string tpl(c.at("template").as_string());
  SCOPED_TRACE(tpl);
  chat_template_options opts;
  opts.extra_context = c.at("vars").as_object();
  opts.now_unix_s = 1721990400 + 3600 * 13 + 61;
  setenv("TZ", "UTC", 1);
  tzset();
  std::string got, error;
  bool threw = false;
  try {
    const chat_template t(tpl, "", "");
    got = t.render(json::array(), opts);
  } catch (const chat_template_error& e) {
    threw = true;
    error = e.what();
  }
  if (const json::value* expected = c.if_contains("expected")) {
    ASSERT_FALSE(threw) << error;
    EXPECT_EQ(got, std::string(expected->as_string()));
  } else if (c.at("error_kind").as_string() == "raise_exception") {
    ASSERT_TRUE(threw);
    EXPECT_EQ(error, std::string(c.at("error").as_string()));
  } else {
    EXPECT_TRUE(threw) << "Python failed with: " << c.at("error").as_string() << "\nbut got: " << got;
  }
}

INSTANTIATE_TEST_SUITE_P(JinjaFeatures, JinjaSnippet, testing::ValuesIn(indices()),
                         [](const testing::TestParamInfo<std::size_t>& info) {
                           std::string s(features().at(info.param).at("name").as_string());
                           for (char& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(JinjaSnippet);

TEST(JinjaFeaturesFixture, IsPresent) { EXPECT_GE(features().size(), 150u) << k_features; }

}  // namespace
}  // namespace spate
