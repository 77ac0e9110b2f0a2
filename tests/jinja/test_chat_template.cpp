// Renders every real chat template of ../shared/testdata/chat-templates (and the default model's
// template) over the message lists of tests/jinja/fixtures/chat_templates/inputs.json and
// compares byte for byte with Python Jinja2's output recorded by
// tests/jinja/make_chat_template_fixtures.py (or its raise_exception message / the fact that it
// failed). Also covers the chat_template API: errors, options, thread-safety.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "jinja/chat_template.h"

namespace spate {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const fs::path k_fixtures = fs::path(SPATE_SOURCE_DIR) / "tests/jinja/fixtures/chat_templates";
const fs::path k_testdata = fs::path(SPATE_TESTDATA_DIR) / "chat-templates";

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json::value read_json(const fs::path& p) { return json::parse(read_file(p)); }

// ../shared/testdata may be absent on a developer's machine (skip), never in CI:
// scripts/test.sh sets SPATE_REQUIRE_TESTDATA=1, which turns the skip into a failure.
bool testdata_required() {
  const char* v = std::getenv("SPATE_REQUIRE_TESTDATA");
  return v && *v && std::string(v) != "0";
}
#define SPATE_REQUIRE_PATH(path)                                                                        \
  do {                                                                                                  \
    if (!fs::exists(path)) {                                                                            \
      if (testdata_required()) FAIL() << "missing " << (path) << " (SPATE_REQUIRE_TESTDATA is set)"; \
      GTEST_SKIP() << "missing " << (path);                                                             \
    }                                                                                                   \
  } while (0)

// strftime_now renders local time, as Python does; the fixtures were made in UTC.
void use_utc() {
  static const bool done = [] {
    setenv("TZ", "UTC", 1);
    tzset();
    return true;
  }();
  (void)done;
}

std::vector<std::string> fixture_files() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(k_fixtures / "expected", ec))
    if (e.path().extension() == ".json") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string test_name(const testing::TestParamInfo<std::string>& info) {
  std::string s = info.param.substr(0, info.param.size() - 5);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

class ChatTemplateFixture : public testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateFixture, MatchesPythonJinja2) {
  use_utc();
  const json::object inputs = read_json(k_fixtures / "inputs.json").as_object();
  const json::object doc = read_json(k_fixtures / "expected" / GetParam()).as_object();
  const std::string name(doc.at("template").as_string());
  const fs::path src_path =
      doc.at("location").as_string() == "testdata" ? k_testdata / name : k_fixtures / "templates" / name;
  SPATE_REQUIRE_PATH(src_path);
  const chat_template tpl(read_file(src_path), std::string(doc.at("bos_token").as_string()),
                          std::string(doc.at("eos_token").as_string()));
  const json::array& outputs = doc.at("outputs").as_array();
  int checked = 0;
  for (const auto& cv : doc.at("cases").as_array()) {
    const json::object& c = cv.as_object();
    SCOPED_TRACE(name + " / " + std::string(c.at("name").as_string()));
    chat_template_options opts;
    opts.add_generation_prompt = c.at("add_generation_prompt").as_bool();
    opts.extra_context = inputs.at("extra_contexts").at(c.at("extra_context").as_string()).as_object();
    opts.now_unix_s = inputs.at("now_unix_s").as_int64();
    const json::array& messages = inputs.at("message_sets").at(c.at("messages").as_string()).as_array();
    std::string got, error;
    bool threw = false;
    try {
      got = tpl.render(messages, opts);
    } catch (const chat_template_error& e) {
      threw = true;
      error = e.what();
    }
    if (const json::value* out = c.if_contains("output")) {
      ASSERT_FALSE(threw) << error;
      EXPECT_EQ(got, std::string(outputs.at(static_cast<std::size_t>(out->as_int64())).as_string()));
    } else if (c.at("error_kind").as_string() == "raise_exception") {
      ASSERT_TRUE(threw) << "expected raise_exception: " << c.at("error").as_string();
      EXPECT_EQ(error, std::string(c.at("error").as_string()));
    } else {
      EXPECT_TRUE(threw) << "Python failed with: " << c.at("error").as_string() << "\nbut got: " << got;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(ChatTemplates, ChatTemplateFixture, testing::ValuesIn(fixture_files()), test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ChatTemplateFixture);

TEST(ChatTemplateFixtures, CoverEveryTestdataTemplateAndTheDefaultModel) {
  const auto files = fixture_files();
  ASSERT_FALSE(files.empty()) << "no fixtures in " << k_fixtures;
  std::size_t cases = 0;
  for (const auto& f : files) cases += read_json(k_fixtures / "expected" / f).at("cases").as_array().size();
  EXPECT_GE(cases, 3000u);
  EXPECT_NE(std::find(files.begin(), files.end(), "SmolLM2-135M-Instruct.json"), files.end());
  SPATE_REQUIRE_PATH(k_testdata);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(k_testdata, ec)) {
    if (e.path().extension() != ".jinja") continue;
    const std::string stem = e.path().stem().string() + ".json";
    EXPECT_NE(std::find(files.begin(), files.end(), stem), files.end()) << "no fixture for " << e.path();
  }
}

// ----- API -----

json::array msgs(const char* text) { return json::parse(text).as_array(); }

TEST(ChatTemplate, RendersVariablesAndOptions) {
  const chat_template t(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token }}|{{ tools }}|{{ documents }}|{{ flag }}",
      "<s>", "</s>");
  chat_template_options o;
  o.extra_context["flag"] = true;
  EXPECT_EQ(t.render(msgs(R"([{"role":"user","content":"hi"}])"), o), "<s><user>hi<assistant></s>|None|None|True");
  o.add_generation_prompt = false;
  o.extra_context["tools"] = json::array{1, 2};
  EXPECT_EQ(t.render(msgs(R"([{"role":"user","content":"hi"}])"), o), "<s><user>hi</s>|[1, 2]|None|True");
}

