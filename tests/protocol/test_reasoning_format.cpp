// Reasoning in requests and responses: the request fields (chat_template_kwargs
// bounds, include_reasoning, thinking_token_budget), prepare_generation's
// reasoning start and constraint, and the formatters: chat's
// reasoning_content (streamed pieces add up to the non-streamed message, at
// every cut of the output), tool calls parsed from the content alone, and the
// Responses API's reasoning item and events. Synthetic engine events; a
// six-token vocabulary.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "jinja/chat_template.h"
#include "protocol/completions_format.h"
#include "protocol/generation.h"
#include "protocol/generation_format.h"
#include "protocol/reasoning_constraint.h"
#include "format_test_util.h"
#include "tokenizer/tokenizer.h"

namespace spate {
namespace {

namespace json = boost::json;
using api::reasoning_start;
using test::tiny_tokenizer;

std::optional<api::api_error> parse_error(const std::string& body) {
  api::parsed_request r;
  return api::parse_request(api::endpoint::chat_completions, body, r);
}

std::string chat(const std::string& extra) { return R"({"messages":[{"role":"user","content":"hi"}],)" + extra + "}"; }

TEST(ReasoningRequest, FieldsAndBounds) {
  api::parsed_request r;
  ASSERT_FALSE(api::parse_request(api::endpoint::chat_completions,
                                  chat(R"("include_reasoning":false,"thinking_token_budget":7,"chat_template_kwargs":{"enable_thinking":true})"), r));
  EXPECT_FALSE(r.include_reasoning);
  EXPECT_EQ(r.thinking_token_budget, 7);
  EXPECT_EQ(r.template_extra.at("enable_thinking"), true);

  struct bad_case {
    std::string body, param, message;
  };
  json::object many;
  for (int i = 0; i <= 64; ++i) many["k" + std::to_string(i)] = i;
  const std::string deep = std::string(9, '[') + std::string(9, ']');
  const std::vector<bad_case> bad = {
      {chat(R"("chat_template_kwargs":{"enable_thinking":"false"})"), "chat_template_kwargs.enable_thinking",
       "'chat_template_kwargs.enable_thinking' must be a boolean"},
      {chat(R"("chat_template_kwargs":)" + json::serialize(many)), "chat_template_kwargs", "at most 64 are allowed"},
      {chat(R"("chat_template_kwargs":{"x":)" + deep + "}"), "chat_template_kwargs.x", "nested deeper than 8 levels"},
      {chat(R"("chat_template_kwargs":{"x":")" + std::string(70000, 'a') + "\"}"), "chat_template_kwargs", "at most 65536 are allowed"},
      {chat(R"("include_reasoning":"yes")"), "include_reasoning", "'include_reasoning' must be a boolean"},
      {chat(R"("thinking_token_budget":-1)"), "thinking_token_budget", "must be in [0, 2147483647], got -1"},
      {chat(R"("thinking_token_budget":1.5)"), "thinking_token_budget", "'thinking_token_budget' must be an integer"},
  };
  for (const auto& b : bad) {
    const auto err = parse_error(b.body);
    ASSERT_TRUE(err.has_value()) << b.param;
    EXPECT_EQ(err->status, 400);
    EXPECT_EQ(err->param, b.param);
    EXPECT_NE(err->message.find(b.message), std::string::npos) << err->message;
  }
  // Within the bounds: 8 levels, 64 keys.
  EXPECT_FALSE(parse_error(chat(R"("chat_template_kwargs":{"x":)" + std::string(8, '[') + std::string(8, ']') + "}")));
  many.erase("k64");
  EXPECT_FALSE(parse_error(chat(R"("chat_template_kwargs":)" + json::serialize(many))));
}

// A served model with a template that opens <think> when asked to.
struct reasoning_model {
  chat_template tmpl{"{% for m in messages %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}|{% if think %}<think>\n"
                     "{% else %}<think></think>{% endif %}{% endif %}",
                     "<s>", "</s>"};
  api::served_model m;
  explicit reasoning_model(api::reasoning_parser p) {
    m.tok = &tiny_tokenizer();
    m.n_vocab = 6;
    m.max_model_len = 64;
    m.name = "tiny";
    m.tmpl = &tmpl;
    m.reasoning = p;
    if (p != api::reasoning_parser::none) m.reasoning_tokens = std::make_shared<const api::reasoning_vocab>(tiny_tokenizer());
  }
};

TEST(ReasoningPrepare, StartFromThePromptAndTheBudgetConstraint) {
  reasoning_model rm(api::reasoning_parser::qwen3);
  api::parsed_request r;
  prepared_generation g;
  ASSERT_FALSE(api::parse_request(api::endpoint::chat_completions, chat(R"("chat_template_kwargs":{"think":true})"), r));
  ASSERT_FALSE(prepare_generation(rm.m, r, g));
  EXPECT_EQ(g.prompt_text, "hi|<think>\n");
  EXPECT_EQ(g.reasoning, reasoning_start::reasoning);
  EXPECT_EQ(g.params.constraint, nullptr);  // no grammar, no budget: nothing to constrain

  ASSERT_FALSE(api::parse_request(api::endpoint::chat_completions, chat(R"("thinking_token_budget":0)"), r));
  g = {};
  ASSERT_FALSE(prepare_generation(rm.m, r, g));
  EXPECT_EQ(g.reasoning, reasoning_start::content);  // "<think></think>" closed it
  EXPECT_EQ(g.params.constraint, nullptr);           // no reasoning to bound

  ASSERT_FALSE(api::parse_request(api::endpoint::chat_completions, chat(R"("thinking_token_budget":0,"chat_template_kwargs":{"think":true})"), r));
  g = {};
  ASSERT_FALSE(prepare_generation(rm.m, r, g));
  ASSERT_NE(g.params.constraint, nullptr);
  auto c = g.params.constraint->start();
  EXPECT_FALSE(c->can_end()) << "budget 0 forces </think> first";

  // Completions are never split.
  ASSERT_FALSE(api::parse_request(api::endpoint::completions, R"({"prompt":"hi"})", r));
  g = {};
  ASSERT_FALSE(prepare_generation(rm.m, r, g));
  EXPECT_FALSE(g.reasoning.has_value());

  reasoning_model plain(api::reasoning_parser::none);
  ASSERT_FALSE(api::parse_request(api::endpoint::chat_completions, chat(R"("thinking_token_budget":5)"), r));
  g = {};
  const auto err = prepare_generation(plain.m, r, g);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->param, "thinking_token_budget");
  EXPECT_NE(err->message.find("--reasoning-parser"), std::string::npos) << err->message;
}

