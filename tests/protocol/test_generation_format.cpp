// The per-API formatters (protocol/generation_format.h): synthetic engine
// events in, the exact SSE chunks / events / JSON bodies out. No weights: a
// six-token SentencePiece vocabulary serves the logprobs.
#include "protocol/generation_format.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/completions_format.h"
#include "protocol/responses_format.h"
#include "format_test_util.h"
#include "tokenizer/tokenizer.h"

namespace spate {
namespace {

namespace json = boost::json;

using test::tiny_tokenizer;

api::served_model tiny_model() {
  api::served_model m;
  m.tok = &tiny_tokenizer();
  m.n_vocab = 6;
  m.max_model_len = 64;
  m.name = "tiny";
  return m;
}

api::parsed_request parse(api::endpoint kind, const std::string& body) {
  api::parsed_request r;
  auto err = api::parse_request(kind, body, r);
  EXPECT_FALSE(err.has_value()) << (err ? err->message : "");
  return r;
}

prepared_generation prepared(const api::parsed_request& r, std::string prompt_text = "hi") {
  prepared_generation g;
  g.prompt = {1, 3, 4};
  g.prompt_text = std::move(prompt_text);
  g.params = r.params;
  g.n = r.n;
  return g;
}

engine_event tokens(std::vector<int32_t> ids, std::string text, std::vector<token_logprob> lps = {}) {
  engine_event e;
  e.type = engine_event::kind::tokens;
  e.token_ids = std::move(ids);
  e.text = std::move(text);
  e.logprobs = std::move(lps);
  return e;
}

engine_event finished(finish_reason why, int32_t completion, int32_t cached = 0) {
  engine_event e;
  e.type = engine_event::kind::finished;
  e.reason = why;
  e.usage = {3, completion, cached};
  return e;
}

engine_event failed(std::string message) {
  engine_event e;
  e.type = engine_event::kind::error;
  e.error = std::move(message);
  return e;
}

std::string frames(const stream_events& evs) {
  std::string s;
  for (const auto& e : evs) s += sse_frame(e);
  return s;
}

std::vector<std::string> types(const stream_events& evs) {
  std::vector<std::string> t;
  for (const auto& e : evs) t.push_back(e.type);
  return t;
}

std::unique_ptr<generation_formatter> formatter(const api::served_model& m, const api::parsed_request& r, const prepared_generation& g) {
  return make_formatter(m, r, g, [](const char* prefix) { return std::string(prefix) + "-1"; }, 1700000000);
}

// A request, its prepared generation and its formatter (which refers to the
// other three, so the fixture stays where it was made).
struct formatted {
  api::served_model m = tiny_model();
  api::parsed_request r;
  prepared_generation g;
  std::unique_ptr<generation_formatter> f;
};

std::unique_ptr<formatted> setup(api::endpoint kind, const std::string& body, std::string prompt_text = "hi") {
  auto x = std::make_unique<formatted>();
  x->r = parse(kind, body);
  x->g = prepared(x->r, std::move(prompt_text));
  x->f = formatter(x->m, x->r, x->g);
  return x;
}

const std::string chat_head = R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"tiny","choices":[)";

TEST(SseFrame, DataAndEvent) {
  EXPECT_EQ(sse_frame({"", "[DONE]"}), "data: [DONE]\n\n");
  EXPECT_EQ(sse_frame({"response.created", "{}"}), "event: response.created\ndata: {}\n\n");
}

TEST(ChoiceAccumulator, CollectsTokensThenUsage) {
  choice_accumulator a;
  a.add(tokens({3, 4}, " ab"));
  a.add(tokens({2}, ""));
  EXPECT_EQ(a.completion_tokens, 3);
  EXPECT_FALSE(a.done);
  a.add(finished(finish_reason::stop, 3));
  EXPECT_TRUE(a.done);
  EXPECT_EQ(a.text, " ab");
  EXPECT_EQ(a.token_ids, (std::vector<int32_t>{3, 4, 2}));
  EXPECT_EQ(a.reason, finish_reason::stop);

  choice_accumulator counted;
  counted.add(tokens({3}, " a"), /*keep_content=*/false);
  EXPECT_EQ(counted.completion_tokens, 1);
  EXPECT_TRUE(counted.text.empty());
  counted.add(failed(""));
  EXPECT_TRUE(counted.done);
  EXPECT_EQ(counted.error, "internal error");
}

TEST(ChatFormatter, StreamsRoleFirstThenDeltasFinishUsageDone) {
  const auto x = setup(api::endpoint::chat_completions, R"({"messages":[{"role":"user","content":"hi"}],"stream":true,"n":2,"stream_options":{"include_usage":true}})");
  auto& f = x->f;
  EXPECT_EQ(frames(f->begin()),
            "data: " + chat_head + R"({"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null})" "\n\n"
            "data: " + chat_head + R"({"index":1,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null})" "\n\n");
  EXPECT_EQ(frames(f->on_event(1, tokens({3}, " a"))),
            "data: " + chat_head + R"({"index":1,"delta":{"content":" a"},"logprobs":null,"finish_reason":null}],"usage":null})" "\n\n");
  EXPECT_TRUE(f->on_event(0, tokens({4}, "")).empty()) << "held-back text without logprobs yields no chunk";
  EXPECT_EQ(frames(f->on_event(0, finished(finish_reason::length, 1, 2))),
            "data: " + chat_head + R"({"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}],"usage":null})" "\n\n");
  EXPECT_FALSE(f->done());
  f->on_event(1, finished(finish_reason::stop, 1));
  EXPECT_TRUE(f->done());
  EXPECT_EQ(frames(f->end()),
            "data: " R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"tiny","choices":[],)"
            R"("usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":2}}})" "\n\n"
            "data: [DONE]\n\n");
  EXPECT_EQ(f->completion_tokens(), 2);
  EXPECT_EQ(f->finish_reason_text(), "length");
}

