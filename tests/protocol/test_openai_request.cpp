// Parsing and validation of OpenAI request bodies (server/openai_request.h).
#include "protocol/openai_request.h"

#include <gtest/gtest.h>

#include <string>

namespace spate::api {
namespace {

namespace json = boost::json;

struct bad_case {
  endpoint kind;
  std::string body;
  std::string param;    // expected api_error::param
  std::string message;  // substring of api_error::message
};

std::string kind_name(endpoint k) {
  switch (k) {
    case endpoint::completions: return "completions";
    case endpoint::chat_completions: return "chat";
    case endpoint::responses: return "responses";
    case endpoint::messages: return "messages";
    case endpoint::ollama_chat: return "ollama_chat";
    case endpoint::ollama_generate: return "ollama_generate";
  }
  return "?";
}

constexpr auto C = endpoint::completions;
constexpr auto H = endpoint::chat_completions;
constexpr auto R = endpoint::responses;

// A minimal valid chat body with extra fields spliced in.
std::string chat(const std::string& extra) {
  return R"({"messages":[{"role":"user","content":"hi"}])" + (extra.empty() ? "" : "," + extra) + "}";
}
std::string cmpl(const std::string& extra) {
  return R"({"prompt":"hi")" + (extra.empty() ? "" : "," + extra) + "}";
}

TEST(OpenAiRequest, RejectsInvalidBodies) {
  const std::vector<bad_case> cases = {
      // Body-level problems.
      {C, "", "", "request body is empty"},
      {C, "   \n", "", "request body is empty"},
      {C, "{\"prompt\":\"a\xff\"}", "", "request body is not valid UTF-8 (first invalid byte at offset 12)"},
      {C, "{\"prompt\":\"\xc0\xaf\"}", "", "not valid UTF-8"},          // overlong
      {C, "{\"prompt\":\"\xed\xa0\x80\"}", "", "not valid UTF-8"},      // surrogate
      {C, "{\"prompt\":\"\xe2\x82\"}", "", "not valid UTF-8"},          // truncated
      {C, R"({"prompt": "a",})", "", "malformed JSON: syntax error at offset 15"},
      {C, R"({"prompt": )", "", "malformed JSON: incomplete JSON at offset 11"},
      {C, R"({} x)", "", "malformed JSON: extra data"},
      {C, R"({"prompt": "\ud800"})", "", "malformed JSON"},
      {C, "[1,2]", "", "request body must be a JSON object, got array"},
      {C, "\"hi\"", "", "must be a JSON object, got string"},
      {C, "{\"prompt\":" + std::string(70, '[') + std::string(70, ']') + "}", "", "nested deeper than 64 levels"},
      {C, R"({"model": 5, "prompt": "x"})", "model", "'model' must be a string, got 5"},

      // Completions prompt.
      {C, R"({})", "prompt", "'prompt' is required"},
      {C, R"({"prompt": null})", "prompt", "'prompt' is required"},
      {C, R"({"prompt": ""})", "prompt", "'prompt' must not be empty"},
      {C, R"({"prompt": []})", "prompt", "'prompt' must not be empty"},
      {C, R"({"prompt": [""]})", "prompt[0]", "'prompt[0]' must not be empty"},
      {C, R"({"prompt": [[]]})", "prompt[0]", "'prompt[0]' must not be empty"},
      {C, R"({"prompt": 5})", "prompt", "'prompt' must be a string, a list of token ids, or a list of these, got 5"},
      {C, R"({"prompt": {"a":1}})", "prompt", "got object"},
      {C, R"({"prompt": ["a", ""]})", "prompt[1]", "'prompt[1]' must not be empty"},
      {C, R"({"prompt": [[1], []]})", "prompt[1]", "'prompt[1]' must not be empty"},
      {C, R"({"prompt": ["a", 5]})", "prompt[1]", "'prompt[1]' must be a string or a list of token ids, got 5"},
      {C, R"({"prompt": [[1], [2, -1]]})", "prompt[1][1]", "got -1"},
      {C, R"({"prompt": ["a", "b"], "n": 129})", "n", "n must be in [1, 16]"},
      {C, R"({"prompt": ["a","a","a","a","a","a","a","a","a","a","a","a","a","a","a","a","a"], "n": 16})", "n",
       "prompts x n must be at most 256, got 272"},
      {C, R"({"prompt": [1, "a"]})", "prompt[1]", "'prompt[1]' must be a token id (an integer), got string"},
      {C, R"({"prompt": [1, 2.5]})", "prompt[1]", "got 2.5"},
      {C, R"({"prompt": [1, -1]})", "prompt[1]", "prompt[1] must be a token id in [0, 2147483647], got -1"},
      {C, R"({"prompt": [[1, 3000000000]]})", "prompt[0][1]", "got 3000000000"},
      {C, R"({"prompt": [1, [2]]})", "prompt[1]", "must be a token id"},

      // Completions-specific fields.
      {C, cmpl(R"("logprobs": true)"), "logprobs", "'logprobs' must be an integer, got boolean"},
      {C, cmpl(R"("logprobs": 6)"), "logprobs", "logprobs must be in [0, 5], got 6"},
      {C, cmpl(R"("logprobs": -1)"), "logprobs", "logprobs must be in [0, 5], got -1"},
      {C, cmpl(R"("echo": "yes")"), "echo", "'echo' must be a boolean, got string"},
      {C, cmpl(R"("suffix": "end")"), "suffix", "'suffix' is not supported"},
      {C, cmpl(R"("suffix": 3)"), "suffix", "'suffix' must be a string, got 3"},

      // Sampling fields: types and ranges (shared by completions and chat).
      {C, cmpl(R"("max_tokens": "5")"), "max_tokens", "'max_tokens' must be an integer, got string"},
      {C, cmpl(R"("max_tokens": 1.5)"), "max_tokens", "'max_tokens' must be an integer, got 1.5"},
      {C, cmpl(R"("max_tokens": true)"), "max_tokens", "got boolean"},
      {C, cmpl(R"("max_tokens": [1])"), "max_tokens", "got array"},
      {C, cmpl(R"("max_tokens": 0)"), "max_tokens", "max_tokens must be at least 1, got 0"},
      {C, cmpl(R"("max_tokens": -5)"), "max_tokens", "max_tokens must be at least 1, got -5"},
      {C, cmpl(R"("max_tokens": 1000000000000)"), "max_tokens", "'max_tokens' must be a 32-bit integer, got 1000000000000"},
      {C, cmpl(R"("max_tokens": 1e300)"), "max_tokens", "must be a 32-bit integer, got 1e+300"},
      {C, cmpl(R"("max_tokens": 18446744073709551615)"), "max_tokens", "got 18446744073709551615"},
      {C, cmpl(R"("temperature": "hot")"), "temperature", "'temperature' must be a number, got string"},
      {C, cmpl(R"("temperature": 1e999)"), "temperature", "'temperature' must be a number"},
      {C, cmpl(R"("temperature": -1)"), "temperature", "temperature must be in [0, 2], got -1"},
      {C, cmpl(R"("temperature": 2.5)"), "temperature", "temperature must be in [0, 2], got 2.5"},
      {C, cmpl(R"("top_p": 0)"), "top_p", "top_p must be in (0, 1], got 0"},
      {C, cmpl(R"("top_k": -2)"), "top_k", "top_k must be -1 or 0 (disabled) or at least 1, got -2"},
      {C, cmpl(R"("top_k": 2.5)"), "top_k", "'top_k' must be an integer, got 2.5"},
      {C, cmpl(R"("min_p": 1.5)"), "min_p", "min_p must be in [0, 1], got 1.5"},
      {C, cmpl(R"("repetition_penalty": 0)"), "repetition_penalty", "repetition_penalty must be in (0, 2], got 0"},
      {C, cmpl(R"("presence_penalty": 3)"), "presence_penalty", "presence_penalty must be in [-2, 2], got 3"},
      {C, cmpl(R"("frequency_penalty": -2.5)"), "frequency_penalty", "frequency_penalty must be in [-2, 2], got -2.5"},
      {C, cmpl(R"("seed": "x")"), "seed", "'seed' must be an integer, got string"},
      {C, cmpl(R"("seed": 1.5)"), "seed", "got 1.5"},
      {C, cmpl(R"("stop": 5)"), "stop", "'stop' must be a string or a list of strings, got 5"},
      {C, cmpl(R"("stop": ["a", 1])"), "stop[1]", "'stop' must be a string or a list of strings, got 1 at stop[1]"},
      {C, cmpl(R"("stop": ["a", ""])"), "stop", "'stop' must not contain empty strings"},
      {C, cmpl(R"("stop": "")"), "stop", "'stop' must not contain empty strings"},
      {C, cmpl(R"("stop_token_ids": 3)"), "stop_token_ids", "'stop_token_ids' must be a list of integers, got 3"},
      {C, cmpl(R"("stop_token_ids": [1, "a"])"), "stop_token_ids[1]", "got string at stop_token_ids[1]"},
      {C, cmpl(R"("stop_token_ids": [-1])"), "stop_token_ids", "stop_token_ids entries must be in [0, 999], got -1"},
      {C, cmpl(R"("ignore_eos": 1)"), "ignore_eos", "'ignore_eos' must be a boolean, got 1"},
      {C, cmpl(R"("min_tokens": -1)"), "min_tokens", "min_tokens must be at least 0, got -1"},
      {C, cmpl(R"("min_tokens": 9, "max_tokens": 4)"), "min_tokens", "min_tokens must be at most max_tokens (4), got 9"},
      {C, cmpl(R"("logit_bias": [1])"), "logit_bias", "'logit_bias' must be an object mapping token ids to biases, got array"},
      {C, cmpl(R"("logit_bias": {"x": 1})"), "logit_bias", "'logit_bias' keys must be token ids, got 'x'"},
      {C, cmpl(R"("logit_bias": {" 5": 1})"), "logit_bias", "keys must be token ids, got ' 5'"},
      {C, cmpl(R"("logit_bias": {"99999999999": 1})"), "logit_bias", "keys must be token ids"},
      {C, cmpl(R"("logit_bias": {"5": "a"})"), "logit_bias", "'logit_bias' values must be numbers, got string for token 5"},
      {C, cmpl(R"("logit_bias": {"5": 200})"), "logit_bias", "logit_bias values must be in [-100, 100], got 200 for token 5"},
      {C, cmpl(R"("logit_bias": {"-1": 1})"), "logit_bias", "logit_bias token ids must be in [0, 999], got -1"},
      {C, cmpl(R"("n": 0)"), "n", "n must be in [1, 16], got 0"},
      {C, cmpl(R"("n": 17)"), "n", "n must be in [1, 16], got 17"},
      {C, cmpl(R"("n": -3)"), "n", "n must be in [1, 16], got -3"},
      {C, cmpl(R"("n": "2")"), "n", "'n' must be an integer, got string"},
      {C, cmpl(R"("n": 99999999999)"), "n", "'n' must be a 32-bit integer"},
      {C, cmpl(R"("stream": "true")"), "stream", "'stream' must be a boolean, got string"},
      {C, cmpl(R"("stream_options": {"include_usage": true})"), "stream_options",
       "'stream_options' is only allowed when 'stream' is true"},
      {C, cmpl(R"("stream": true, "stream_options": 1)"), "stream_options", "'stream_options' must be an object, got 1"},
      {C, cmpl(R"("stream": true, "stream_options": {"include_usage": "y"})"), "stream_options.include_usage",
       "'stream_options.include_usage' must be a boolean, got string"},

      // Chat messages.
      {H, R"({})", "messages", "'messages' is required"},
      {H, R"({"messages": []})", "messages", "'messages' must contain at least one message"},
      {H, R"({"messages": "hi"})", "messages", "'messages' must be a list of messages, got string"},
      {H, R"({"messages": ["hi"]})", "messages[0]", "'messages[0]' must be a message object, got string"},
      {H, R"({"messages": [{"content": "hi"}]})", "messages[0].role", "'messages[0].role' is required"},
      {H, R"({"messages": [{"role": 1, "content": "hi"}]})", "messages[0].role", "'messages[0].role' must be a string, got 1"},
      {H, R"({"messages": [{"role":"user","content":"a"},{"role":"bot","content":"hi"}]})", "messages[1].role",
       "unknown role 'bot' in messages[1]; expected one of system, developer, user, assistant, tool"},
      {H, R"({"messages": [{"role":"function","content":"hi"}]})", "messages[0].role", "unknown role 'function'"},
      {H, R"({"messages": [{"role":"user"}]})", "messages[0].content", "'messages[0].content' is required"},
      {H, R"({"messages": [{"role":"user","content":null}]})", "messages[0].content",
       "it may be null only in an assistant message with tool_calls"},
      {H, R"({"messages": [{"role":"assistant","content":null}]})", "messages[0].content", "is required"},
      {H, R"({"messages": [{"role":"assistant","content":null,"tool_calls":[]}]})", "messages[0].content", "is required"},
      {H, R"({"messages": [{"role":"user","content":5}]})", "messages[0].content",
       "'messages[0].content' must be a string or a list of content parts, got 5"},
      {H, R"({"messages": [{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})",
       "messages[0].content[0].type",
       "content part type 'image_url' in messages[0].content[0] is not supported: this server accepts text only"},
      {H, R"({"messages": [{"role":"user","content":[{"type":"input_audio"}]}]})", "messages[0].content[0].type",
       "not supported"},
      {H, R"({"messages": [{"role":"user","content":[{"type":"blob","text":"x"}]}]})", "messages[0].content[0].type",
       "unknown content part type 'blob' in messages[0].content[0]; expected 'text'"},
      {H, R"({"messages": [{"role":"user","content":[{"text":"x"}]}]})", "messages[0].content[0].type", "is required"},
      {H, R"({"messages": [{"role":"user","content":[{"type":"text"}]}]})", "messages[0].content[0].text",
       "'messages[0].content[0].text' is required"},
      {H, R"({"messages": [{"role":"user","content":[{"type":"text","text":3}]}]})", "messages[0].content[0].text",
       "must be a string, got 3"},
      {H, R"({"messages": [{"role":"user","content":["x"]}]})", "messages[0].content[0]",
       "must be a content part object, got string"},
      {H, R"({"messages": [{"role":"user","content":"x","tool_calls":[]}]})", "messages[0].tool_calls",
       "only allowed in assistant messages"},
      {H, R"({"messages": [{"role":"assistant","content":null,"tool_calls":{}}]})", "messages[0].tool_calls",
       "must be a list of tool calls, got object"},
      {H, R"({"messages": [{"role":"assistant","tool_calls":[{"type":"function"}]}]})",
       "messages[0].tool_calls[0].function", "'messages[0].tool_calls[0].function' is required"},
      {H, R"({"messages": [{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}]})",
       "messages[0].tool_calls[0].function.name", "is required"},
      {H, R"({"messages": [{"role":"assistant","tool_calls":[{"type":"web","function":{"name":"f"}}]}]})",
       "messages[0].tool_calls[0].type", "must be \"function\""},
      {H, R"({"messages": [{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":5}}]}]})",
       "messages[0].tool_calls[0].function.arguments", "must be a string or an object, got 5"},
      {H, R"({"messages": [{"role":"tool","content":"x","tool_call_id":5}]})", "messages[0].tool_call_id",
       "'messages[0].tool_call_id' must be a string, got 5"},
      {H, R"({"messages": [{"role":"user","content":"x","name":[]}]})", "messages[0].name", "must be a string, got array"},

      // Chat-specific fields.
      {H, chat(R"("logprobs": 3)"), "logprobs", "'logprobs' must be a boolean, got 3"},
      {H, chat(R"("top_logprobs": 3)"), "top_logprobs", "'top_logprobs' requires 'logprobs' to be true"},
      {H, chat(R"("logprobs": false, "top_logprobs": 3)"), "top_logprobs", "requires 'logprobs' to be true"},
      {H, chat(R"("top_logprobs": 3, "logprobs": false)"), "top_logprobs", "requires 'logprobs' to be true"},
      {H, chat(R"("logprobs": true, "top_logprobs": 21)"), "top_logprobs", "top_logprobs must be in [0, 20], got 21"},
      {H, chat(R"("logprobs": true, "top_logprobs": -1)"), "top_logprobs", "top_logprobs must be in [0, 20], got -1"},
      {H, chat(R"("logprobs": true, "top_logprobs": "2")"), "top_logprobs", "'top_logprobs' must be an integer, got string"},
      {H, chat(R"("max_completion_tokens": 0)"), "max_completion_tokens", "max_completion_tokens must be at least 1, got 0"},
      {H, chat(R"("max_completion_tokens": "x")"), "max_completion_tokens", "'max_completion_tokens' must be an integer"},
      {H, chat(R"("max_tokens": 0)"), "max_tokens", "max_tokens must be at least 1, got 0"},
      {H, chat(R"("add_generation_prompt": "no")"), "add_generation_prompt", "must be a boolean, got string"},
      {H, chat(R"("tools": {})"), "tools", "'tools' must be a list of tools, got object"},
      {H, chat(R"("tools": [5])"), "tools[0]", "'tools[0]' must be a tool object, got 5"},
      {H, chat(R"("tools": [{"type":"retrieval"}])"), "tools[0].type", "must be \"function\""},
      {H, chat(R"("tools": [{"type":"function"}])"), "tools[0].function", "'tools[0].function' is required"},
      {H, chat(R"("tools": [{"type":"function","function":{}}])"), "tools[0].function.name", "is required"},
      {H, chat(R"("tools": [{"type":"function","function":{"name":""}}])"), "tools[0].function.name",
       "must be a non-empty string"},
      {H, chat(R"("tools": [{"type":"function","function":{"name":"f","parameters":"x"}}])"),
       "tools[0].function.parameters", "must be an object (a JSON schema), got string"},
      {H, chat(R"("tool_choice": "required")"), "tool_choice", "tool_choice \"required\" requires 'tools'"},
      {H, chat(R"("tool_choice": {"type":"function","function":{"name":"f"}}, "tools": [])"), "tool_choice",
       "tool_choice names 'f', which is not one of 'tools'"},
      {H, chat(R"("tool_choice": {"type":"function","function":{"name":"g"}}, "tools": [{"type":"function","function":{"name":"f"}}])"),
       "tool_choice", "tool_choice names 'g', which is not one of 'tools'"},
      {H, chat(R"("tool_choice": {"type":"function"}, "tools": [{"type":"function","function":{"name":"f"}}])"),
       "tool_choice", "must give the function's name"},
      {H, chat(R"("parallel_tool_calls": "yes")"), "parallel_tool_calls", "must be a boolean"},
      {H, chat(R"("tool_choice": "sometimes")"), "tool_choice", "unknown tool_choice 'sometimes'"},
      {H, chat(R"("tool_choice": "auto")"), "tool_choice", "tool_choice \"auto\" requires 'tools'"},
      {H, chat(R"("tool_choice": 1)"), "tool_choice", "'tool_choice' must be a string or an object, got 1"},
      {H, chat(R"("chat_template_kwargs": [])"), "chat_template_kwargs", "'chat_template_kwargs' must be an object"},
      {H, chat(R"("chat_template_kwargs": {"messages": []})"), "chat_template_kwargs.messages",
       "'chat_template_kwargs' may not set 'messages'"},
      {H, chat(R"("chat_template_kwargs": {"add_generation_prompt": false})"), "chat_template_kwargs.add_generation_prompt",
       "use the top-level field"},
      {H, chat(R"("documents": [1])"), "documents[0]", "'documents[0]' must be an object, got 1"},
      {H, chat(R"("continue_final_message": true)"), "continue_final_message",
       "requires the last message to be an assistant message"},
      {H,
       R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}],"continue_final_message":true,"add_generation_prompt":true})",
       "continue_final_message", "cannot set both 'continue_final_message' and 'add_generation_prompt' to true"},
      {H, chat(R"("response_format": {"type": "xml"})"), "response_format.type", "unknown response_format type 'xml'"},
      {H, chat(R"("response_format": {"type": "json_schema"})"), "response_format.json_schema", "is required"},
      {H, chat(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}})"),
       "response_format.json_schema.schema", "is required"},
      {H, chat(R"("response_format": {"type": "json_schema", "json_schema": {"schema": 5}})"),
       "response_format.json_schema.schema", "must be a JSON schema (an object)"},
      {H, chat(R"("guided_json": "{bad")"), "guided_json", "is not valid JSON"},
      {H, chat(R"("guided_regex": 5)"), "guided_regex", "must be a string"},
      {H, chat(R"("guided_choice": [])"), "guided_choice", "must be a non-empty list of strings"},
      {H, chat(R"("guided_choice": ["a", ""])"), "guided_choice[1]", "must not be empty"},
      {H, chat(R"("structured_outputs": {"regex": "a", "choice": ["b"]})"), "structured_outputs.choice",
       "both constrain the output"},
      {H, chat(R"("structured_outputs": {"whitespace_pattern": " "})"), "structured_outputs.whitespace_pattern", "is not supported"},
      {H, chat(R"("response_format": {"type": "json_object"}, "grammar": "root ::= \"a\"")"), "grammar", "both constrain the output"},
      {H, chat(R"("guided_whitespace_pattern": " ")"), "guided_whitespace_pattern", "is not supported"},
      {H, chat(R"("response_format": "json")"), "response_format", "must be an object, got string"},
      {H, chat(R"("response_format": {})"), "response_format.type", "must be a string"},
      {H, chat(R"("n": 20)"), "n", "n must be in [1, 16], got 20"},
      {H, chat(R"("temperature": null, "top_p": 7)"), "top_p", "top_p must be in (0, 1], got 7"},

      // Responses API.
      {R, R"({})", "input", "'input' is required"},
      {R, R"({"input": 5})", "input", "'input' must be a string or a list of input items, got 5"},
      {R, R"({"input": []})", "input", "'input' must contain at least one item"},
      {R, R"({"input": ["x"]})", "input[0]", "'input[0]' must be an input item object, got string"},
      {R, R"({"input": [{"content":"x"}]})", "input[0].role", "'input[0].role' is required"},
      {R, R"({"input": [{"role":"tool","content":"x"}]})", "input[0].role",
       "unknown role 'tool' in input[0]; expected one of system, developer, user, assistant"},
      {R, R"({"input": [{"role":"user"}]})", "input[0].content", "'input[0].content' is required"},
      {R, R"({"input": [{"role":"user","content":7}]})", "input[0].content", "got 7"},
      {R, R"({"input": [{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]})", "input[0].content[0].type",
       "content part type 'input_image' in input[0].content[0] is not supported"},
      {R, R"({"input": [{"role":"user","content":[{"type":"input_xyz","text":"x"}]}]})", "input[0].content[0].type",
       "unknown content part type 'input_xyz'"},
      {R, R"({"input": [{"type":"web_search_call","id":"c"}]})", "input[0].type",
       "input item type 'web_search_call' in input[0] is not supported"},
      {R, R"({"input": "x", "instructions": 5})", "instructions", "'instructions' must be a string, got 5"},
      {R, R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens", "max_output_tokens must be at least 1, got 0"},
      {R, R"({"input": "x", "max_output_tokens": "9"})", "max_output_tokens", "'max_output_tokens' must be an integer, got string"},
      {R, R"({"input": "x", "temperature": 3})", "temperature", "temperature must be in [0, 2], got 3"},
      {R, R"({"input": "x", "top_p": "a"})", "top_p", "'top_p' must be a number, got string"},
      {R, R"({"input": "x", "stream": 1})", "stream", "'stream' must be a boolean, got 1"},
      {R, R"({"input": "x", "previous_response_id": "resp_1"})", "previous_response_id",
       "'previous_response_id' is not supported"},
      {R, R"({"input": "x", "background": true})", "background", "'background' responses are not supported"},
      {R, R"({"input": "x", "tools": [{"type":"web_search"}]})", "tools[0].type", "tool type 'web_search' is not supported"},
      {R, R"({"input": "x", "tools": [{"type":"function"}]})", "tools[0].name", "is required"},
      {R, R"({"input": "x", "tools": [{"type":"function","name":"f"}], "tool_choice": {"type":"function","name":"g"}})",
       "tool_choice", "not one of 'tools'"},
      {R, R"({"input": [{"type":"function_call","call_id":"c1","name":"f","arguments":"[1]"}]})", "input[0].arguments",
       "must be a JSON object in a string"},
      {R, R"({"input": [{"type":"function_call_output","call_id":"c1"}]})", "input[0].output", "is required"},
      {R, R"({"input": "x", "text": {"format": {"type": "json_schema"}}})", "text.format.schema", "is required"},
      {R, R"({"input": "x", "text": {"format": {"type": "yaml"}}})", "text.format.type", "unknown text.format type 'yaml'"},
      {R, R"({"input": "x", "prompt": {"id": "p"}})", "prompt", "prompt templates ('prompt') are not supported"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(kind_name(c.kind) + " body: " + c.body);
    parsed_request r;
    auto err = parse_request(c.kind, c.body, r);
    if (!err) err = validate_for_model(r, 1000);  // the token-id checks
    ASSERT_TRUE(err.has_value());
    EXPECT_EQ(err->status, 400);
    EXPECT_EQ(err->type, "invalid_request_error");
    EXPECT_EQ(err->param, c.param);
    EXPECT_NE(err->message.find(c.message), std::string::npos) << "message: " << err->message;
  }
}

TEST(OpenAiRequest, CompletionsPromptForms) {
  parsed_request r;
  ASSERT_FALSE(parse_request(C, R"({"prompt":"Hello"})", r));
  EXPECT_EQ(r.kind, C);
  EXPECT_EQ(r.prompt_text, "Hello");
  EXPECT_FALSE(r.prompt_ids);

  ASSERT_FALSE(parse_request(C, R"({"prompt":[1, 2, 3.0]})", r));
  EXPECT_FALSE(r.prompt_text);
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));

  ASSERT_FALSE(parse_request(C, R"({"prompt":["one"]})", r));
  EXPECT_EQ(r.prompt_text, "one");

  ASSERT_FALSE(parse_request(C, R"({"prompt":[[7, 8]]})", r));
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{7, 8}));
  EXPECT_TRUE(r.more_prompts.empty());

  // A list of prompts, as OpenAI and vLLM take it (and mixed, which vLLM also reads).
  ASSERT_FALSE(parse_request(C, R"({"prompt":["one", "two", [5, 6]]})", r));
  EXPECT_EQ(r.prompt_text, "one");
  ASSERT_EQ(r.more_prompts.size(), 2u);
  EXPECT_EQ(r.more_prompts[0].text, "two");
  EXPECT_FALSE(r.more_prompts[0].ids);
  EXPECT_EQ(r.more_prompts[1].ids, (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(validate_for_model(r, 7).has_value() == false);
  const auto e = validate_for_model(r, 6);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "prompt[2][1]");
}

