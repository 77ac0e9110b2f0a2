// Harmony output (gpt-oss) through the formatters and prepare_generation:
// chat's reasoning_content, content and tool_calls (streamed pieces add up to
// the non-streamed message at every cut), the Responses API's reasoning and
// function_call items in output order, and the prompt side with gpt-oss's
// real chat template: reasoning_effort, earlier reasoning as "thinking",
// calls written by the template read back, continue_final_message.
// Synthetic engine events.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "jinja/chat_template.h"
#include "protocol/constraint_compiler.h"
#include "protocol/generation.h"
#include "protocol/generation_format.h"
#include "protocol/harmony.h"
#include "protocol/harmony_constraint.h"
#include "format_test_util.h"
#include "tokenizer/tokenizer.h"

namespace spate {
namespace {

namespace json = boost::json;

using run = test::format_run;
using test::feed;
using test::tiny_tokenizer;
using test::streamed_message;
using test::types_of;

// A request whose output is harmony (analysis as reasoning; calls when the request has tools).
std::unique_ptr<run> start(api::endpoint kind, const std::string& body) {
  return test::start_run(kind, body, [](run& x) {
    x.g.harmony = api::harmony_options{};
    if (x.r.tool_use.active()) x.g.tool_format = api::tool_call_format::openai;
  });
}

const std::string k_tools = R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},)"
                            R"({"type":"function","function":{"name":"get_time"}}])";
std::string chat(bool stream, bool tools) {
  return std::string(R"({"messages":[{"role":"user","content":"hi"}])") + (tools ? "," + k_tools : "") +
         (stream ? R"(,"stream":true})" : "}");
}

const std::string k_analysis = "<|channel|>analysis<|message|>";
const std::string k_next = "<|end|><|start|>assistant";