TEST(ChatFormatter, StreamsLogprobs) {
  const auto x = setup(api::endpoint::chat_completions, R"({"messages":[{"role":"user","content":"hi"}],"stream":true,"logprobs":true,"top_logprobs":1})");
  auto& f = x->f;
  f->begin();
  const auto out = f->on_event(0, tokens({4}, "b", {{4, -0.5f, {{4, -0.5f}}}}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(json::parse(out[0].data).at("choices").at(0).at("logprobs"),
            json::parse(R"({"content":[{"token":"b","logprob":-0.5,"bytes":[98],
                            "top_logprobs":[{"token":"b","logprob":-0.5,"bytes":[98]}]}]})"));
}

TEST(ChatFormatter, NonStreamingBodyWithTwoChoices) {
  const auto x = setup(api::endpoint::chat_completions, R"({"messages":[{"role":"user","content":"hi"}],"n":2})");
  auto& f = x->f;
  EXPECT_TRUE(f->begin().empty());
  EXPECT_TRUE(f->on_event(1, tokens({5}, "c")).empty());
  EXPECT_TRUE(f->on_event(0, tokens({3}, " a")).empty());
  f->on_event(0, tokens({4}, "b"));
  f->on_event(1, finished(finish_reason::length, 1));
  f->on_event(0, finished(finish_reason::stop, 2));
  ASSERT_TRUE(f->done());
  EXPECT_TRUE(f->end().empty());
  const final_body b = f->result();
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.body,
            R"({"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"tiny","choices":[)"
            R"({"index":0,"message":{"role":"assistant","content":" ab"},"logprobs":null,"finish_reason":"stop"},)"
            R"({"index":1,"message":{"role":"assistant","content":"c"},"logprobs":null,"finish_reason":"length"}],)"
            R"("usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}})");
}

TEST(CompletionsFormatter, EchoStreamsThePromptFirst) {
  const auto x = setup(api::endpoint::completions, R"({"prompt":"hi","stream":true,"echo":true})");
  auto& f = x->f;
  EXPECT_EQ(frames(f->begin()),
            "data: " R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny","choices":[)"
            R"({"index":0,"text":"hi","logprobs":null,"finish_reason":null}]})" "\n\n");
  f->on_event(0, finished(finish_reason::stop, 0));
  EXPECT_EQ(frames(f->end()), "data: [DONE]\n\n") << "no usage chunk without include_usage";
}