TEST(OpenAiRequest, CompletionsFields) {
  parsed_request r;
  const auto err = parse_request(C,
                                 R"({"model":"m","prompt":"x","max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":40,
        "stop":["\n"],"seed":-1,"n":3,"echo":true,"logprobs":2,"stream":true,
        "stream_options":{"include_usage":true},"user":"u1","best_of":null,"suffix":""})",
                                 r);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.9f);
  EXPECT_EQ(r.params.top_k, 40);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(r.params.seed, ~uint64_t{0});
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_EQ(r.params.logprobs, 2);
  EXPECT_FALSE(r.chat_logprobs);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.unknown_fields.empty());  // user: ignored on purpose; best_of equal to n
}

TEST(OpenAiRequest, DefaultsAndNulls) {
  parsed_request r;
  ASSERT_FALSE(parse_request(C, R"({"prompt":"x","model":null,"max_tokens":null,"temperature":null,"n":null,
      "stream":null,"stream_options":null,"logprobs":null,"echo":null})",
                             r));
  EXPECT_EQ(r.model, "");
  EXPECT_FALSE(r.params.max_tokens);  // the server picks the default
  EXPECT_FLOAT_EQ(r.params.temperature, 1.0f);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.logprobs);
  EXPECT_FALSE(r.echo);
  EXPECT_TRUE(r.unknown_fields.empty());
}

