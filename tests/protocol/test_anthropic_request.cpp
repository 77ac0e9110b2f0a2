// Anthropic's Messages bodies translated into chat requests (protocol/anthropic_request.h).
#include <gtest/gtest.h>

#include "protocol/anthropic_request.h"

namespace spate::api {
namespace {

namespace json = boost::json;

parsed_request parse_ok(const std::string& body, bool count_only = false) {
  parsed_request r;
  const auto err = parse_messages_request(body, r, count_only);
  EXPECT_FALSE(err) << (err ? err->message : "");
  return r;
}

std::string parse_err(const std::string& body) {
  parsed_request r;
  const auto err = parse_messages_request(body, r);
  EXPECT_TRUE(err) << body;
  return err ? err->message : "";
}

TEST(AnthropicRequest, TranslatesSystemMessagesAndSampling) {
  const parsed_request r = parse_ok(R"({"model":"m","max_tokens":32,"system":[{"type":"text","text":"Be brief."}],
    "messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":"c"}],
    "stop_sequences":["END"],"temperature":0.5,"top_k":4,"stream":true,"metadata":{"user_id":"u"},"output_config":{}})");
  EXPECT_EQ(r.kind, endpoint::messages);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].at("role"), "system");
  EXPECT_EQ(r.messages[0].at("content"), "Be brief.");
  EXPECT_EQ(r.messages[1].at("content"), "a\nb");
  EXPECT_EQ(r.messages[2].at("role"), "assistant");
  EXPECT_EQ(*r.params.max_tokens, 32);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(r.params.temperature, 0.5f);
  EXPECT_EQ(r.params.top_k, 4);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.unknown_fields, std::vector<std::string>{"output_config"});
}

TEST(AnthropicRequest, TranslatesToolUseAndToolResults) {
  const parsed_request r = parse_ok(R"({"max_tokens":8,"tools":[{"name":"w","description":"d","input_schema":{"type":"object"}}],
    "tool_choice":{"type":"tool","name":"w","disable_parallel_tool_use":true},
    "messages":[{"role":"user","content":"q"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"t"},
                                     {"type":"tool_use","id":"toolu_1","name":"w","input":{"city":"Rome"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"}]},
                                {"type":"text","text":"thanks"}]}]})");
  ASSERT_EQ(r.messages.size(), 4u);
  const json::object& a = r.messages[1].as_object();
  EXPECT_EQ(a.at("content"), "t");
  const json::object& call = a.at("tool_calls").as_array()[0].as_object();
  EXPECT_EQ(call.at("id"), "toolu_1");
  EXPECT_EQ(call.at("function").at("name"), "w");
  EXPECT_EQ(r.messages[2].at("role"), "tool");
  EXPECT_EQ(r.messages[2].at("tool_call_id"), "toolu_1");
  EXPECT_EQ(r.messages[2].at("content"), "sunny");
  EXPECT_EQ(r.messages[3].at("content"), "thanks");
  EXPECT_EQ(r.tool_use.mode, tool_request::choice::named);
  EXPECT_EQ(r.tool_use.name, "w");
  EXPECT_FALSE(r.tool_use.parallel);
  EXPECT_EQ(parse_ok(R"({"max_tokens":8,"tools":[{"name":"w","input_schema":{}}],"tool_choice":{"type":"any"},
    "messages":[{"role":"user","content":"q"}]})").tool_use.mode, tool_request::choice::required);
}