using run = test::format_run;
using test::feed;
using test::streamed_message;
using test::types_of;

std::unique_ptr<run> start(api::endpoint kind, const std::string& body, std::optional<reasoning_start> rs,
                           std::optional<api::tool_call_format> tools = std::nullopt) {
  return test::start_run(kind, body, [&](run& x) {
    x.g.reasoning = rs;
    x.g.tool_format = tools;
  });
}

const std::string k_stream = R"({"messages":[{"role":"user","content":"hi"}],"stream":true})";
const std::string k_plain = R"({"messages":[{"role":"user","content":"hi"}]})";

TEST(ReasoningChat, StreamedPiecesNeverCarryAPartialTag) {
  auto x = start(api::endpoint::chat_completions, k_stream, reasoning_start::optional);
  feed(*x, {"<thi", "nk>ab", "c</th", "ink>\n\nDone"});
  std::vector<json::object> deltas;
  for (const auto& e : x->events) {
    if (e.data != "[DONE]") deltas.push_back(json::parse(e.data).at("choices").at(0).at("delta").as_object());
  }
  ASSERT_EQ(deltas.size(), 5u);  // role, "ab", "c", content, finish
  EXPECT_EQ(deltas[1], (json::object{{"reasoning_content", "ab"}, {"reasoning", "ab"}}));
  EXPECT_EQ(deltas[2], (json::object{{"reasoning_content", "c"}, {"reasoning", "c"}}));
  EXPECT_EQ(deltas[3], (json::object{{"content", "\n\nDone"}}));
  EXPECT_EQ(deltas[4], json::object());
}