TEST(HarmonyChat, ReasoningContentAndToolCalls) {
  auto x = start(api::endpoint::chat_completions, chat(false, false));
  feed(*x, {k_analysis + "Think.", k_next + "<|channel|>final<|message|>Four."});
  EXPECT_EQ(json::parse(x->f->result().body).at("choices").at(0).at("message"),
            json::parse(R"({"role":"assistant","reasoning_content":"Think.","reasoning":"Think.","content":"Four."})"));
  EXPECT_EQ(x->f->finish_reason_text(), "stop");

  x = start(api::endpoint::chat_completions, chat(false, true));
  feed(*x, {k_analysis + "Weather.", k_next + "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
            "{\"city\": \"Paris\"}"});
  const json::value body = json::parse(x->f->result().body);
  const json::value& msg = body.at("choices").at(0).at("message");
  EXPECT_EQ(msg.at("reasoning_content"), "Weather.");
  EXPECT_TRUE(msg.at("content").is_null());
  EXPECT_EQ(msg.at("tool_calls").at(0).at("function"), json::parse(R"({"name":"get_weather","arguments":"{\"city\": \"Paris\"}"})"));
  EXPECT_EQ(body.at("choices").at(0).at("finish_reason"), "tool_calls");

  // No reasoning at all: null, as vLLM.
  x = start(api::endpoint::chat_completions, chat(false, false));
  feed(*x, {"<|channel|>final<|message|>Just this."});
  EXPECT_TRUE(json::parse(x->f->result().body).at("choices").at(0).at("message").at("reasoning_content").is_null());
}

TEST(HarmonyChat, StreamedEqualsNonStreamedAtEveryCut) {
  const std::vector<std::pair<bool, std::string>> outputs = {
      {false, k_analysis + "Let me think <about> it." + k_next + "<|channel|>final<|message|>The answer is 4."},
      {true, k_analysis + "Two calls." + k_next + "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                                                   "{\"city\": \"Paris\"}<|call|><|start|>assistant to=functions.get_time"
                                                   "<|channel|>commentary json<|message|>{}"},
      {true, "<|channel|>commentary<|message|>Checking." + k_next + "<|channel|>commentary to=functions.get_time<|message|>{}"},
      {false, k_analysis + "cut off in the middle of <|en"},
      {false, "not harmony at all <|end|>"},
  };
  for (const auto& [tools, text] : outputs) {
    for (const finish_reason why : {finish_reason::stop, finish_reason::length}) {
      auto whole = start(api::endpoint::chat_completions, chat(false, tools));
      feed(*whole, {text}, why);
      json::object msg = json::parse(whole->f->result().body).at("choices").at(0).at("message").as_object();
      msg.erase("role");
      msg.erase("reasoning");
      if (msg.at("content").is_null()) msg["content"] = "";
      for (size_t i = 0; i <= text.size(); i += 2) {
        for (size_t j = i; j <= text.size(); j += 5) {
          auto x = start(api::endpoint::chat_completions, chat(true, tools));
          const json::object s = streamed_message(feed(*x, {text.substr(0, i), text.substr(i, j - i), text.substr(j)}, why));
          ASSERT_EQ(s, msg) << text << " cut " << i << "," << j;
          ASSERT_EQ(x->f->finish_reason_text(), whole->f->finish_reason_text());
        }
      }
    }
  }
}

TEST(HarmonyResponses, ReasoningItemThenFunctionCallInOrder) {
  const std::string body = R"({"input":"hi","tools":[{"type":"function","name":"get_weather"}],"reasoning":{"effort":"high"})";
  auto x = start(api::endpoint::responses, body + R"(,"stream":true})");
  const std::vector<std::string> pieces = {k_analysis + "Need it.", k_next + "<|channel|>commentary to=functions.get_weather",
                                           " <|constrain|>json<|message|>{\"city\":", " \"Paris\"}"};
  feed(*x, pieces);
  EXPECT_EQ(types_of(x->events), (std::vector<std::string>{
                                     "response.created", "response.in_progress",
                                     "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
                                     "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
                                     "response.output_item.added", "response.function_call_arguments.delta",
                                     "response.function_call_arguments.delta", "response.function_call_arguments.done",
                                     "response.output_item.done", "response.completed"}));
  const auto ev = [&](size_t i) { return json::parse(x->events[i].data); };
  EXPECT_EQ(ev(2).at("output_index"), 0);
  EXPECT_EQ(ev(2).at("item").at("type"), "reasoning");
  EXPECT_EQ(ev(4).at("delta"), "Need it.");
  EXPECT_EQ(ev(8).at("output_index"), 1);
  EXPECT_EQ(ev(8).at("item").at("name"), "get_weather");
  EXPECT_EQ(ev(11).at("arguments"), "{\"city\": \"Paris\"}");
  const json::value done = ev(x->events.size() - 1).at("response");
  ASSERT_EQ(done.at("output").as_array().size(), 2u);
  EXPECT_EQ(done.at("output").at(0).at("content").at(0).at("text"), "Need it.");
  EXPECT_EQ(done.at("output").at(1).at("type"), "function_call");
  EXPECT_EQ(done.at("reasoning"), json::parse(R"({"effort":"high","summary":null})"));
  EXPECT_EQ(done.at("usage").at("output_tokens_details").at("reasoning_tokens"), 2);  // the step that ends it counts

  // Non-streamed: the same output.
  auto y = start(api::endpoint::responses, body + "}");
  feed(*y, pieces);
  EXPECT_EQ(json::parse(y->f->result().body).at("output"), done.at("output"));
}

TEST(HarmonyResponses, EachAnalysisMessageIsAReasoningItem) {
  const std::vector<std::string> pieces = {k_analysis + "first", k_next + "<|channel|>commentary<|message|>Preamble.",
                                           k_next + k_analysis + "second", k_next + "<|channel|>final<|message|>Done."};
  auto x = start(api::endpoint::responses, R"({"input":"hi","stream":true})");
  feed(*x, pieces);
  const json::value done = json::parse(x->events.back().data).at("response");
  const json::array& out = done.at("output").as_array();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].at("id"), "rs-1");
  EXPECT_EQ(out[0].at("content").at(0).at("text"), "first");
  EXPECT_EQ(out[1].at("type"), "message");
  EXPECT_EQ(out[1].at("content").at(0).at("text"), "Preamble.Done.");
  EXPECT_EQ(out[2].at("id"), "rs-1_2");
  EXPECT_EQ(out[2].at("content").at(0).at("text"), "second");
  EXPECT_EQ(out[2].at("status"), "completed");
  // Non-streamed: the reasoning items first.
  auto y = start(api::endpoint::responses, R"({"input":"hi"})");
  feed(*y, pieces);
  const json::value body = json::parse(y->f->result().body);
  const json::array& whole = body.at("output").as_array();
  ASSERT_EQ(whole.size(), 3u);
  EXPECT_EQ(whole[0], out[0]);
  EXPECT_EQ(whole[1], out[2]);
  EXPECT_EQ(whole[2], out[1]);
  // Cut in the reasoning: incomplete.
  x = start(api::endpoint::responses, R"({"input":"hi","stream":true})");
  feed(*x, {k_analysis + "still"}, finish_reason::length);
  EXPECT_EQ(json::parse(x->events.back().data).at("response").at("output").at(0).at("status"), "incomplete");
}

