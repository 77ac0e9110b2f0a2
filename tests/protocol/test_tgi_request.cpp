#include "protocol/tgi_request.h"

#include <gtest/gtest.h>

#include "protocol/constraint_compiler.h"
#include "format_test_util.h"

namespace spate::api {
namespace {

namespace json = boost::json;

tgi_request parse_ok(const std::string& body, tgi_route route = tgi_route::generate) {
  tgi_request r;
  const auto err = parse_tgi_request(body, route, r);
  EXPECT_FALSE(err) << body << " -> " << (err ? err->message : "");
  return r;
}

tgi_error parse_err(const std::string& body, tgi_route route = tgi_route::generate) {
  tgi_request r;
  const auto err = parse_tgi_request(body, route, r);
  EXPECT_TRUE(err) << body;
  return err.value_or(tgi_error{0, "", ""});
}

TEST(TgiRequest, DefaultsAreGreedyWithoutDetails) {
  const tgi_request r = parse_ok(R"({"inputs":"Hello"})");
  EXPECT_EQ(r.inputs, "Hello");
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.wrap_in_array);
  EXPECT_FALSE(r.sampling);
  EXPECT_EQ(r.params.temperature, 0.0f);
  EXPECT_FALSE(r.params.seed);
  EXPECT_FALSE(r.params.max_tokens) << "the default is applied against the model's length";
  EXPECT_EQ(r.params.logprobs, 0) << "every token carries its logprob";
  EXPECT_FALSE(r.details);
  EXPECT_TRUE(r.constraint.none());
  EXPECT_TRUE(r.model.empty());
}

TEST(TgiRequest, RoutesDecideStreaming) {
  EXPECT_TRUE(parse_ok(R"({"inputs":"x"})", tgi_route::generate_stream).stream);
  EXPECT_FALSE(parse_ok(R"({"inputs":"x","stream":true})", tgi_route::generate).stream) << "/generate never streams";
  const tgi_request c = parse_ok(R"({"inputs":"x","stream":true})", tgi_route::compat);
  EXPECT_TRUE(c.stream);
  EXPECT_FALSE(c.wrap_in_array);
  const tgi_request d = parse_ok(R"({"inputs":"x","stream":false})", tgi_route::compat);
  EXPECT_FALSE(d.stream);
  EXPECT_TRUE(d.wrap_in_array) << "POST / answers [response]";
}

TEST(TgiRequest, ParametersMapToSampling) {
  const tgi_request r = parse_ok(R"({"inputs":"x","parameters":{"do_sample":true,"max_new_tokens":7,"top_k":5,"top_p":0.9,
      "typical_p":0.8,"repetition_penalty":1.2,"frequency_penalty":0.5,"stop":["\n","END"],"seed":42,"details":true,
      "return_full_text":true,"top_n_tokens":3,"truncate":10,"watermark":true,"best_of":1,"adapter_id":"m2"}})");
  EXPECT_TRUE(r.sampling);
  EXPECT_EQ(r.params.temperature, 1.0f);
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_EQ(r.params.top_k, 5);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.9f);
  EXPECT_FLOAT_EQ(r.params.typical_p, 0.8f);
  EXPECT_FLOAT_EQ(r.params.repetition_penalty, 1.2f);
  EXPECT_FLOAT_EQ(r.params.frequency_penalty, 0.5f);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(r.params.seed, 42u);
  EXPECT_TRUE(r.details);
  EXPECT_TRUE(r.return_full_text);
  EXPECT_EQ(r.top_n_tokens, 3);
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_EQ(r.truncate, 10);
  EXPECT_TRUE(r.params.watermark);
  EXPECT_EQ(r.model, "m2");
}

TEST(TgiRequest, SamplingAsTgiDecidesIt) {
  EXPECT_FALSE(parse_ok(R"({"inputs":"x","parameters":{"temperature":1.0}})").sampling) << "temperature 1 alone is greedy";
  const tgi_request t = parse_ok(R"({"inputs":"x","parameters":{"temperature":0.5}})");
  EXPECT_TRUE(t.sampling);
  EXPECT_FLOAT_EQ(t.params.temperature, 0.5f);
  EXPECT_TRUE(parse_ok(R"({"inputs":"x","parameters":{"top_k":3}})").sampling);
  EXPECT_TRUE(parse_ok(R"({"inputs":"x","parameters":{"typical_p":0.5}})").sampling);
  const tgi_request n = parse_ok(R"({"inputs":"x","parameters":{"do_sample":false,"seed":null,"temperature":null,"stop":null}})");
  EXPECT_FALSE(n.sampling);
  EXPECT_EQ(n.params.temperature, 0.0f);
}

