// The embeddings request parser and response formatter (protocol/embeddings.h).
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstring>

#include "protocol/embeddings.h"

namespace spate::api {
namespace {

namespace json = boost::json;

TEST(Embeddings, Base64MatchesRfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode(std::string("\xff\xfe\x00", 3)), "//4A");
}

TEST(Embeddings, ParsesEveryInputForm) {
  embeddings_request r;
  ASSERT_FALSE(parse_embeddings(R"({"input":"hi","model":"m","user":"u"})", r));
  EXPECT_EQ(r.texts, std::vector<std::string>{"hi"});
  EXPECT_EQ(r.model, "m");
  EXPECT_FALSE(r.base64);
  ASSERT_FALSE(parse_embeddings(R"({"input":["a","b"],"encoding_format":"base64"})", r));
  EXPECT_EQ(r.texts.size(), 2u);
  EXPECT_TRUE(r.base64);
  ASSERT_FALSE(parse_embeddings(R"({"input":[1,2,3]})", r));
  ASSERT_EQ(r.token_inputs.size(), 1u);
  EXPECT_EQ(r.token_inputs[0], (std::vector<int32_t>{1, 2, 3}));
  ASSERT_FALSE(parse_embeddings(R"({"input":[[1],[2,3]],"dimensions":8,"future_field":1})", r));
  EXPECT_EQ(r.n_inputs(), 2u);
  EXPECT_EQ(r.dimensions, 8);
  EXPECT_EQ(r.unknown_fields, std::vector<std::string>{"future_field"});
}

TEST(Embeddings, RefusesBadInputNamingTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({})", "input"},
      {R"({"input":null})", "input"},
      {R"({"input":""})", "input"},
      {R"({"input":[]})", "input"},
      {R"({"input":{"a":1}})", "input"},
      {R"({"input":["a",""]})", "input[1]"},
      {R"({"input":["a",[1]]})", "input[1]"},
      {R"({"input":[[1],"a"]})", "input[1]"},
      {R"({"input":[[1],[]]})", "input[1]"},
      {R"({"input":[1,-2]})", "input[1]"},
      {R"({"input":[1,2.5]})", "input[1]"},
      {R"({"input":"x","encoding_format":"int8"})", "encoding_format"},
      {R"({"input":"x","dimensions":0})", "dimensions"},
      {R"({"input":"x","model":5})", "model"},
      {"[1]", ""},
      {"{\"input\":\"\xff\"}", ""},
  };
  for (const auto& [body, param] : cases) {
    embeddings_request r;
    const auto e = parse_embeddings(body, r);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->status, 400) << body;
    EXPECT_EQ(e->param, param) << body;
    EXPECT_FALSE(e->message.empty());
  }
}

TEST(Embeddings, BoundsTheNumberOfInputs) {
  std::string body = R"({"input":[)";
  for (size_t i = 0; i <= k_max_embedding_inputs; ++i) body += i ? ",\"x\"" : "\"x\"";
  body += "]}";
  embeddings_request r;
  const auto e = parse_embeddings(body, r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("at most 2048"), std::string::npos);
}

TEST(Embeddings, FormatsTheOpenAiShape) {
  const std::vector<std::vector<float>> v = {{1.0f, -0.5f}, {0.25f, 0.0f}};
  const auto doc = json::parse(format_embeddings(v, false, "m", 7)).as_object();
  EXPECT_EQ(doc.at("object"), "list");
  EXPECT_EQ(doc.at("model"), "m");
  EXPECT_EQ(doc.at("usage").at("prompt_tokens"), 7);
  EXPECT_EQ(doc.at("usage").at("total_tokens"), 7);
  const auto& d = doc.at("data").as_array();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1].at("index"), 1);
  EXPECT_EQ(d[1].at("object"), "embedding");
  EXPECT_EQ(d[0].at("embedding").as_array()[1].as_double(), -0.5);
  // base64: the little-endian float32 bytes.
  const auto b = json::parse(format_embeddings({{1.0f}}, true, "m", 1)).as_object();
  EXPECT_EQ(b.at("data").as_array()[0].at("embedding"), "AACAPw==");
}

}  // namespace
}  // namespace spate::api
