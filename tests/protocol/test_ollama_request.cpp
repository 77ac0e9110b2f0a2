// Ollama's request bodies (protocol/ollama_request.h): keep_alive's bound and
// the types of /api/generate's, /api/chat's and /api/embed's fields, each
// wrong one a 400 naming the field.
#include "protocol/ollama_request.h"

#include <gtest/gtest.h>

#include <string>

namespace spate::api {
namespace {

std::optional<api_error> parse(endpoint kind, const std::string& extra, ollama_extras& x) {
  parsed_request out;
  const std::string body = kind == endpoint::ollama_chat
                               ? R"({"model": "m", "messages": [{"role": "user", "content": "hi"}])" + extra + "}"
                               : R"({"model": "m", "prompt": "hi")" + extra + "}";
  return parse_ollama_request(kind, body, out, x);
}

std::optional<api_error> parse(endpoint kind, const std::string& extra) {
  ollama_extras x;
  return parse(kind, extra, x);
}

TEST(OllamaRequest, KeepAliveAboveTheBoundIsA400NamingIt) {
  for (endpoint kind : {endpoint::ollama_chat, endpoint::ollama_generate}) {
    for (const char* v : {"1e10", "1e300", "\"3000000h\"", "1000000001", "18446744073709551615", "\"1e400\""}) {
      const auto err = parse(kind, std::string(R"(, "keep_alive": )") + v);
      ASSERT_TRUE(err) << v;
      EXPECT_EQ(err->status, 400) << v;
      EXPECT_EQ(err->param, "keep_alive") << v;
      EXPECT_NE(err->message.find("keep_alive"), std::string::npos) << v << ": " << err->message;
    }
  }
}

TEST(OllamaRequest, KeepAliveWithinTheBoundOrNegativeIsKept) {
  struct ok_case {
    const char* json;
    double seconds;
  };
  for (const ok_case& c : {ok_case{"1e9", 1e9}, {"\"5m\"", 300}, {"\"277777h\"", 277777.0 * 3600}, {"0", 0}, {"-1", -1},
                           {"-1e300", -1e300}, {"\"-1h\"", -3600}, {"\"250ms\"", 0.25}}) {
    ollama_extras x;
    const auto err = parse(endpoint::ollama_chat, std::string(R"(, "keep_alive": )") + c.json, x);
    ASSERT_FALSE(err) << c.json << ": " << err->message;
    ASSERT_TRUE(x.keep_alive_s) << c.json;
    EXPECT_DOUBLE_EQ(*x.keep_alive_s, c.seconds) << c.json;
  }
}

struct typed_field {
  endpoint kind;
  const char* extra;
  const char* field;
};

TEST(OllamaRequest, AFieldOfTheWrongTypeIsA400NamingIt) {
  const typed_field cases[] = {
      {endpoint::ollama_generate, R"(, "raw": "yes")", "raw"},
      {endpoint::ollama_generate, R"(, "raw": 1)", "raw"},
      {endpoint::ollama_generate, R"(, "system": 5)", "system"},
      {endpoint::ollama_generate, R"(, "context": "x")", "context"},
      {endpoint::ollama_generate, R"(, "suffix": 5)", "suffix"},
      {endpoint::ollama_generate, R"(, "images": "AAAA")", "images"},
      {endpoint::ollama_generate, R"(, "template": 5)", "template"},
      {endpoint::ollama_generate, R"(, "options": [1])", "options"},
      {endpoint::ollama_generate, R"(, "keep_alive": true)", "keep_alive"},
      {endpoint::ollama_generate, R"(, "think": 1)", "think"},
      {endpoint::ollama_generate, R"(, "stream": "no")", "stream"},
      {endpoint::ollama_chat, R"(, "tools": "x")", "tools"},
      {endpoint::ollama_chat, R"(, "tools": {"type": "function"})", "tools"},
      {endpoint::ollama_chat, R"(, "options": "hot")", "options"},
      {endpoint::ollama_chat, R"(, "keep_alive": [1])", "keep_alive"},
      {endpoint::ollama_chat, R"(, "logprobs": 1)", "logprobs"},
  };
  for (const typed_field& c : cases) {
    const auto err = parse(c.kind, c.extra);
    ASSERT_TRUE(err) << c.extra;
    EXPECT_EQ(err->status, 400) << c.extra;
    EXPECT_EQ(err->param, c.field) << c.extra << ": " << err->message;
    EXPECT_NE(err->message.find(c.field), std::string::npos) << c.extra << ": " << err->message;
  }
}

TEST(OllamaRequest, FieldsOfTheRightTypeOrNullPass) {
  for (const char* extra : {R"(, "raw": true, "system": "be brief")", R"(, "raw": null, "system": null, "context": null)",
                            R"(, "context": [], "images": [], "suffix": "", "template": "")", R"(, "raw": false, "options": {})"}) {
    const auto err = parse(endpoint::ollama_generate, extra);
    EXPECT_FALSE(err) << extra << ": " << err->message;
  }
  EXPECT_FALSE(parse(endpoint::ollama_chat, R"(, "tools": [], "options": null)"));
}

TEST(OllamaRequest, HugeIntegerOptionsDoNotThrow) {
  ollama_extras x;
  EXPECT_NO_THROW({
    const auto err = parse(endpoint::ollama_chat, R"(, "options": {"num_ctx": 18446744073709551615})", x);
    EXPECT_FALSE(err) << err->message;  // checked against the model's length by the server
  });
  ASSERT_TRUE(x.num_ctx);
  EXPECT_GT(*x.num_ctx, int64_t{1} << 40);
  for (const char* n : {"18446744073709551615", "2147483648", "9223372036854775807"}) {
    std::optional<api_error> err;
    EXPECT_NO_THROW(err = parse(endpoint::ollama_generate, std::string(R"(, "options": {"num_predict": )") + n + "}"));
    ASSERT_TRUE(err) << n;
    EXPECT_EQ(err->param, "options.num_predict") << n << ": " << err->message;
  }
  EXPECT_FALSE(parse(endpoint::ollama_generate, R"(, "options": {"num_predict": -1})"));
}

TEST(OllamaEmbed, KeepAliveAndOptionTypesAreChecked) {
  std::string model;
  std::vector<std::string> texts;
  for (auto [body, field] : {std::pair{R"({"model": "m", "input": "x", "keep_alive": 1e300})", "keep_alive"},
                             {R"({"model": "m", "input": "x", "keep_alive": "soon"})", "keep_alive"},
                             {R"({"model": "m", "input": "x", "truncate": "yes"})", "truncate"},
                             {R"({"model": "m", "input": "x", "options": 5})", "options"},
                             {R"({"model": "m", "input": "x", "dimensions": "all"})", "dimensions"}}) {
    const auto err = parse_ollama_embed(body, false, model, texts);
    ASSERT_TRUE(err) << body;
    EXPECT_EQ(err->status, 400);
    EXPECT_EQ(err->param, field) << body;
  }
  EXPECT_FALSE(parse_ollama_embed(R"({"model": "m", "input": "x", "keep_alive": "5m", "truncate": true})", false, model, texts));
}

}  // namespace
}  // namespace spate::api