TEST(TgiRequest, GrammarBecomesTheConstraint) {
  const tgi_request j = parse_ok(R"({"inputs":"x","parameters":{"grammar":{"type":"json","value":{"type":"object"}}}})");
  EXPECT_EQ(j.constraint.type, output_constraint::kind::json_schema);
  EXPECT_EQ(j.constraint.schema, json::parse(R"({"type":"object"})"));
  const tgi_request s = parse_ok(R"({"inputs":"x","parameters":{"grammar":{"type":"json","value":"{\"type\":\"integer\"}"}}})");
  EXPECT_EQ(s.constraint.schema, json::parse(R"({"type":"integer"})")) << "the schema as JSON text";
  const tgi_request re = parse_ok(R"({"inputs":"x","parameters":{"grammar":{"type":"regex","value":"[0-9]{3}"}}})");
  EXPECT_EQ(re.constraint.type, output_constraint::kind::regex);
  EXPECT_EQ(re.constraint.text, "[0-9]{3}");
}

TEST(TgiRequest, ValidationErrorsAreTgis) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"inputs":""})", "Input validation error: `inputs` cannot be empty"},
      {R"({"inputs":"x","parameters":{"max_new_tokens":0}})", "Input validation error: `max_new_tokens` must be strictly positive"},
      {R"({"inputs":"x","parameters":{"temperature":0}})", "Input validation error: `temperature` must be strictly positive"},
      {R"({"inputs":"x","parameters":{"top_p":1.0}})", "Input validation error: `top_p` must be > 0.0 and < 1.0"},
      {R"({"inputs":"x","parameters":{"typical_p":0}})", "Input validation error: `typical_p` must be > 0.0 and < 1.0"},
      {R"({"inputs":"x","parameters":{"top_k":0}})", "Input validation error: `top_k` must be strictly positive"},
      {R"({"inputs":"x","parameters":{"repetition_penalty":0}})", "Input validation error: `repetition_penalty` must be strictly positive"},
      {R"({"inputs":"x","parameters":{"frequency_penalty":3}})", "Input validation error: `frequency_penalty` must be >= -2.0 and <= 2.0"},
      {R"({"inputs":"x","parameters":{"top_n_tokens":6}})", "Input validation error: `top_n_tokens` must be >= 0 and <= 5. Given: 6"},
      {R"({"inputs":"x","parameters":{"stop":["a","b","c","d","e"]}})",
       "Input validation error: `stop` supports up to 4 stop sequences. Given: 5"},
      {R"({"inputs":"x","parameters":{"best_of":2}})", "Input validation error: `best_of` must be > 0 and <= 1. Given: 2"},
      {R"({"inputs":"x","parameters":{"truncate":0}})", "Input validation error: `truncate` must be strictly positive. Given: 0"},
      {R"({"inputs":"x","parameters":{"grammar":{"type":"cfg","value":"x"}}})",
       "Input validation error: grammar: unknown `type` \"cfg\" (json, json_object or regex)"},
  };
  for (const auto& [body, message] : cases) {
    const tgi_error e = parse_err(body);
    EXPECT_EQ(e.status, 422) << body;
    EXPECT_EQ(e.type, "validation") << body;
    EXPECT_EQ(e.message, message) << body;
  }
}

TEST(TgiRequest, WrongTypesAreDeserializationErrors) {
  for (const char* body : {R"({"inputs":5})", R"({"parameters":{}})", R"([1])", R"({"inputs":"x","parameters":{"max_new_tokens":"ten"}})",
                           R"({"inputs":"x","parameters":{"max_new_tokens":-1}})", R"({"inputs":"x","parameters":{"details":"yes"}})",
                           R"({"inputs":"x","parameters":{"stop":"END"}})", R"({"inputs":"x","parameters":5})", R"({"inputs":"x","stream":1})",
                           "{nope"}) {
    const tgi_error e = parse_err(body);
    EXPECT_EQ(e.status, 422) << body;
    EXPECT_EQ(e.type, "validation") << body;
    EXPECT_FALSE(e.message.empty());
  }
  EXPECT_EQ(parse_err(R"({"inputs":5})").message,
            "Failed to deserialize the JSON body into the target type: inputs: invalid type: 5, expected a string");
}