TEST(OpenAiRequest, CompletionsIgnoresChatOnlyFields) {
  parsed_request r;
  ASSERT_FALSE(parse_request(C, cmpl(R"("top_logprobs": 3, "max_completion_tokens": 5, "messages": [])"), r));
  EXPECT_FALSE(r.params.logprobs);
  EXPECT_FALSE(r.params.max_tokens);
  EXPECT_EQ(r.unknown_fields, (std::vector<std::string>{"top_logprobs", "max_completion_tokens", "messages"}));
}

TEST(OpenAiRequest, ChatMessagesAreNormalized) {
  parsed_request r;
  const auto err = parse_request(H, R"({"messages":[
      {"role":"developer","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"name":"bob"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
          "function":{"name":"f","arguments":"{\"x\": 1}"}}]},
      {"role":"tool","content":"42","tool_call_id":"c1"},
      {"role":"assistant","tool_calls":[{"function":{"name":"g","arguments":"not json"}}]},
      {"role":"user","content":[]}]})",
                                 r);
  ASSERT_FALSE(err) << err->message;
  ASSERT_EQ(r.messages.size(), 6u);
  const auto msg = [&](size_t i) -> const json::object& { return r.messages[i].as_object(); };
  EXPECT_EQ(msg(0).at("role"), "system");
  EXPECT_EQ(msg(0).at("content"), "be brief");
  EXPECT_EQ(msg(1).at("content"), "a\nb");
  EXPECT_EQ(msg(1).at("name"), "bob");
  EXPECT_EQ(msg(2).at("content"), "");
  const auto& call = msg(2).at("tool_calls").as_array()[0].as_object();
  EXPECT_EQ(call.at("id"), "c1");
  EXPECT_EQ(call.at("function").as_object().at("arguments"), (json::object{{"x", 1}}));
  EXPECT_EQ(msg(3).at("role"), "tool");
  EXPECT_EQ(msg(3).at("tool_call_id"), "c1");
  EXPECT_EQ(msg(4).at("tool_calls").as_array()[0].as_object().at("function").as_object().at("arguments"), "not json");
  EXPECT_EQ(msg(5).at("content"), "");
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_FALSE(r.continue_final_message);
  EXPECT_TRUE(r.template_extra.empty());
}