TEST(ChatTemplate, ExtraContextCannotOverrideMessages) {
  const chat_template t("{{ messages|length }}{{ add_generation_prompt }}", "", "");
  chat_template_options o;
  o.extra_context["messages"] = json::array{1, 2, 3};
  o.extra_context["add_generation_prompt"] = false;
  EXPECT_EQ(t.render(msgs("[]"), o), "0True");
}

TEST(ChatTemplate, SyntaxErrorCarriesLineNumber) {
  try {
    chat_template t("line one\n{% if x %}\n{{ y }}\n{% endfor %}", "", "");
    FAIL() << "expected a syntax error";
  } catch (const chat_template_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("endfor"), std::string::npos) << e.what();
  }
  EXPECT_THROW(chat_template("{{ x|no_such_filter }}", "", ""), chat_template_error);
  EXPECT_THROW(chat_template("{% include 'x' %}", "", ""), chat_template_error);
}

TEST(ChatTemplate, RaiseExceptionMessageIsExact) {
  const chat_template t(
      "{% if messages|length == 0 %}{{ raise_exception('Need at least ' ~ 1 ~ ' message!') }}{% endif %}", "", "");
  try {
    t.render(msgs("[]"), {});
    FAIL();
  } catch (const chat_template_error& e) {
    EXPECT_STREQ(e.what(), "Need at least 1 message!");
  }
}

TEST(ChatTemplate, RuntimeErrorsAreClear) {
  const chat_template t("a\nb\n{{ messages[0].content + 1 }}", "", "");
  try {
    t.render(msgs(R"([{"role":"user","content":"x"}])"), {});
    FAIL();
  } catch (const chat_template_error& e) {
    EXPECT_EQ(std::string(e.what()), "template line 3: can only concatenate str (not \"int\") to str");
  }
  const chat_template u("{{ messages.x.y }}", "", "");
  try {
    u.render(msgs("[]"), {});
    FAIL();
  } catch (const chat_template_error& e) {
    EXPECT_EQ(std::string(e.what()), "template line 1: 'list object' has no attribute 'x'");
  }
}

TEST(ChatTemplate, StrftimeNowUsesThePinnedClock) {
  use_utc();
  const chat_template t("{{ strftime_now('%d %b %Y %H:%M:%S') }}", "", "");
  chat_template_options o;
  o.now_unix_s = 1721999000;
  EXPECT_EQ(t.render(msgs("[]"), o), "26 Jul 2024 13:03:20");
  o.now_unix_s = -1;
  EXPECT_EQ(t.render(msgs("[]"), o).size(), 20u);  // real time, same shape
}

TEST(ChatTemplate, RenderIsThreadSafe) {
  SPATE_REQUIRE_PATH(k_testdata / "meetkai-functionary-medium-v3.2.jinja");
  const chat_template t(read_file(k_testdata / "meetkai-functionary-medium-v3.2.jinja"), "<|begin_of_text|>", "");
  if (t.source().empty()) GTEST_SKIP();
  chat_template_options o;
  o.extra_context["tools"] = json::parse(R"([{"type":"function","function":{"name":"f","description":"d",
      "parameters":{"type":"object","properties":{"a":{"type":"string","enum":["x","y"]}},"required":["a"]}}}])");
  const auto m = msgs(R"([{"role":"user","content":"hello"},{"role":"assistant","content":"hi"}])");
  const std::string expected = t.render(m, o);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k)
        if (t.render(m, o) != expected) ++bad[static_cast<std::size_t>(i)];
    });
  for (auto& th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

TEST(ChatTemplate, IsMovable) {
  chat_template a("{{ messages|length }}", "", "");
  chat_template b = std::move(a);
  EXPECT_EQ(b.render(msgs("[1, 2]"), {}), "2");
}

}  // namespace
}  // namespace spate