TEST(CompletionsFormatter, NonStreamingEchoAndLogprobOffsets) {
  const auto x = setup(api::endpoint::completions, R"({"prompt":"hi","echo":true,"logprobs":0})");
  auto& f = x->f;
  f->on_event(0, tokens({3}, " a", {{3, -0.25f, {}}}));
  f->on_event(0, tokens({4}, "b", {{4, -0.5f, {}}}));
  f->on_event(0, finished(finish_reason::length, 2));
  const final_body b = f->result();
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.body,
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny","choices":[)"
            R"({"index":0,"text":"hi ab","logprobs":{"tokens":[" a","b"],"token_logprobs":[-2.5E-1,-5E-1],)"
            R"("top_logprobs":[{},{}],"text_offset":[0,2]},"finish_reason":"length"}],)"
            R"("usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}})");
}

TEST(CompletionsFormatter, EngineErrorFailsTheRequest) {
  const auto x = setup(api::endpoint::completions, R"({"prompt":"hi","n":2,"stream":true})");
  auto& f = x->f;
  f->on_event(0, finished(finish_reason::stop, 0));
  EXPECT_EQ(frames(f->on_event(1, failed("out of memory"))),
            "data: " R"({"error":{"message":"out of memory","type":"server_error","param":null,"code":null}})" "\n\n");
  ASSERT_TRUE(f->done());
  EXPECT_EQ(f->finish_reason_text(), "error");
  const final_body b = f->result();
  EXPECT_FALSE(b.ok);
  EXPECT_EQ(b.error, "out of memory");
}

TEST(ResponsesFormatter, StreamsEventsInOrderAndCompletes) {
  const auto x = setup(api::endpoint::responses, R"({"input":"hi","stream":true})");
  auto& f = x->f;
  auto evs = f->begin();
  EXPECT_EQ(types(evs), (std::vector<std::string>{"response.created", "response.in_progress"}));
  EXPECT_EQ(json::parse(evs[0].data).at("response").at("id"), "resp-1");
  EXPECT_TRUE(f->on_event(0, tokens({2}, "")).empty());
  EXPECT_EQ(f->completion_tokens(), 1) << "counted before the finished event (a cancelled stream's access log)";
  // The message item opens at its first text.
  auto d = f->on_event(0, tokens({3}, " a"));
  ASSERT_EQ(types(d), (std::vector<std::string>{"response.output_item.added", "response.content_part.added",
                                                "response.output_text.delta"}));
  EXPECT_EQ(json::parse(d[0].data).at("item").at("id"), "msg-1");
  EXPECT_EQ(json::parse(d[0].data).at("output_index"), 0);
  EXPECT_EQ(d[2].data, R"({"item_id":"msg-1","output_index":0,"content_index":0,"delta":" a","logprobs":[],)"
                       R"("type":"response.output_text.delta","sequence_number":4})");
  EXPECT_EQ(f->completion_tokens(), 2);
  evs = f->on_event(0, finished(finish_reason::stop, 1));
  EXPECT_EQ(types(evs), (std::vector<std::string>{"response.output_text.done", "response.content_part.done", "response.output_item.done",
                                                  "response.completed"}));
  const json::value done = json::parse(evs.back().data);
  EXPECT_EQ(done.at("sequence_number"), 8);
  EXPECT_EQ(done.at("response").at("status"), "completed");
  EXPECT_EQ(done.at("response").at("output_text"), " a");
  EXPECT_EQ(done.at("response").at("usage").at("output_tokens"), 1);
  EXPECT_TRUE(f->done());
  EXPECT_TRUE(f->end().empty());
  EXPECT_EQ(f->finish_reason_text(), "stop");
}

