// Reasoning parsers (protocol/reasoning.h): the split of whole outputs, the
// same split when the output arrives in pieces cut at every byte, no partial
// tag ever let out, where an output starts given the prompt, and the parser a
// chat template calls for.
#include "protocol/reasoning.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "jinja/chat_template.h"

namespace spate::api {
namespace {

namespace json = boost::json;
using rs = reasoning_start;

struct split_case {
  reasoning_start start;
  std::string text;
  std::string reasoning;
  std::string content;
  bool has_reasoning;
};

const std::vector<split_case>& cases() {
  static const std::vector<split_case> c = {
      // deepseek_r1 (reasoning start): no <think> generated, the template opened it.
      {rs::reasoning, "step 1</think>The answer", "step 1", "The answer", true},
      {rs::reasoning, "<think>\nstep</think>\n\nok", "\nstep", "\n\nok", true},
      {rs::reasoning, "  \n<think>x</think>y", "x", "y", true},
      {rs::reasoning, "no end tag at all", "no end tag at all", "", true},
      {rs::reasoning, "<think></think>answer", "", "answer", true},
      {rs::reasoning, "", "", "", true},
      {rs::reasoning, "</think>", "", "", true},
      {rs::reasoning, "cut inside </thi", "cut inside </thi", "", true},
      {rs::reasoning, "<thi", "<thi", "", true},
      {rs::reasoning, "a < b </ c <</think>d</think>e<think>f", "a < b </ c <", "d</think>e<think>f", true},
      {rs::reasoning, "<</think>x", "<", "x", true},
      {rs::reasoning, "</think</think>", "</think", "", true},
      // qwen3 (optional start): reasoning only after a leading <think>.
      {rs::optional, "plain answer", "", "plain answer", false},
      {rs::optional, "\n\n<think>\nhmm\n</think>\n\nHi", "\nhmm\n", "\n\nHi", true},
      {rs::optional, "<think>never closed", "never closed", "", true},
      {rs::optional, "<thin", "", "<thin", false},
      {rs::optional, "  <thinking", "", "  <thinking", false},
      {rs::optional, "x<think>y</think>z", "", "x<think>y</think>z", false},
      {rs::optional, "", "", "", false},
      {rs::optional, "<think></think>", "", "", true},
      // content start: everything is content.
      {rs::content, "<think>a</think>b", "", "<think>a</think>b", false},
  };
  return c;
}

std::string name_of(reasoning_start s) {
  return s == rs::reasoning ? "reasoning" : s == rs::optional ? "optional" : "content";
}

TEST(ReasoningSplit, WholeOutputs) {
  for (const auto& c : cases()) {
    bool has = false;
    const reasoning_split s = split_reasoning(c.start, c.text, &has);
    EXPECT_EQ(s.reasoning, c.reasoning) << name_of(c.start) << ": " << c.text;
    EXPECT_EQ(s.content, c.content) << name_of(c.start) << ": " << c.text;
    EXPECT_EQ(has, c.has_reasoning) << name_of(c.start) << ": " << c.text;
  }
}

// Cut into two pieces at every byte, and into three at every pair of bytes:
// the same split as whole.
TEST(ReasoningSplit, EveryByteBoundaryGivesTheSameSplit) {
  for (const auto& c : cases()) {
    const size_t n = c.text.size();
    for (size_t i = 0; i <= n; ++i) {
      for (size_t j = i; j <= n; ++j) {
        reasoning_splitter sp(c.start);
        reasoning_split s;
        sp.feed(std::string_view(c.text).substr(0, i), &s);
        sp.feed(std::string_view(c.text).substr(i, j - i), &s);
        sp.feed(std::string_view(c.text).substr(j), &s);
        sp.finish(&s);
        ASSERT_EQ(s.reasoning, c.reasoning) << c.text << " cut at " << i << "," << j;
        ASSERT_EQ(s.content, c.content) << c.text << " cut at " << i << "," << j;
        ASSERT_EQ(sp.has_reasoning(), c.has_reasoning) << c.text << " cut at " << i << "," << j;
      }
    }
  }
}

// Byte by byte, nothing of a tag is ever let out: while "</think>" is being
// matched the content stays empty and the reasoning never gains the tag's
// bytes; a leading "<think>" never reaches either side.
TEST(ReasoningSplit, NoPartialTagLeaks) {
  const std::string text = "<think>I think x</thi<nk y</think>Done";
  reasoning_splitter sp(rs::reasoning);
  reasoning_split s;
  for (size_t i = 0; i < text.size(); ++i) {
    sp.feed(text.substr(i, 1), &s);
    const size_t end_of_tag = text.rfind("</think>") + 8;
    if (i + 1 < end_of_tag) {
      EXPECT_EQ(s.content, "") << "after byte " << i;
    }
    EXPECT_EQ(s.reasoning.find("<think"), std::string::npos) << "after byte " << i;
    EXPECT_EQ(s.reasoning.find("</think"), std::string::npos) << "after byte " << i;
    EXPECT_TRUE(std::string("I think x</thi<nk y").starts_with(s.reasoning)) << "after byte " << i << ": " << s.reasoning;
  }
  EXPECT_EQ(sp.current(), reasoning_splitter::state::content);
  sp.finish(&s);
  EXPECT_EQ(s.reasoning, "I think x</thi<nk y");
  EXPECT_EQ(s.content, "Done");
}

TEST(ReasoningSplit, StatesAndHeldBytes) {
  reasoning_splitter sp(rs::optional);
  EXPECT_EQ(sp.current(), reasoning_splitter::state::lead_in);
  EXPECT_FALSE(sp.has_reasoning());
  sp.feed("\n<thi", nullptr);
  EXPECT_EQ(sp.current(), reasoning_splitter::state::lead_in);
  sp.feed("nk>abc</th", nullptr);
  EXPECT_EQ(sp.current(), reasoning_splitter::state::reasoning);
  EXPECT_TRUE(sp.has_reasoning());
  EXPECT_EQ(sp.close_matched(), 4u);
  sp.feed("ink>", nullptr);
  EXPECT_EQ(sp.current(), reasoning_splitter::state::content);
  EXPECT_EQ(sp.close_matched(), 0u);
}

TEST(ReasoningSplit, LeadInWhitespaceIsBounded) {
  const std::string ws(k_max_lead_in_whitespace, ' ');
  EXPECT_EQ(split_reasoning(rs::optional, ws + "<think>r</think>c").reasoning, "r");
  EXPECT_EQ(split_reasoning(rs::optional, ws + " <think>r</think>c").content, ws + " <think>r</think>c");
}

TEST(ReasoningParserNames, RoundTripAndUnknown) {
  for (const char* n : {"none", "qwen3", "deepseek_r1", "openai_gptoss"}) {
    const auto p = reasoning_parser_from_name(n);
    ASSERT_TRUE(p.has_value()) << n;
    EXPECT_STREQ(reasoning_parser_name(*p), n);
  }
  EXPECT_FALSE(reasoning_parser_from_name("deepseek-r1").has_value());
  EXPECT_FALSE(reasoning_parser_from_name("Qwen3").has_value());
  EXPECT_FALSE(reasoning_parser_from_name("").has_value());
}

TEST(ReasoningStart, FromThePromptTheKwargsAndTheContinuedMessage) {
  const json::object none;
  const json::object no_thinking{{"enable_thinking", false}};
  const json::object thinking{{"enable_thinking", true}};
  using p = reasoning_parser;
  // The prompt's end decides for both parsers.
  for (p parser : {p::qwen3, p::deepseek_r1}) {
    EXPECT_EQ(reasoning_start_of(parser, "<｜Assistant｜><think>\n", none, nullptr), rs::reasoning);
    EXPECT_EQ(reasoning_start_of(parser, "<|im_start|>assistant\n<think>\n\n</think>\n\n", none, nullptr), rs::content);
  }
  // Otherwise: deepseek_r1 reasons, qwen3 waits for a <think> (unless thinking is off).
  const std::string open_turn = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(reasoning_start_of(p::deepseek_r1, open_turn, none, nullptr), rs::reasoning);
  EXPECT_EQ(reasoning_start_of(p::qwen3, open_turn, none, nullptr), rs::optional);
  EXPECT_EQ(reasoning_start_of(p::qwen3, open_turn, thinking, nullptr), rs::optional);
  EXPECT_EQ(reasoning_start_of(p::qwen3, open_turn, no_thinking, nullptr), rs::content);
  // A closed think block earlier in the prompt (a previous turn) does not count.
  const std::string history = "<|im_start|>assistant\n<think>\nr\n</think>\n\nx<|im_end|>\n" + open_turn;
  EXPECT_EQ(reasoning_start_of(p::qwen3, history, none, nullptr), rs::optional);
  // continue_final_message: the continued message decides.
  const std::string open_msg = "<think>\nLet me see";
  const std::string closed_msg = "<think>a</think>The answer is";
  const std::string plain_msg = "The answer is";
  EXPECT_EQ(reasoning_start_of(p::qwen3, "..." + open_msg, none, &open_msg), rs::reasoning);
  EXPECT_EQ(reasoning_start_of(p::deepseek_r1, "..." + closed_msg, none, &closed_msg), rs::content);
  EXPECT_EQ(reasoning_start_of(p::deepseek_r1, "..." + plain_msg, none, &plain_msg), rs::content);
}

// scripts/test.sh sets SPATE_REQUIRE_TESTDATA=1, which turns a skip into a failure.
bool testdata_required() {
  const char* v = std::getenv("SPATE_REQUIRE_TESTDATA");
  return v && *v && std::string(v) != "0";
}

std::string read_template(const std::string& name) {
  const auto path = std::filesystem::path(SPATE_TESTDATA_DIR) / "chat-templates" / name;
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ReasoningDetect, FromRealChatTemplates) {
  const std::vector<std::pair<std::string, reasoning_parser>> expect = {
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", reasoning_parser::deepseek_r1},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", reasoning_parser::deepseek_r1},
      // This QwQ template closes the block unless enable_thinking is set: "<think>\n</think>".
      {"Qwen-QwQ-32B.jinja", reasoning_parser::qwen3},
      {"Qwen-Qwen3-0.6B.jinja", reasoning_parser::qwen3},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", reasoning_parser::none},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", reasoning_parser::none},
      {"openai-gpt-oss-120b.jinja", reasoning_parser::openai_gptoss},
  };
  for (const auto& [name, parser] : expect) {
    const std::string src = read_template(name);
    if (src.empty()) {
      if (testdata_required()) FAIL() << "missing " << name << " (SPATE_REQUIRE_TESTDATA is set)";
      GTEST_SKIP() << "missing " << name;
    }
    const chat_template t(src, "<s>", "</s>");
    std::string why;
    EXPECT_EQ(detect_reasoning_parser(t, &why), parser) << name << ": " << why;
    EXPECT_FALSE(why.empty());
  }
}

TEST(ReasoningDetect, ATemplateThatDoesNotRenderFallsBackToQwen3) {
  const chat_template t("{{ raise_exception('no') }}<think>", "<s>", "</s>");
  std::string why;
  EXPECT_EQ(detect_reasoning_parser(t, &why), reasoning_parser::qwen3);
  EXPECT_NE(why.find("did not render"), std::string::npos) << why;
}

}  // namespace
}  // namespace spate::api
