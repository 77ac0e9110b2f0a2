// The tool grammar (protocol/tool_grammar.h) per tool_choice and format:
// what each root accepts and refuses, the answer format embedded under
// "auto", the lazy grammar of the marker formats, and the distinct flags.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "grammar/distinct_items.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/vocab_trie.h"
#include "protocol/tool_grammar.h"

namespace spate::api {
namespace {

namespace json = boost::json;
using F = tool_call_format;
using choice = tool_request::choice;

tool_request weather(choice mode, bool parallel = true) {
  tool_request t;
  t.mode = mode;
  t.parallel = parallel;
  t.tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters":
      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "final_result"}}])").as_array();
  return t;
}

output_constraint schema_answer() {
  output_constraint c;
  c.type = output_constraint::kind::json_schema;
  c.schema = json::parse(R"({"type": "object", "properties": {"temp": {"type": "integer"}}, "required": ["temp"]})");
  c.param = "response_format.json_schema.schema";
  return c;
}

struct built {
  std::shared_ptr<const grammar::grammar> g;
  bool accepts(const std::string& s) const {
    grammar::matcher m(g);
    return m.advance(s) && m.can_end();
  }
};

built build(const tool_request& t, F f, const output_constraint& answer = {}) {
  const json::value spec = tool_grammar_spec(t, f, answer);
  std::unique_ptr<grammar::grammar> a;
  if (!spec.at("answer").is_null()) a = std::make_unique<grammar::grammar>(grammar::compile_json_schema(answer.schema));
  return {std::make_shared<const grammar::grammar>(build_tool_grammar(spec, a.get()))};
}

// Distinct rules that are arrays (the call list; objects' keys are distinct too).
int distinct_arrays(const grammar::grammar& g) {
  int n = 0;
  for (const auto& r : g.rules) n += r.distinct && r.alts.at(0).at(0).set.test('[') ? 1 : 0;
  return n;
}

const std::string k_call = R"({"name": "get_weather", "arguments": {"city": "Paris"}})";
const std::string k_call2 = R"({"name": "get_weather", "arguments": {"city": "Rome"}})";

TEST(ToolGrammar, RequiredIsCallsAloneAndIgnoresAResponseFormat) {
  for (const auto& answer : {output_constraint{}, schema_answer()}) {
    const built g = build(weather(choice::required), F::generic, answer);
    EXPECT_TRUE(g.accepts(R"({"tool_calls": [)" + k_call + "]}"));
    EXPECT_TRUE(g.accepts(R"({"tool_calls": [)" + k_call + ", " + k_call2 + "]}"));
    EXPECT_FALSE(g.accepts(R"({"response": "hi"})"));
    EXPECT_FALSE(g.accepts(R"({"response": {"temp": 3}})"));
  }
  const json::value spec = tool_grammar_spec(weather(choice::required), F::generic, schema_answer());
  EXPECT_TRUE(spec.at("answer").is_null());
}

TEST(ToolGrammar, GenericAutoWithAFormatIsCallsOrTheWrappedAnswer) {
  const built g = build(weather(choice::automatic), F::generic, schema_answer());
  EXPECT_TRUE(g.accepts(R"({"tool_calls": [)" + k_call + "]}"));
  EXPECT_TRUE(g.accepts(R"({"response": {"temp": 21}})"));
  EXPECT_FALSE(g.accepts(R"({"response": "hot"})"));  // the format, not a free string
  EXPECT_FALSE(g.accepts(R"({"temp": 21})"));
  // Without a format: calls or a string response.
  const built plain = build(weather(choice::automatic), F::generic);
  EXPECT_TRUE(plain.accepts(R"({"response": "hot"})"));
  EXPECT_FALSE(plain.accepts(R"({"response": {"temp": 21}})"));
}

TEST(ToolGrammar, HermesAutoWithAFormatIsCallsOrTheRawAnswer) {
  const built g = build(weather(choice::automatic), F::hermes, schema_answer());
  EXPECT_TRUE(g.accepts("<tool_call>\n" + k_call + "\n</tool_call>"));
  EXPECT_TRUE(g.accepts(R"({"temp": 21})"));
  EXPECT_FALSE(g.accepts("Sure. <tool_call>\n" + k_call + "\n</tool_call>"));  // either, not text and calls
  EXPECT_FALSE(g.accepts("It is hot."));
}