TEST(OpenAiRequest, EarlierReasoningReachesTheTemplateAsReasoningContent) {
  parsed_request r;
  const auto err = parse_request(H, R"({"messages":[{"role":"user","content":"q"},
      {"role":"assistant","content":"a","reasoning":"vllm style"},
      {"role":"assistant","content":"b","reasoning_content":"kept","reasoning":"other"},
      {"role":"assistant","content":"c","reasoning_content":"llama style"}]})",
                                 r);
  ASSERT_FALSE(err) << err->message;
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].at("reasoning_content"), "vllm style");
  EXPECT_EQ(r.messages[2].at("reasoning_content"), "kept");  // both given: reasoning_content wins
  EXPECT_EQ(r.messages[3].at("reasoning_content"), "llama style");
  EXPECT_FALSE(r.messages[0].as_object().contains("reasoning_content"));
}

TEST(OpenAiRequest, ChatFields) {
  parsed_request r;
  const auto err = parse_request(H, chat(R"("model":"smol","max_tokens":3,"max_completion_tokens":9,"logprobs":true,
      "top_logprobs":4,"n":2,"stream":true,"stream_options":{"include_usage":false,"continuous_usage_stats":true},
      "add_generation_prompt":false,"response_format":{"type":"text"},"metadata":{"a":"b"},"echo":false)"),
                                 r);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(r.model, "smol");
  EXPECT_EQ(r.params.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_TRUE(r.chat_logprobs);
  EXPECT_EQ(r.logprobs, 4);
  EXPECT_EQ(r.params.logprobs, 4);
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.add_generation_prompt);
  EXPECT_FALSE(r.echo);  // chat's echo (a vLLM extension) is only accepted when false
  EXPECT_TRUE(r.unknown_fields.empty());
}

