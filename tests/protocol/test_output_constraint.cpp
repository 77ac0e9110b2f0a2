// Structured-output and tool fields of request bodies: every accepted
// spelling lands in one output_constraint / tool_request, and Responses
// function tools and call items become their chat equivalents.
#include <gtest/gtest.h>

#include "protocol/openai_request.h"

namespace spate::api {
namespace {

using kind = output_constraint::kind;
namespace json = boost::json;

parsed_request parse_ok(endpoint e, const std::string& body) {
  parsed_request r;
  const auto err = parse_request(e, body, r);
  EXPECT_FALSE(err.has_value()) << body << ": " << (err ? err->message : "");
  return r;
}

parsed_request chat(const std::string& extra) {
  return parse_ok(endpoint::chat_completions, R"({"messages":[{"role":"user","content":"hi"}],)" + extra + "}");
}

TEST(OutputConstraint, EverySpellingOfChatAndCompletions) {
  struct spelling {
    std::string fields;
    kind want;
    std::string param;
  };
  const std::vector<spelling> cases = {
      {R"("response_format": {"type": "json_object"})", kind::json_object, "response_format"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}, "strict": true}})",
       kind::json_schema, "response_format.json_schema.schema"},
      {R"("structured_outputs": {"json": {"type": "integer"}})", kind::json_schema, "structured_outputs.json"},
      {R"("structured_outputs": {"regex": "a+"})", kind::regex, "structured_outputs.regex"},
      {R"("structured_outputs": {"choice": ["x", "y"]})", kind::choice, "structured_outputs.choice"},
      {R"("structured_outputs": {"grammar": "root ::= \"a\""})", kind::grammar, "structured_outputs.grammar"},
      {R"("structured_outputs": {"json_object": true})", kind::json_object, "structured_outputs.json_object"},
      {R"("guided_json": "{\"type\": \"string\"}")", kind::json_schema, "guided_json"},
      {R"("guided_regex": "[0-9]+")", kind::regex, "guided_regex"},
      {R"("guided_choice": ["a"])", kind::choice, "guided_choice"},
      {R"("guided_grammar": "root ::= \"a\"")", kind::grammar, "guided_grammar"},
      {R"("json_schema": {"type": "object"})", kind::json_schema, "json_schema"},
      {R"("grammar": "root ::= \"a\"")", kind::grammar, "grammar"},
      {R"("response_format": {"type": "text"})", kind::none, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fields);
    const parsed_request r = chat(c.fields);
    EXPECT_EQ(r.constraint.type, c.want);
    EXPECT_EQ(r.constraint.param, c.param);
    const parsed_request p = parse_ok(endpoint::completions, R"({"prompt": "x", )" + c.fields + "}");
    EXPECT_EQ(p.constraint.type, c.want);
  }
  EXPECT_EQ(chat(R"("guided_json": "{\"type\": \"string\"}")").constraint.schema, json::parse(R"({"type":"string"})"));
  EXPECT_EQ(chat(R"("guided_choice": ["a", "b"])").constraint.choices, (std::vector<std::string>{"a", "b"}));
}

TEST(OutputConstraint, ResponsesTextFormat) {
  const parsed_request r = parse_ok(
      endpoint::responses, R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "p", "schema": {"type": "object"}}}})");
  EXPECT_EQ(r.constraint.type, kind::json_schema);
  EXPECT_EQ(r.constraint.param, "text.format.schema");
  EXPECT_EQ(parse_ok(endpoint::responses, R"({"input": "x", "text": {"format": {"type": "json_object"}}})").constraint.type,
            kind::json_object);
}

TEST(ToolRequest, ChoiceModes) {
  const std::string tools = R"("tools": [{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}])";
  using choice = tool_request::choice;
  EXPECT_EQ(chat(tools).tool_use.mode, choice::automatic);
  EXPECT_EQ(chat(tools + R"(, "tool_choice": "none")").tool_use.mode, choice::none);
  EXPECT_FALSE(chat(tools + R"(, "tool_choice": "none")").template_extra.contains("tools"));
  EXPECT_EQ(chat(tools + R"(, "tool_choice": "required")").tool_use.mode, choice::required);
  const parsed_request named = chat(tools + R"(, "tool_choice": {"type":"function","function":{"name":"g"}}, "parallel_tool_calls": false)");
  EXPECT_EQ(named.tool_use.mode, choice::named);
  EXPECT_EQ(named.tool_use.name, "g");
  EXPECT_FALSE(named.tool_use.parallel);
  EXPECT_EQ(named.tool_use.tools.size(), 2u);
  EXPECT_FALSE(chat("\"temperature\": 1").tool_use.active());
}