// ------------------------------------------------------------ the prompt side, gpt-oss's template

bool testdata_required() {
  const char* v = std::getenv("SPATE_REQUIRE_TESTDATA");
  return v && *v && std::string(v) != "0";
}

std::string read_template() {
  std::ifstream in(std::filesystem::path(SPATE_TESTDATA_DIR) / "chat-templates" / "openai-gpt-oss-120b.jinja");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct gpt_oss {
  std::unique_ptr<chat_template> tmpl;
  api::served_model m;
  gpt_oss() {
    const std::string src = read_template();
    if (src.empty()) return;
    tmpl = std::make_unique<chat_template>(src, "<|startoftext|>", "<|return|>");
    m.tok = &tiny_tokenizer();
    m.n_vocab = 6;
    m.max_model_len = 1 << 20;
    m.name = "gpt-oss";
    m.tmpl = tmpl.get();
    m.reasoning = api::detect_reasoning_parser(*tmpl);
    m.tool_format = api::detect_tool_call_format(src);
  }
};

#define SPATE_NEED_TEMPLATE(g)                                                                  \
  do {                                                                                          \
    if (!(g).tmpl) {                                                                            \
      if (testdata_required()) FAIL() << "missing openai-gpt-oss-120b.jinja (SPATE_REQUIRE_TESTDATA)"; \
      GTEST_SKIP() << "missing openai-gpt-oss-120b.jinja";                                      \
    }                                                                                           \
  } while (0)

std::optional<api::api_error> prepare(const api::served_model& m, api::endpoint kind, const std::string& body, prepared_generation& g) {
  api::parsed_request r;
  if (auto e = api::parse_request(kind, body, r)) return e;
  return prepare_generation(m, r, g);
}

TEST(HarmonyPrepare, ReasoningEffortGoesToTheSystemMessage) {
  gpt_oss h;
  SPATE_NEED_TEMPLATE(h);
  EXPECT_EQ(h.m.reasoning, api::reasoning_parser::openai_gptoss);
  EXPECT_EQ(h.m.tool_format, api::tool_call_format::openai);
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  for (const std::string effort : {"low", "medium", "high"}) {
    prepared_generation g;
    ASSERT_FALSE(prepare(h.m, api::endpoint::chat_completions, "{" + msgs + R"(,"reasoning_effort":")" + effort + "\"}", g));
    EXPECT_NE(g.prompt_text.find("Reasoning: " + effort + "\n"), std::string::npos) << g.prompt_text;
    EXPECT_TRUE(g.prompt_text.ends_with("<|start|>assistant"));
    ASSERT_TRUE(g.harmony.has_value());
    EXPECT_TRUE(g.harmony->reasoning);
    EXPECT_FALSE(g.harmony->open_header.has_value());
    EXPECT_FALSE(g.reasoning.has_value());
    g = {};
    ASSERT_FALSE(prepare(h.m, api::endpoint::responses, R"({"input":"hi","reasoning":{"effort":")" + effort + R"(","summary":"auto"}})", g));
    EXPECT_NE(g.prompt_text.find("Reasoning: " + effort + "\n"), std::string::npos);
  }
  // chat_template_kwargs, when it sets the variable, wins.
  prepared_generation g;
  ASSERT_FALSE(prepare(h.m, api::endpoint::chat_completions,
                       "{" + msgs + R"(,"reasoning_effort":"low","chat_template_kwargs":{"reasoning_effort":"high"}})", g));
  EXPECT_NE(g.prompt_text.find("Reasoning: high\n"), std::string::npos);
  // Bad values are a 400 naming the field.
  const auto err = prepare(h.m, api::endpoint::chat_completions, "{" + msgs + R"(,"reasoning_effort":"max"})", g);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->param, "reasoning_effort");
  EXPECT_NE(err->message.find("\"low\", \"medium\" or \"high\""), std::string::npos) << err->message;
  const auto err2 = prepare(h.m, api::endpoint::responses, R"({"input":"hi","reasoning":{"effort":3}})", g);
  ASSERT_TRUE(err2.has_value());
  EXPECT_EQ(err2->param, "reasoning.effort");
  const auto err3 = prepare(h.m, api::endpoint::responses, R"({"input":"hi","reasoning":{"summary":"long"}})", g);
  ASSERT_TRUE(err3.has_value());
  EXPECT_EQ(err3->param, "reasoning.summary");
  // A budget becomes the harmony constraint (which closes the analysis message).
  g = {};
  h.m.harmony_tokens = std::make_shared<const api::harmony_vocab>(tiny_tokenizer());
  ASSERT_FALSE(prepare(h.m, api::endpoint::chat_completions, "{" + msgs + R"(,"thinking_token_budget":5})", g));
  EXPECT_TRUE(g.params.constraint != nullptr);
}