TEST(OpenAiRequest, ChatLogprobsCombinations) {
  struct lp_case {
    std::string extra;
    bool chat_logprobs;
    std::optional<int32_t> count;
  };
  const std::vector<lp_case> cases = {
      {R"("logprobs": true)", true, 0},
      {R"("logprobs": true, "top_logprobs": 5)", true, 5},
      {R"("top_logprobs": 5, "logprobs": true)", true, 5},
      {R"("logprobs": false)", false, std::nullopt},
      {R"("logprobs": false, "top_logprobs": 0)", false, std::nullopt},
      {R"("top_logprobs": 0)", false, std::nullopt},
      {R"("logprobs": true, "top_logprobs": null)", true, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.extra);
    parsed_request r;
    const auto err = parse_request(H, chat(c.extra), r);
    ASSERT_FALSE(err) << err->message;
    EXPECT_EQ(r.chat_logprobs, c.chat_logprobs);
    EXPECT_EQ(r.logprobs, c.count);
    EXPECT_EQ(r.params.logprobs, c.count);
  }
}

TEST(OpenAiRequest, ChatTemplateInputs) {
  parsed_request r;
  const auto err = parse_request(H, chat(R"("tools":[{"type":"function","function":{"name":"f","parameters":{}}}],
      "documents":[{"title":"t","text":"x"}],"chat_template_kwargs":{"enable_thinking":false})"),
                                 r);
  ASSERT_FALSE(err) << err->message;
  ASSERT_TRUE(r.template_extra.contains("tools"));
  EXPECT_EQ(r.template_extra.at("tools").as_array().size(), 1u);
  EXPECT_EQ(r.template_extra.at("documents").as_array().size(), 1u);
  EXPECT_EQ(r.template_extra.at("enable_thinking"), false);

  // tool_choice "none": the tools are not shown to the template.
  ASSERT_FALSE(parse_request(H, chat(R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none")"), r));
  EXPECT_FALSE(r.template_extra.contains("tools"));
  ASSERT_FALSE(parse_request(H, chat(R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto")"), r));
  EXPECT_TRUE(r.template_extra.contains("tools"));
  ASSERT_FALSE(parse_request(H, chat(R"("tools":[],"tool_choice":"none")"), r));
  EXPECT_FALSE(r.template_extra.contains("tools"));
}