TEST(ToolRequest, ResponsesFunctionToolsAndCallItems) {
  const parsed_request r = parse_ok(endpoint::responses, R"({
    "input": [
      {"role": "user", "content": "weather?"},
      {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call", "call_id": "c2", "name": "get", "arguments": "{\"city\": \"Rome\"}"},
      {"type": "function_call_output", "call_id": "c1", "output": "sunny"}
    ],
    "tools": [{"type": "function", "name": "get", "description": "d", "parameters": {"type": "object"}}],
    "tool_choice": {"type": "function", "name": "get"}})");
  EXPECT_EQ(r.tool_use.mode, tool_request::choice::named);
  ASSERT_EQ(r.tool_use.tools.size(), 1u);
  EXPECT_EQ(r.tool_use.tools[0].at("function").at("name"), "get");
  EXPECT_EQ(r.tool_use.tools[0].at("function").at("parameters"), json::parse(R"({"type":"object"})"));
  EXPECT_TRUE(r.template_extra.contains("tools"));
  ASSERT_EQ(r.messages.size(), 3u);  // user, one assistant turn with both calls, the tool result
  const json::object& calls_msg = r.messages[1].as_object();
  EXPECT_EQ(calls_msg.at("role"), "assistant");
  ASSERT_EQ(calls_msg.at("tool_calls").as_array().size(), 2u);
  EXPECT_EQ(calls_msg.at("tool_calls").as_array()[1].at("function").at("arguments"), json::parse(R"({"city":"Rome"})"));
  EXPECT_EQ(r.messages[2].at("role"), "tool");
  EXPECT_EQ(r.messages[2].at("tool_call_id"), "c1");
  EXPECT_EQ(r.messages[2].at("content"), "sunny");
}

TEST(ToolRequest, ResponsesReasoningItemsJoinTheTurnThatFollows) {
  const parsed_request r = parse_ok(endpoint::responses, R"({
    "input": [
      {"role": "user", "content": "weather?"},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Call get."}]},
      {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": " Now."}]},
      {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
      {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "It is sunny."}]},
      {"role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]},
      {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "Alone."}]},
      {"role": "user", "content": "thanks"}
    ],
    "tools": [{"type": "function", "name": "get"}]})");
  ASSERT_EQ(r.messages.size(), 6u);  // user, calls, tool, answer, reasoning alone, user
  const json::object& calls = r.messages[1].as_object();
  EXPECT_EQ(calls.at("reasoning_content"), "Call get. Now.");
  ASSERT_EQ(calls.at("tool_calls").as_array().size(), 1u);
  const json::object& answer = r.messages[3].as_object();
  EXPECT_EQ(answer.at("role"), "assistant");
  EXPECT_EQ(answer.at("reasoning_content"), "It is sunny.");
  EXPECT_EQ(answer.at("content"), "Sunny.");
  EXPECT_FALSE(answer.contains("tool_calls"));
  EXPECT_EQ(r.messages[4].at("reasoning_content"), "Alone.");
  EXPECT_EQ(r.messages[4].at("content"), "");
  EXPECT_EQ(r.messages[5].at("role"), "user");
}

TEST(ToolRequest, BadReasoningItemsAreA400NamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "reasoning"})", "input[0].content"},
      {R"({"type": "reasoning", "content": "x"})", "input[0].content"},
      {R"({"type": "reasoning", "content": [{"type": "output_text", "text": "x"}]})", "input[0].content[0].type"},
      {R"({"type": "reasoning", "content": [{"type": "reasoning_text", "text": 3}]})", "input[0].content[0].text"},
      {R"({"type": "reasoning", "summary": [], "encrypted_content": "gAAA"})", "input[0].encrypted_content"},
  };
  for (const auto& [item, param] : cases) {
    SCOPED_TRACE(item);
    parsed_request r;
    const auto err = parse_request(endpoint::responses, R"({"input": [)" + item + "]}", r);
    ASSERT_TRUE(err.has_value());
    EXPECT_EQ(err->status, 400);
    EXPECT_EQ(err->param, param);
  }
}

}  // namespace
}  // namespace spate::api

namespace spate::api {
namespace {

// Fields of the OpenAI / vLLM APIs that are not implemented are refused by
// name unless they carry their "off" value; a few are ignored on purpose.
TEST(RequestFields, UnsupportedFieldsAreRefusedByName) {
  struct refusal {
    endpoint kind;
    std::string body;
    std::string param;
  };
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  const std::vector<refusal> cases = {
      {endpoint::completions, R"({"prompt":"x","best_of":3})", "best_of"},
      {endpoint::chat_completions, "{" + msgs + R"(,"best_of":2,"n":1})", "best_of"},
      {endpoint::chat_completions, "{" + msgs + R"(,"use_beam_search":true})", "use_beam_search"},
      {endpoint::chat_completions, "{" + msgs + R"(,"functions":[{"name":"f"}]})", "functions"},
      {endpoint::chat_completions, "{" + msgs + R"(,"modalities":["text","audio"]})", "modalities"},
      {endpoint::chat_completions, "{" + msgs + R"(,"prompt_logprobs":1})", "prompt_logprobs"},
      {endpoint::chat_completions, "{" + msgs + R"(,"skip_special_tokens":false})", "skip_special_tokens"},
      {endpoint::responses, R"({"input":"x","max_tool_calls":3})", "max_tool_calls"},
      {endpoint::responses, R"({"input":"x","include":["file_search_call.results"]})", "include"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    parsed_request r;
    const auto err = parse_request(c.kind, c.body, r);
    ASSERT_TRUE(err.has_value());
    EXPECT_EQ(err->param, c.param);
    EXPECT_NE(err->message.find("'" + c.param + "' is not supported"), std::string::npos) << err->message;
  }
  // Off values pass, and the ignored-on-purpose fields are not "unknown".
  parsed_request r;
  EXPECT_FALSE(parse_request(endpoint::chat_completions,
                             "{" + msgs + R"(,"best_of":2,"n":2,"use_beam_search":false,"modalities":["text"],"skip_special_tokens":true,)"
                                 R"("user":"u","metadata":{"a":"b"},"store":false,"functions":[],"whatever":1})",
                             r)
                   .has_value());
  EXPECT_EQ(r.unknown_fields, std::vector<std::string>{"whatever"});
}

}  // namespace
}  // namespace spate::api