// The access log's finish reason says "tool_calls" when the answer carried
// calls, streamed or not, as the body's finish_reason does.
TEST(ChatFormatter, FinishReasonTextNamesToolCalls) {
  for (const bool stream : {false, true}) {
    const std::string body = std::string(R"({"messages":[{"role":"user","content":"hi"}],"stream":)") + (stream ? "true" : "false") +
                             R"(,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]})";
    auto x = std::make_unique<formatted>();
    x->r = parse(api::endpoint::chat_completions, body);
    x->g = prepared(x->r);
    x->g.tool_format = api::tool_call_format::hermes;
    x->f = formatter(x->m, x->r, x->g);
    x->f->begin();
    x->f->on_event(0, tokens({3}, R"(<tool_call>{"name":"f","arguments":{}}</tool_call>)"));
    x->f->on_event(0, finished(finish_reason::stop, 1));
    EXPECT_EQ(x->f->finish_reason_text(), "tool_calls") << (stream ? "streamed" : "whole");
    if (!stream) {
      EXPECT_EQ(json::parse(x->f->result().body).at("choices").at(0).at("finish_reason"), "tool_calls");
    }
  }
}

// A streamed response without text still has its (empty) message item, as
// the non-streaming one does: opened and closed at the end.
TEST(ResponsesFormatter, StreamWithoutTextOpensTheMessageAtTheEnd) {
  const auto x = setup(api::endpoint::responses, R"({"input":"hi","stream":true})");
  auto& f = x->f;
  f->begin();
  EXPECT_TRUE(f->on_event(0, tokens({2}, "")).empty());
  const auto evs = f->on_event(0, finished(finish_reason::stop, 1));
  EXPECT_EQ(types(evs), (std::vector<std::string>{"response.output_item.added", "response.content_part.added",
                                                  "response.output_text.done", "response.content_part.done",
                                                  "response.output_item.done", "response.completed"}));
  const json::value out = json::parse(evs.back().data).at("response").at("output");
  ASSERT_EQ(out.as_array().size(), 1u);
  EXPECT_EQ(out.at(0).at("type"), "message");
  EXPECT_EQ(out.at(0).at("content").at(0).at("text"), "");
}

// Streamed with tool use, the message item opens only for text that is not
// whitespace; output_index counts the items as they are added, and
// response.completed's output has the non-streaming output's shape.
TEST(ResponsesFormatter, StreamedCallsOpenNoEmptyMessage) {
  const std::string call = R"(<tool_call>{"name":"f","arguments":{}}</tool_call>)";
  const std::string other = R"(<tool_call>{"name":"f","arguments":{"x":1}}</tool_call>)";
  struct one_case {
    std::vector<std::string> pieces;
    std::vector<std::string> want;  // output item types
  };
  const std::vector<one_case> cases = {{{call}, {"function_call"}},
                                       {{"\n", " ", call}, {"function_call"}},
                                       {{"\n", "Sure", "."}, {"message"}},
                                       {{" ", "Sure.\n", call, other}, {"message", "function_call", "function_call"}},
                                       // a repeated call ends the list (issue 54): it is dropped
                                       {{" ", "Sure.\n", call, call}, {"message", "function_call"}}};
  for (const auto& c : cases) {
    std::vector<std::string> got[2];
    for (const bool stream : {false, true}) {
      auto x = std::make_unique<formatted>();
      x->r = parse(api::endpoint::responses, std::string(R"({"input":"hi","stream":)") + (stream ? "true" : "false") +
                                                 R"(,"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]})");
      x->g = prepared(x->r);
      x->g.tool_format = api::tool_call_format::hermes;
      x->f = formatter(x->m, x->r, x->g);
      stream_events evs = x->f->begin();
      for (const auto& p : c.pieces) {
        for (auto& e : x->f->on_event(0, tokens({4}, p))) evs.push_back(std::move(e));
      }
      for (auto& e : x->f->on_event(0, finished(finish_reason::stop, 1))) evs.push_back(std::move(e));
      const json::value out = stream ? json::parse(evs.back().data).at("response").at("output")
                                     : json::parse(x->f->result().body).at("output");
      for (const auto& item : out.as_array()) got[static_cast<size_t>(stream)].push_back(std::string(item.at("type").as_string()));
      if (!stream) continue;
      int64_t next = 0;
      for (const auto& e : evs) {
        if (e.type != "response.output_item.added") continue;
        EXPECT_EQ(json::parse(e.data).at("output_index"), next) << c.pieces.size();
        ++next;
      }
      EXPECT_EQ(next, static_cast<int64_t>(c.want.size()));
    }
    EXPECT_EQ(got[0], c.want) << "whole, case with " << c.pieces.size() << " pieces";
    EXPECT_EQ(got[1], c.want) << "streamed, case with " << c.pieces.size() << " pieces";
  }
}