TEST(OpenAiRequest, ChatContinueFinalMessage) {
  parsed_request r;
  const std::string msgs = R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}])";
  ASSERT_FALSE(parse_request(H, msgs + R"(,"continue_final_message":true})", r));
  EXPECT_TRUE(r.continue_final_message);
  EXPECT_FALSE(r.add_generation_prompt);
  ASSERT_FALSE(parse_request(H, msgs + R"(,"continue_final_message":true,"add_generation_prompt":false})", r));
  EXPECT_FALSE(r.add_generation_prompt);
}

TEST(OpenAiRequest, ResponsesInput) {
  parsed_request r;
  auto err = parse_request(R, R"({"model":"m","input":"hello","instructions":"be nice","max_output_tokens":12,
      "temperature":0.3,"top_p":0.5,"stream":true,"store":false,"top_k":3,"tools":[],"text":{"format":{"type":"text"}}})",
                           r);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(r.kind, R);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0], (json::object{{"role", "system"}, {"content", "be nice"}}));
  EXPECT_EQ(r.messages[1], (json::object{{"role", "user"}, {"content", "hello"}}));
  EXPECT_EQ(r.params.max_tokens, 12);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.3f);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.5f);
  EXPECT_EQ(r.params.top_k, -1);  // not a Responses field
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_EQ(r.unknown_fields, (std::vector<std::string>{"top_k"}));

  err = parse_request(R, R"({"input":[
      {"role":"developer","content":"sys"},
      {"type":"message","role":"user","content":[{"type":"input_text","text":"q1"},{"type":"input_text","text":"q2"}]},
      {"role":"assistant","content":[{"type":"output_text","text":"a1"}],"id":"msg_1","status":"completed"},
      {"role":"user","content":"q3"}]})",
                      r);
  ASSERT_FALSE(err) << err->message;
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0], (json::object{{"role", "system"}, {"content", "sys"}}));
  EXPECT_EQ(r.messages[1], (json::object{{"role", "user"}, {"content", "q1\nq2"}}));
  EXPECT_EQ(r.messages[2], (json::object{{"role", "assistant"}, {"content", "a1"}}));
  EXPECT_EQ(r.messages[3], (json::object{{"role", "user"}, {"content", "q3"}}));
  EXPECT_FALSE(r.params.max_tokens);
}