TEST(TgiRequest, DecoderInputDetailsIsRefusedHonestly) {
  const tgi_error e = parse_err(R"({"inputs":"x","parameters":{"decoder_input_details":true}})");
  EXPECT_EQ(e.status, 422);
  EXPECT_NE(e.message.find("not supported"), std::string::npos) << e.message;
  parse_ok(R"({"inputs":"x","parameters":{"decoder_input_details":false}})");
}

TEST(TgiRequest, ErrorBodyAndSharedErrors) {
  EXPECT_EQ(tgi_error_body(tgi_error{422, "bad", "validation"}), R"({"error":"bad","error_type":"validation"})");
  EXPECT_EQ(tgi_error_of(api_error{429, "queue full", "", "", ""}).type, "overloaded");
  EXPECT_EQ(tgi_error_of(api_error{400, "too long", "", "", ""}).status, 422);
  EXPECT_EQ(tgi_error_of(api_error{404, "no model", "", "", ""}).type, "not_found");
}

served_model tiny_model(int32_t max_len) {
  served_model m;
  m.tok = &test::tiny_tokenizer();
  m.n_vocab = 6;
  m.max_model_len = max_len;
  m.name = "tiny";
  return m;
}

TEST(TgiPrepare, TokenizesTruncatesAndChecksLengths) {
  const served_model m = tiny_model(16);
  prepared_generation g;
  tgi_request r = parse_ok(R"({"inputs":"abc","parameters":{"watermark":true}})");
  ASSERT_FALSE(prepare_tgi_generation(m, r, {0.25, 3.0f}, g));
  EXPECT_EQ(g.prompt, (std::vector<int32_t>{3, 4, 5})) << "as a completions prompt (this vocabulary adds no BOS)";
  EXPECT_EQ(g.params.max_tokens, 13) << "min(100, the room left)";
  EXPECT_EQ(g.params.watermark_gamma, 0.25);
  EXPECT_EQ(g.params.watermark_delta, 3.0f);
  EXPECT_EQ(g.prompt_text, "abc");
  r = parse_ok(R"({"inputs":"abc","parameters":{"truncate":2,"max_new_tokens":14}})");
  ASSERT_FALSE(prepare_tgi_generation(m, r, {}, g));
  EXPECT_EQ(g.prompt, (std::vector<int32_t>{4, 5})) << "the last 2 tokens";
  r = parse_ok(R"({"inputs":"abc","parameters":{"max_new_tokens":14}})");
  const auto e = prepare_tgi_generation(m, r, {}, g);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 422);
  EXPECT_EQ(e->message, "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 16. Given: 3 `inputs` tokens and 14 `max_new_tokens`");
  r = parse_ok(R"({"inputs":"a","parameters":{"grammar":{"type":"regex","value":"b+"}}})");
  const auto g_err = prepare_tgi_generation(m, r, {}, g);
  ASSERT_TRUE(g_err) << "no constraint compiler on this model";
  EXPECT_NE(g_err->message.find("grammar"), std::string::npos);
}

TEST(TgiPrepare, GrammarCompilesOrNamesTheError) {
  served_model m = tiny_model(32);
  constraint_compiler cc(test::tiny_tokenizer());
  m.constraints = &cc;
  prepared_generation g;
  tgi_request r = parse_ok(R"({"inputs":"a","parameters":{"grammar":{"type":"regex","value":"b+"}}})");
  ASSERT_FALSE(prepare_tgi_generation(m, r, {}, g));
  EXPECT_TRUE(g.params.constraint);
  r = parse_ok(R"({"inputs":"a","parameters":{"grammar":{"type":"regex","value":"(b"}}})");
  const auto e = prepare_tgi_generation(m, r, {}, g);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 422);
  EXPECT_EQ(e->type, "validation");
}

}  // namespace
}  // namespace spate::api