// For each output and each way of cutting it into three events, streaming
// and non-streaming agree, with either parser start.
TEST(ReasoningChat, StreamedEqualsNonStreamedAtEveryCut) {
  const std::vector<std::pair<reasoning_start, std::string>> outputs = {
      {reasoning_start::reasoning, "Let me think.</think>\n\nThe answer is 4."},
      {reasoning_start::reasoning, "<think>\nno end tag"},
      {reasoning_start::optional, "  <think>a<b</think>c"},
      {reasoning_start::optional, "<thinking is not a tag"},
  };
  for (const auto& [rs, text] : outputs) {
    auto whole = start(api::endpoint::chat_completions, k_plain, rs);
    feed(*whole, {text});
    const json::object body = json::parse(whole->f->result().body).as_object();
    const json::object& msg = body.at("choices").at(0).at("message").as_object();
    for (size_t i = 0; i <= text.size(); ++i) {
      for (size_t j = i; j <= text.size(); j += 3) {
        auto x = start(api::endpoint::chat_completions, k_stream, rs);
        const json::object s = streamed_message(feed(*x, {text.substr(0, i), text.substr(i, j - i), text.substr(j)}));
        ASSERT_EQ(s.at("reasoning_content"), msg.at("reasoning_content")) << text << " cut " << i << "," << j;
        ASSERT_EQ(s.at("content"), msg.at("content")) << text << " cut " << i << "," << j;
      }
    }
  }
}

TEST(ReasoningChat, NonStreamedMessageAndIncludeReasoningFalse) {
  auto x = start(api::endpoint::chat_completions, k_plain, reasoning_start::reasoning);
  feed(*x, {"r1 ", "r2</think>", "done"});
  EXPECT_EQ(json::parse(x->f->result().body).at("choices").at(0).at("message"),
            json::parse(R"({"role":"assistant","reasoning_content":"r1 r2","reasoning":"r1 r2","content":"done"})"));
  // No reasoning part: null, as vLLM.
  x = start(api::endpoint::chat_completions, k_plain, reasoning_start::optional);
  feed(*x, {"just content"});
  EXPECT_EQ(json::parse(x->f->result().body).at("choices").at(0).at("message"),
            json::parse(R"({"role":"assistant","reasoning_content":null,"reasoning":null,"content":"just content"})"));
  // include_reasoning false: no field, streamed or not.
  const std::string body = R"({"messages":[{"role":"user","content":"hi"}],"include_reasoning":false)";
  x = start(api::endpoint::chat_completions, body + "}", reasoning_start::reasoning);
  feed(*x, {"secret</think>shown"});
  EXPECT_EQ(json::parse(x->f->result().body).at("choices").at(0).at("message"),
            json::parse(R"({"role":"assistant","content":"shown"})"));
  x = start(api::endpoint::chat_completions, body + R"(,"stream":true})", reasoning_start::reasoning);
  for (const auto& e : feed(*x, {"secret</think>shown"})) EXPECT_EQ(e.data.find("secret"), std::string::npos) << e.data;
}

TEST(ReasoningChat, ToolCallsComeFromTheContentOnly) {
  const std::string tools = R"("tools":[{"type":"function","function":{"name":"f","parameters":{}}}])";
  const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>";
  for (const bool stream : {false, true}) {
    // A call written in the reasoning is not a call.
    auto x = start(api::endpoint::chat_completions, chat(tools + (stream ? R"(,"stream":true)" : "")), reasoning_start::reasoning,
                   api::tool_call_format::hermes);
    feed(*x, {"maybe " + call, "</think>", "No call."});
    if (stream) {
      const json::object s = streamed_message(x->events);
      EXPECT_FALSE(s.contains("tool_calls"));
      EXPECT_EQ(s.at("reasoning_content"), json::value("maybe " + call));
      EXPECT_EQ(s.at("content"), "No call.");
    } else {
      const json::value msg = json::parse(x->f->result().body).at("choices").at(0).at("message");
      EXPECT_FALSE(msg.as_object().contains("tool_calls"));
      EXPECT_EQ(msg.at("content"), "No call.");
    }
    // One in the content is.
    x = start(api::endpoint::chat_completions, chat(tools + (stream ? R"(,"stream":true)" : "")), reasoning_start::reasoning,
              api::tool_call_format::hermes);
    feed(*x, {"plan</think>", call});
    EXPECT_EQ(x->f->finish_reason_text(), "tool_calls");
    if (stream) {
      EXPECT_TRUE(streamed_message(x->events).contains("tool_calls"));
    } else {
      const json::value msg = json::parse(x->f->result().body).at("choices").at(0).at("message");
      EXPECT_EQ(msg.at("reasoning_content"), "plan");
      EXPECT_EQ(msg.at("tool_calls").at(0).at("function").at("name"), "f");
    }
  }
}