TEST(AnthropicRequest, RefusesWhatItCannotServeNamingIt) {
  EXPECT_EQ(parse_err(R"({"messages":[{"role":"user","content":"x"}]})"), "max_tokens: Field required");
  EXPECT_NE(parse_err(R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})").find("'image'"),
            std::string::npos);
  EXPECT_NE(parse_err(R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"nope"}]}]})")
                .find("'nope' names no tool_use"),
            std::string::npos);
  EXPECT_NE(parse_err(R"({"max_tokens":4,"tools":[{"type":"web_search_20250305","name":"s"}],"messages":[{"role":"user","content":"x"}]})")
                .find("server tool"),
            std::string::npos);
  EXPECT_NE(parse_err(R"({"max_tokens":4,"messages":[{"role":"system","content":"x"}]})").find("messages[0].role"), std::string::npos);
  EXPECT_NE(parse_err(R"({"max_tokens":4,"messages":[]})").find("at least one"), std::string::npos);
  EXPECT_NE(parse_err(R"({"max_tokens":"4","messages":[{"role":"user","content":"x"}]})"), "");
  EXPECT_NE(parse_err(R"({"max_tokens":4,"tool_choice":{"type":"some"},"messages":[{"role":"user","content":"x"}]})").find("tool_choice.type"),
            std::string::npos);
  EXPECT_NE(parse_err("{not json").find("malformed JSON"), std::string::npos);
}

TEST(AnthropicRequest, ErrorsNameTheClientsFields) {
  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  for (const char* budget : {R"("many")", "-1", "1.5", "99999999999"}) {
    parsed_request r;
    const auto err = parse_messages_request(R"({"max_tokens":4,"thinking":{"type":"enabled","budget_tokens":)" + std::string(budget) + "}," + msgs + "}", r);
    ASSERT_TRUE(err) << budget;
    EXPECT_EQ(err->param, "thinking.budget_tokens") << budget;
    EXPECT_NE(err->message.find("thinking.budget_tokens"), std::string::npos) << err->message;
    EXPECT_EQ(err->message.find("thinking_token_budget"), std::string::npos) << err->message;
  }
  parsed_request r;
  auto err = parse_messages_request(R"({"max_tokens":4,"stop_sequences":["a",5],)" + msgs + "}", r);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "stop_sequences[1]");
  EXPECT_TRUE(err->message.starts_with("'stop_sequences' must be a string or a list of strings, got ")) << err->message;
  EXPECT_TRUE(err->message.ends_with(" at stop_sequences[1]")) << err->message;
  err = parse_messages_request(R"({"max_tokens":4,"stop_sequences":[""],)" + msgs + "}", r);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "stop_sequences");
  EXPECT_EQ(err->message.find("'stop'"), std::string::npos) << err->message;
  // A valid budget: the later checks (prepare_generation) name the client's field too.
  const parsed_request ok = parse_ok(R"({"max_tokens":4,"thinking":{"type":"enabled","budget_tokens":1024},)" + msgs + "}");
  EXPECT_EQ(ok.thinking_token_budget, 1024);
  EXPECT_EQ(ok.thinking_budget_field, "thinking.budget_tokens");
  EXPECT_EQ(parsed_request{}.thinking_budget_field, "thinking_token_budget");
}

TEST(AnthropicRequest, CountTokensNeedsNoMaxTokens) {
  parse_ok(R"({"messages":[{"role":"user","content":"x"}]})", /*count_only=*/true);
  parsed_request r;
  EXPECT_TRUE(parse_messages_request(R"({"stream":true,"messages":[{"role":"user","content":"x"}]})", r, true));
}

TEST(AnthropicRequest, ErrorShapeAndTypes) {
  EXPECT_EQ(anthropic_error_body(400, "bad"), R"({"type":"error","error":{"type":"invalid_request_error","message":"bad"}})");
  EXPECT_STREQ(anthropic_error_type(401), "authentication_error");
  EXPECT_STREQ(anthropic_error_type(404), "not_found_error");
  EXPECT_STREQ(anthropic_error_type(413), "request_too_large");
  EXPECT_STREQ(anthropic_error_type(429), "rate_limit_error");
  EXPECT_STREQ(anthropic_error_type(500), "api_error");
  EXPECT_STREQ(anthropic_error_type(503), "overloaded_error");
}

}  // namespace
}  // namespace spate::api