TEST(OpenAiRequest, UnknownFieldsNeverFail) {
  parsed_request r;
  ASSERT_FALSE(parse_request(H, chat(R"("frobnicate": {"deep": [1, 2, {"x": null}]}, "user": 5)"), r));
  EXPECT_EQ(r.unknown_fields, (std::vector<std::string>{"frobnicate"}));
}

TEST(OpenAiRequest, NestingLimit) {
  // 64 levels (the body object plus 63 arrays) parse; 65 do not.
  parsed_request r;
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  EXPECT_FALSE(parse_request(C, cmpl("\"x\":" + nested(63)), r));
  const auto err = parse_request(C, cmpl("\"x\":" + nested(64)), r);
  ASSERT_TRUE(err);
  EXPECT_NE(err->message.find("nested deeper than 64 levels"), std::string::npos) << err->message;
}

TEST(OpenAiRequest, ValidateForModel) {
  parsed_request r;
  ASSERT_FALSE(parse_request(C, R"({"prompt":[1, 99, 100]})", r));
  auto err = validate_for_model(r, 100);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "prompt[2]");
  EXPECT_NE(err->message.find("token id 100 at prompt[2] is out of range [0, 100)"), std::string::npos) << err->message;
  EXPECT_FALSE(validate_for_model(r, 101));

  ASSERT_FALSE(parse_request(C, cmpl(R"("stop_token_ids": [5, 100])"), r));
  err = validate_for_model(r, 100);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "stop_token_ids");
  EXPECT_NE(err->message.find("stop_token_ids entries must be in [0, 99], got 100"), std::string::npos);

  ASSERT_FALSE(parse_request(H, chat(R"("logit_bias": {"100": 1})"), r));
  err = validate_for_model(r, 100);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "logit_bias");
  EXPECT_FALSE(validate_for_model(r, 101));
}