TEST(ReasoningResponses, ReasoningItemThenMessageInOrder) {
  auto x = start(api::endpoint::responses, R"({"input":"hi","stream":true})", reasoning_start::reasoning);
  feed(*x, {"a", "b</thi", "nk>", "answer"});
  EXPECT_EQ(types_of(x->events), (std::vector<std::string>{
                                     "response.created", "response.in_progress",
                                     "response.output_item.added", "response.content_part.added",
                                     "response.reasoning_text.delta", "response.reasoning_text.delta",
                                     "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
                                     "response.output_item.added", "response.content_part.added", "response.output_text.delta",
                                     "response.output_text.done", "response.content_part.done", "response.output_item.done",
                                     "response.completed"}));
  const auto ev = [&](size_t i) { return json::parse(x->events[i].data); };
  EXPECT_EQ(ev(2).at("item"), json::parse(R"({"id":"rs-1","type":"reasoning","summary":[],"content":[],"encrypted_content":null,"status":"in_progress"})"));
  EXPECT_EQ(ev(3).at("part"), json::parse(R"({"type":"reasoning_text","text":""})"));
  EXPECT_EQ(ev(4).at("delta"), "a");
  EXPECT_EQ(ev(5).at("delta"), "b");
  EXPECT_EQ(ev(6).at("text"), "ab");
  EXPECT_EQ(ev(6).at("output_index"), 0);
  EXPECT_EQ(ev(6).at("item_id"), "rs-1");
  EXPECT_EQ(ev(8).at("item").at("content"), json::parse(R"([{"type":"reasoning_text","text":"ab"}])"));
  EXPECT_EQ(ev(9).at("output_index"), 1);
  EXPECT_EQ(ev(11).at("delta"), "answer");
  for (size_t i = 0; i < x->events.size(); ++i) EXPECT_EQ(ev(i).at("sequence_number"), static_cast<int64_t>(i));
  const json::value done = ev(x->events.size() - 1).at("response");
  EXPECT_EQ(done.at("output").as_array().size(), 2u);
  EXPECT_EQ(done.at("output_text"), "answer");
  EXPECT_EQ(done.at("usage").at("output_tokens_details").at("reasoning_tokens"), 3);

  // The non-streamed response has the same output.
  auto y = start(api::endpoint::responses, R"({"input":"hi"})", reasoning_start::reasoning);
  feed(*y, {"a", "b</thi", "nk>", "answer"});
  const json::value body = json::parse(y->f->result().body);
  EXPECT_EQ(body.at("output"), done.at("output"));
  EXPECT_EQ(body.at("usage"), done.at("usage"));
}

TEST(ReasoningResponses, NoReasoningPartNoItemAndCutReasoningIsIncomplete) {
  auto x = start(api::endpoint::responses, R"({"input":"hi"})", reasoning_start::optional);
  feed(*x, {"plain"});
  const json::value body = json::parse(x->f->result().body);
  ASSERT_EQ(body.at("output").as_array().size(), 1u);
  EXPECT_EQ(body.at("output").at(0).at("type"), "message");
  EXPECT_EQ(body.at("usage").at("output_tokens_details").at("reasoning_tokens"), 0);

  x = start(api::endpoint::responses, R"({"input":"hi","stream":true})", reasoning_start::reasoning);
  feed(*x, {"still thinking"}, finish_reason::length);
  const json::value last = json::parse(x->events.back().data);
  EXPECT_EQ(x->events.back().type, "response.incomplete");
  EXPECT_EQ(last.at("response").at("output").at(0).at("status"), "incomplete");
  EXPECT_EQ(last.at("response").at("output").at(0).at("content").at(0).at("text"), "still thinking");
  EXPECT_EQ(last.at("response").at("output").at(1).at("type"), "message");
}

}  // namespace
}  // namespace spate
