#include "protocol/tgi_format.h"

#include <gtest/gtest.h>

#include "format_test_util.h"

namespace spate {
namespace {

namespace json = boost::json;

struct tgi_run {
  api::served_model m;
  api::tgi_request r;
  prepared_generation g;
  std::unique_ptr<tgi_formatter> f;
  stream_events events;
};

std::unique_ptr<tgi_run> start(const std::string& body, api::tgi_route route) {
  auto x = std::make_unique<tgi_run>();
  x->m.tok = &test::tiny_tokenizer();
  x->m.n_vocab = 6;
  x->m.max_model_len = 64;
  x->m.name = "tiny";
  EXPECT_FALSE(api::parse_tgi_request(body, route, x->r));
  x->g.prompt = {1, 3};
  x->g.prompt_text = x->r.inputs;
  x->g.params = x->r.params;
  if (x->r.sampling) x->g.params.seed = 99;
  x->f = std::make_unique<tgi_formatter>(x->m, x->r, x->g);
  return x;
}

// A tokens event of these ids ("b" = 4, "c" = 5, "</s>" = 2), each with logprob -0.5 and top alternatives.
engine_event toks(std::vector<int32_t> ids, std::string text) {
  engine_event e;
  e.type = engine_event::kind::tokens;
  e.token_ids = ids;
  e.text = std::move(text);
  for (int32_t id : ids) e.logprobs.push_back(token_logprob{id, -0.5f, {{id, -0.5f}, {3, -1.5f}}});
  return e;
}

engine_event finish(finish_reason why, int32_t stop_index = -1) {
  engine_event e = test::finished(3, why);
  e.stop_index = stop_index;
  return e;
}

void feed(tgi_run& x, std::vector<engine_event> evs) {
  for (const auto& e : evs) {
    auto out = x.f->on_event(0, e);
    x.events.insert(x.events.end(), out.begin(), out.end());
  }
}

TEST(TgiFormat, GenerateWithDetails) {
  auto x = start(R"({"inputs":"a","parameters":{"details":true,"top_n_tokens":2,"do_sample":true}})", api::tgi_route::generate);
  feed(*x, {toks({4}, "b"), toks({5, 2}, "c"), finish(finish_reason::stop)});
  ASSERT_TRUE(x->f->done());
  EXPECT_TRUE(x->events.empty());
  const final_body b = x->f->result();
  ASSERT_TRUE(b.ok);
  const json::object o = json::parse(b.body).as_object();
  EXPECT_EQ(o.at("generated_text"), "bc");
  const json::object& d = o.at("details").as_object();
  EXPECT_EQ(d.at("finish_reason"), "eos_token");
  EXPECT_EQ(d.at("generated_tokens"), 3);
  EXPECT_EQ(d.at("seed"), 99);
  EXPECT_EQ(d.at("prefill"), json::array{});
  const json::array& t = d.at("tokens").as_array();
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0], json::parse(R"({"id":4,"text":"b","logprob":-0.5,"special":false})"));
  EXPECT_EQ(t[1].at("text"), "c");
  EXPECT_EQ(t[2], json::parse(R"({"id":2,"text":"","logprob":-0.5,"special":true})")) << "EOS: special, no text";
  const json::array& top = d.at("top_tokens").as_array();
  ASSERT_EQ(top.size(), 3u);
  ASSERT_EQ(top[0].as_array().size(), 2u);
  EXPECT_EQ(top[0].at(1), json::parse(R"({"id":3,"text":" a","logprob":-1.5,"special":false})"));
}