TEST(HarmonyPrepare, EarlierReasoningAndCallsRenderAndReadBack) {
  gpt_oss h;
  SPATE_NEED_TEMPLATE(h);
  const std::string body = R"({"messages":[{"role":"user","content":"Weather in Paris?"},
      {"role":"assistant","content":null,"reasoning_content":"I should call get_weather.",
       "tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"sunny"}],)" + k_tools + "}";
  prepared_generation g;
  const auto err = prepare(h.m, api::endpoint::chat_completions, body, g);
  ASSERT_FALSE(err.has_value()) << err->message;
  const std::string call = "<|start|>assistant<|channel|>analysis<|message|>I should call get_weather.<|end|>"
                           "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>";
  EXPECT_NE(g.prompt_text.find(call), std::string::npos) << g.prompt_text;
  EXPECT_NE(g.prompt_text.find("<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"sunny\"<|end|>"),
            std::string::npos);
  EXPECT_EQ(g.tool_format, api::tool_call_format::openai);
  ASSERT_TRUE(g.harmony.has_value());
  // What the template wrote for the call, read back as the model's output (after "<|start|>assistant").
  const std::string written = call.substr(call.find(" to="), call.size() - call.find(" to=") - std::string("<|call|>").size());
  api::tool_call_ids ids(1);
  const api::parsed_output p = api::parse_output(g.output(), k_analysis + "I should call get_weather." + k_next + written, ids, false);
  EXPECT_EQ(p.reasoning, "I should call get_weather.");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"city": "Paris"})"));
}

TEST(HarmonyPrepare, ContinueFinalMessageStartsInItsText) {
  gpt_oss h;
  SPATE_NEED_TEMPLATE(h);
  prepared_generation g;
  ASSERT_FALSE(prepare(h.m, api::endpoint::chat_completions,
                       R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello"}],)"
                       R"("continue_final_message":true})",
                       g));
  EXPECT_TRUE(g.prompt_text.ends_with("<|start|>assistant<|channel|>final<|message|>Hello")) << g.prompt_text;
  ASSERT_TRUE(g.harmony.has_value());
  EXPECT_EQ(g.harmony->open_header, std::optional<std::string>("assistant<|channel|>final"));
  api::tool_call_ids ids(1);
  EXPECT_EQ(api::parse_output(g.output(), " there!", ids, false).content, " there!");
}

TEST(HarmonyPrepare, StructuredOutputsAndToolsBecomeAHarmonyConstraint) {
  gpt_oss h;
  SPATE_NEED_TEMPLATE(h);
  api::constraint_compiler cc(tiny_tokenizer());
  h.m.constraints = &cc;
  h.m.harmony_tokens = std::make_shared<const api::harmony_vocab>(tiny_tokenizer());
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  prepared_generation g;
  ASSERT_FALSE(prepare(h.m, api::endpoint::chat_completions, "{" + msgs + R"(,"guided_choice":["a","b"]})", g));
  ASSERT_NE(g.params.constraint, nullptr);
  EXPECT_TRUE(g.params.constraint->start()->can_end()) << "the analysis comes first, unconstrained";
  g = {};
  ASSERT_FALSE(prepare(h.m, api::endpoint::chat_completions, "{" + msgs + "," + k_tools + R"(,"tool_choice":"required"})", g));
  ASSERT_NE(g.params.constraint, nullptr);
  EXPECT_FALSE(g.params.constraint->start()->can_end()) << "a call is required";
  g = {};
  ASSERT_FALSE(prepare(h.m, api::endpoint::chat_completions, "{" + msgs + "," + k_tools + "}", g));
  ASSERT_NE(g.params.constraint, nullptr) << "the arguments follow their schemas";
  EXPECT_TRUE(g.params.constraint->start()->can_end());
  g = {};
  ASSERT_FALSE(prepare(h.m, api::endpoint::chat_completions, "{" + msgs + "}", g));
  EXPECT_EQ(g.params.constraint, nullptr);
}

}  // namespace
}  // namespace spate