TEST(OpenAiRequest, ErrorBody) {
  api_error e;
  e.message = "bad \"x\"";
  e.param = "max_tokens";
  const json::value v = json::parse(error_body(e));
  const auto& err = v.as_object().at("error").as_object();
  EXPECT_EQ(err.at("message"), "bad \"x\"");
  EXPECT_EQ(err.at("type"), "invalid_request_error");
  EXPECT_EQ(err.at("param"), "max_tokens");
  EXPECT_TRUE(err.at("code").is_null());

  api_error q{429, "queue full", "rate_limit_error", "", "queue_full"};
  const json::value w = json::parse(error_body(q));
  EXPECT_TRUE(w.as_object().at("error").as_object().at("param").is_null());
  EXPECT_EQ(w.as_object().at("error").as_object().at("code"), "queue_full");
}

TEST(OpenAiTokenize, PromptAndMessagesForms) {
  tokenize_request t;
  ASSERT_FALSE(parse_tokenize(R"({"model":"m","prompt":"hello","add_special_tokens":false,"return_token_strs":true})", t));
  EXPECT_EQ(t.model, "m");
  EXPECT_EQ(t.prompt, "hello");
  EXPECT_FALSE(t.add_special_tokens);
  EXPECT_EQ(t.unknown_fields, (std::vector<std::string>{"return_token_strs"}));

  ASSERT_FALSE(parse_tokenize(R"({"prompt":""})", t));
  EXPECT_EQ(t.prompt, "");
  EXPECT_TRUE(t.add_special_tokens);

  ASSERT_FALSE(parse_tokenize(R"({"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":false,
      "tools":[{"type":"function","function":{"name":"f"}}]})",
                              t));
  EXPECT_FALSE(t.prompt);
  ASSERT_EQ(t.messages.size(), 1u);
  EXPECT_FALSE(t.add_generation_prompt);
  EXPECT_FALSE(t.add_special_tokens);  // chat form: the template adds them
  EXPECT_TRUE(t.template_extra.contains("tools"));
}

TEST(OpenAiTokenize, RejectsInvalid) {
  struct tcase {
    std::string body, param, message;
  };
  const std::vector<tcase> cases = {
      {"{}", "prompt", "'prompt' or 'messages' is required"},
      {R"({"prompt":"a","messages":[]})", "messages", "send either 'prompt' or 'messages', not both"},
      {R"({"prompt":5})", "prompt", "'prompt' must be a string, got 5"},
      {R"({"prompt":"a","add_special_tokens":"yes"})", "add_special_tokens", "must be a boolean, got string"},
      {R"({"messages":[]})", "messages", "must contain at least one message"},
      {R"({"messages":[{"role":"robot","content":"x"}]})", "messages[0].role", "unknown role 'robot'"},
      {"not json", "", "malformed JSON"},
      {"{\"prompt\":\"\xfe\"}", "", "not valid UTF-8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    tokenize_request t;
    const auto err = parse_tokenize(c.body, t);
    ASSERT_TRUE(err);
    EXPECT_EQ(err->status, 400);
    EXPECT_EQ(err->param, c.param);
    EXPECT_NE(err->message.find(c.message), std::string::npos) << err->message;
  }
}

TEST(OpenAiTokenize, Detokenize) {
  detokenize_request d;
  ASSERT_FALSE(parse_detokenize(R"({"model":"m","tokens":[1,2,3]})", d));
  EXPECT_EQ(d.model, "m");
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{1, 2, 3}));
  ASSERT_FALSE(parse_detokenize(R"({"tokens":[]})", d));
  EXPECT_TRUE(d.tokens.empty());

  struct tcase {
    std::string body, param, message;
  };
  const std::vector<tcase> cases = {
      {"{}", "tokens", "'tokens' is required"},
      {R"({"tokens":"1 2"})", "tokens", "'tokens' must be a list of token ids, got string"},
      {R"({"tokens":[1,"2"]})", "tokens[1]", "'tokens[1]' must be a token id (an integer), got string"},
      {R"({"tokens":[-4]})", "tokens[0]", "tokens[0] must be a token id in [0, 2147483647], got -4"},
      {R"({"tokens":[1], "model": []})", "model", "'model' must be a string, got array"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    const auto err = parse_detokenize(c.body, d);
    ASSERT_TRUE(err);
    EXPECT_EQ(err->param, c.param);
    EXPECT_NE(err->message.find(c.message), std::string::npos) << err->message;
  }
  const std::vector<int32_t> ids = {0, 5, 10};
  EXPECT_FALSE(validate_token_ids(ids, 11, "tokens"));
  const auto err = validate_token_ids(ids, 10, "tokens");
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "tokens[2]");
}

}  // namespace
}  // namespace spate::api