TEST(TgiFormat, FinishReasonsAndPlainAnswer) {
  EXPECT_STREQ(tgi_finish_reason(finish_reason::length, -1), "length");
  EXPECT_STREQ(tgi_finish_reason(finish_reason::stop, 0), "stop_sequence");
  EXPECT_STREQ(tgi_finish_reason(finish_reason::stop, -1), "eos_token");
  auto x = start(R"({"inputs":"a"})", api::tgi_route::generate);
  feed(*x, {toks({4}, "b"), finish(finish_reason::length)});
  EXPECT_EQ(x->f->result().body, R"({"generated_text":"b"})") << "no details unless asked";
  auto c = start(R"({"inputs":"a","parameters":{"return_full_text":true,"details":true}})", api::tgi_route::compat);
  feed(*c, {toks({4}, "b"), finish(finish_reason::stop, 0)});
  const json::value v = json::parse(c->f->result().body);
  ASSERT_TRUE(v.is_array()) << "POST / answers an array";
  EXPECT_EQ(v.at(0).at("generated_text"), "ab");
  EXPECT_EQ(v.at(0).at("details").at("finish_reason"), "stop_sequence");
  EXPECT_EQ(v.at(0).at("details").at("seed"), nullptr) << "greedy: no seed";
  EXPECT_FALSE(v.at(0).at("details").as_object().contains("top_tokens"));
}

TEST(TgiFormat, StreamHoldsTheLastTokenForTheEnd) {
  auto x = start(R"({"inputs":"a","parameters":{"details":true}})", api::tgi_route::generate_stream);
  feed(*x, {toks({4}, "b"), toks({5}, "c")});
  ASSERT_EQ(x->events.size(), 1u) << "the last token waits for the finish";
  feed(*x, {finish(finish_reason::length)});
  ASSERT_EQ(x->events.size(), 2u);
  const json::object first = json::parse(x->events[0].data).as_object();
  EXPECT_EQ(x->events[0].type, "");
  EXPECT_EQ(first.at("index"), 0);
  EXPECT_EQ(first.at("token"), json::parse(R"({"id":4,"text":"b","logprob":-0.5,"special":false})"));
  EXPECT_EQ(first.at("generated_text"), nullptr);
  EXPECT_EQ(first.at("details"), nullptr);
  EXPECT_EQ(first.at("top_tokens"), json::array{});
  const json::object last = json::parse(x->events[1].data).as_object();
  EXPECT_EQ(last.at("token").at("id"), 5);
  EXPECT_EQ(last.at("generated_text"), "bc");
  EXPECT_EQ(last.at("details"), json::parse(R"({"finish_reason":"length","generated_tokens":2,"seed":null,"input_length":2})"));
  EXPECT_TRUE(x->f->done());
}

TEST(TgiFormat, StreamWithoutDetailsAndErrors) {
  auto x = start(R"({"inputs":"a"})", api::tgi_route::generate_stream);
  feed(*x, {toks({4}, "b"), finish(finish_reason::stop)});
  ASSERT_EQ(x->events.size(), 1u);
  EXPECT_EQ(json::parse(x->events[0].data).at("details"), nullptr);
  EXPECT_EQ(json::parse(x->events[0].data).at("generated_text"), "b");
  auto e = start(R"({"inputs":"a"})", api::tgi_route::generate_stream);
  engine_event err;
  err.type = engine_event::kind::error;
  err.error = "boom";
  feed(*e, {err});
  ASSERT_EQ(e->events.size(), 1u);
  EXPECT_EQ(e->events[0].data, R"({"error":"boom","error_type":"generation"})");
  auto n = start(R"({"inputs":"a"})", api::tgi_route::generate);
  feed(*n, {err});
  EXPECT_FALSE(n->f->result().ok);
  EXPECT_EQ(n->f->result().error, "boom");
  EXPECT_EQ(n->f->finish_reason_text(), "error");
}

TEST(TgiFormat, Info) {
  api::served_model m;
  m.name = "smol";
  m.max_model_len = 2048;
  const json::object o = tgi_info(m, 8, "0.1.0");
  EXPECT_EQ(o.at("model_id"), "smol");
  EXPECT_EQ(o.at("max_input_tokens"), 2047);
  EXPECT_EQ(o.at("max_total_tokens"), 2048);
  EXPECT_EQ(o.at("max_best_of"), 1);
  EXPECT_EQ(o.at("max_stop_sequences"), 4);
  EXPECT_EQ(o.at("max_concurrent_requests"), 8);
  EXPECT_EQ(o.at("version"), "0.1.0");
}

}  // namespace
}  // namespace spate