TEST(ResponsesFormatter, LengthMakesItIncomplete) {
  const auto x = setup(api::endpoint::responses, R"({"input":"hi","max_output_tokens":1})");
  auto& f = x->f;
  EXPECT_TRUE(f->begin().empty()) << "non-streaming yields no events";
  EXPECT_TRUE(f->on_event(0, tokens({4}, "b")).empty());
  EXPECT_TRUE(f->on_event(0, finished(finish_reason::length, 1)).empty());
  const final_body b = f->result();
  ASSERT_TRUE(b.ok);
  const json::value body = json::parse(b.body);
  EXPECT_EQ(body.at("status"), "incomplete");
  EXPECT_EQ(body.at("incomplete_details"), json::parse(R"({"reason":"max_output_tokens"})"));
  EXPECT_EQ(body.at("output").at(0).at("status"), "incomplete");
  EXPECT_EQ(body.at("output_text"), "b");
  EXPECT_EQ(body.at("max_output_tokens"), 1);
  EXPECT_EQ(f->finish_reason_text(), "length");
}

TEST(ResponsesFormatter, EngineErrorFails) {
  const auto x = setup(api::endpoint::responses, R"({"input":"hi","stream":true})");
  auto& f = x->f;
  f->begin();
  const auto evs = f->on_event(0, failed("boom"));
  ASSERT_EQ(types(evs), (std::vector<std::string>{"response.failed"}));
  const json::value resp = json::parse(evs[0].data).at("response");
  EXPECT_EQ(resp.at("status"), "failed");
  EXPECT_EQ(resp.at("error"), json::parse(R"({"code":"server_error","message":"boom"})"));
  EXPECT_EQ(resp.at("output"), json::array());
  EXPECT_TRUE(f->done());
  EXPECT_EQ(f->finish_reason_text(), "error");
  EXPECT_FALSE(f->result().ok);
  EXPECT_EQ(f->result().error, "boom");
}

}  // namespace
}  // namespace spate

namespace spate {
namespace {

using outcome = generation_check::outcome;

TEST(CheckGeneration, SharedPromptAndLengthChecks) {
  sampling_params p;
  EXPECT_EQ(check_generation({}, p, 16, 6, 8).result, outcome::empty_prompt);
  auto c = check_generation({1, 6}, p, 16, 6, 8);
  EXPECT_EQ(c.result, outcome::token_out_of_range);
  EXPECT_EQ(c.bad_token, 6);
  c = check_generation(std::vector<int32_t>(8, 1), p, 16, 6, 8);
  EXPECT_EQ(c.result, outcome::no_room);
  EXPECT_EQ(c.n_prompt, 8);
  EXPECT_FALSE(p.max_tokens.has_value()) << "no default is set when nothing fits";

  c = check_generation({1, 3}, p, 16, 6, 8);
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(p.max_tokens, 6) << "the default is capped by the room left";
  sampling_params whole_room;
  EXPECT_TRUE(check_generation({1, 3}, whole_room, std::nullopt, 6, 8).ok());
  EXPECT_EQ(whole_room.max_tokens, 6);
  sampling_params small;
  EXPECT_TRUE(check_generation({1, 3}, small, 4, 6, 8).ok());
  EXPECT_EQ(small.max_tokens, 4);

  sampling_params too_many;
  too_many.max_tokens = 7;
  c = check_generation({1, 3}, too_many, 16, 6, 8);
  EXPECT_EQ(c.result, outcome::too_long);
  EXPECT_EQ(c.max_tokens, 7);
  EXPECT_EQ(c.max_model_len, 8);

  sampling_params hot;
  hot.temperature = -1;
  c = check_generation({1, 3}, hot, 16, 6, 8);
  EXPECT_EQ(c.result, outcome::invalid_params);
  EXPECT_EQ(c.message.rfind("temperature", 0), 0u) << c.message;
}

}  // namespace
}  // namespace spate