TEST(ToolGrammar, HermesAutoIsFreeTextUntilTheMarker) {
  const built g = build(weather(choice::automatic), F::hermes);
  EXPECT_TRUE(g.accepts(""));
  EXPECT_TRUE(g.accepts("It is hot in <b>Paris</b> <tool_ca"));  // a partial marker is text
  EXPECT_TRUE(g.accepts("Let me check.\n<tool_call>\n" + k_call + "\n</tool_call>"));
  EXPECT_TRUE(g.accepts("<<tool_call>\n" + k_call + "\n</tool_call>\n<tool_call>\n" + k_call2 + "\n</tool_call>"));
  // After the marker, the call grammar: a known function with valid arguments, then the end.
  EXPECT_FALSE(g.accepts("<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(g.accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(g.accepts("<tool_call>\n" + k_call + "\n</tool_call> and more text"));
  EXPECT_TRUE(g.g->distinct_top_level);
}

TEST(ToolGrammar, MistralAutoIsFreeTextUntilTheMarker) {
  const built g = build(weather(choice::automatic), F::mistral);
  EXPECT_TRUE(g.accepts("Checking [TOOL] now"));
  EXPECT_TRUE(g.accepts("Checking.[TOOL_CALLS][" + k_call + ", " + k_call2 + "]"));
  EXPECT_FALSE(g.accepts("[TOOL_CALLS] just text"));
  EXPECT_EQ(distinct_arrays(*g.g), 1);  // the call list is an array of distinct items
}

TEST(ToolGrammar, Llama3AutoIsCallsOrTextThatCannotStartOne) {
  const built g = build(weather(choice::automatic), F::llama3_json);
  const std::string call = R"({"name": "get_weather", "parameters": {"city": "Paris"}})";
  EXPECT_TRUE(g.accepts(call));
  EXPECT_TRUE(g.accepts(call + "; " + R"({"name": "final_result", "parameters": {}})"));
  EXPECT_TRUE(g.accepts("It is {maybe} hot."));
  EXPECT_TRUE(g.accepts(""));
  EXPECT_FALSE(g.accepts(R"({"name": "nope", "parameters": {}})"));
  EXPECT_FALSE(g.accepts(" {\"name\": \"nope\"}"));
}

TEST(ToolGrammar, NamedAndSingleCallsAreOneCall) {
  tool_request named = weather(choice::named);
  named.name = "final_result";
  const built g = build(named, F::generic);
  EXPECT_TRUE(g.accepts(R"({"tool_calls": [{"name": "final_result", "arguments": {}}]})"));
  EXPECT_FALSE(g.accepts(R"({"tool_calls": [)" + k_call + "]}"));
  EXPECT_FALSE(g.accepts(R"({"tool_calls": [{"name": "final_result", "arguments": {}}, {"name": "final_result", "arguments": {}}]})"));
  const built single = build(weather(choice::required, /*parallel=*/false), F::generic);
  EXPECT_FALSE(single.accepts(R"({"tool_calls": [)" + k_call + ", " + k_call2 + "]}"));
  EXPECT_EQ(distinct_arrays(*single.g), 0);  // one call: nothing to compare
  EXPECT_EQ(distinct_arrays(*build(weather(choice::required), F::generic).g), 1);
}

// The tokens among pieces that the distinct check refuses after text (which
// the grammar must accept), and whether the output must end there.
struct after_text {
  std::vector<std::string> blocked;
  bool must_end = false, can_end = false;
};
after_text run_distinct(const built& g, const std::string& text, const std::vector<std::string>& pieces) {
  grammar::matcher m(g.g);
  grammar::distinct_items d(g.g->distinct_top_level);
  for (const char c : text) {
    EXPECT_TRUE(m.advance(static_cast<uint8_t>(c))) << text;
    d.advance(static_cast<uint8_t>(c), m);
  }
  const grammar::vocab_trie trie(pieces);
  std::vector<int32_t> ids;
  d.blocked_tokens(trie, pieces, ids);
  after_text out;
  for (const int32_t id : ids) {
    grammar::matcher next = m;
    if (next.advance(pieces[static_cast<size_t>(id)])) out.blocked.push_back(pieces[static_cast<size_t>(id)]);
  }
  std::sort(out.blocked.begin(), out.blocked.end());
  out.must_end = d.must_end();
  out.can_end = m.can_end();
  return out;
}

TEST(ToolGrammar, ARepeatedCallEndsTheListInsteadOfInventingOne) {
  const std::vector<std::string> pieces = {"\"", "\"}", "\"}}", "}", "_M2", ",", ", ", "]", "]}", "\n", "<tool_call>", "\n</tool_call>"};
  using names = std::vector<std::string>;
  const std::string repeat_started = R"({"name": "get_weather", "arguments": {"city": "Paris)";
  // generic (the list is an array): the repeat may complete; then its ',' is refused, so the list closes.
  const built generic = build(weather(choice::required), F::generic);
  const std::string open = R"({"tool_calls": [)" + k_call + ", ";
  EXPECT_EQ(run_distinct(generic, open + repeat_started, pieces).blocked, names{}) << "not steered to Paris_M2";
  const after_text repeated = run_distinct(generic, open + k_call, pieces);
  EXPECT_EQ(repeated.blocked, (names{",", ", "}));
  EXPECT_TRUE(generic.accepts(open + k_call + "]}"));
  EXPECT_EQ(run_distinct(generic, open + k_call2, pieces).blocked, names{}) << "a different call may be followed by more";
  // hermes (calls at the top level): once the repeat's block is closed, only the end remains.
  const built hermes = build(weather(choice::required), F::hermes);
  const std::string first = "<tool_call>\n" + k_call + "\n</tool_call>";
  EXPECT_EQ(run_distinct(hermes, first + "\n<tool_call>\n" + repeat_started, pieces).blocked, names{});
  EXPECT_FALSE(run_distinct(hermes, first, pieces).must_end);
  const after_text ended = run_distinct(hermes, first + "\n" + first, pieces);
  EXPECT_TRUE(ended.must_end);
  EXPECT_TRUE(ended.can_end);
  EXPECT_FALSE(run_distinct(hermes, first + "\n<tool_call>\n" + k_call2 + "\n</tool_call>", pieces).must_end);
}

TEST(ToolGrammar, AnswerSpecRoundTrips) {
  output_constraint c;
  c.type = output_constraint::kind::choice;
  c.choices = {"yes", "no"};
  c.param = "guided_choice";
  const output_constraint back = answer_of(answer_spec(c));
  EXPECT_EQ(back.type, c.type);
  EXPECT_EQ(back.choices, c.choices);
  EXPECT_EQ(back.param, c.param);
  EXPECT_FALSE(wraps_answer(c));
  EXPECT_TRUE(wraps_answer(schema_answer()));
}

}  // namespace
}  // namespace spate::api
