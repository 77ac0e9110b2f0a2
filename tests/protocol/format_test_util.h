// Helpers shared by the protocol tests: a six-token vocabulary, synthetic
// engine events, a formatter fed pieces of output, and a choice grammar.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "protocol/constraint_compiler.h"
#include "protocol/generation.h"
#include "protocol/generation_format.h"
#include "tokenizer/tokenizer.h"

namespace spate::test {

// ids: 0 <unk>, 1 <s>, 2 </s>, 3 " a", 4 "b", 5 "c".
inline const tokenizer& tiny_tokenizer() {
  static const tokenizer tok([] {
    vocab_spec s;
    s.model = "llama";
    s.tokens = {"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a", "b", "c"};
    s.scores = {0, 0, 0, -1, -2, -3};
    s.token_types = {2, 3, 3, 1, 1, 1};
    s.unk_id = 0;
    s.bos_id = 1;
    s.eos_id = 2;
    return s;
  }());
  return tok;
}

// A tokens event of n tokens with this text.
inline engine_event tokens(std::string text, int32_t n = 1) {
  engine_event e;
  e.type = engine_event::kind::tokens;
  e.token_ids.assign(static_cast<size_t>(n), 4);
  e.text = std::move(text);
  return e;
}

inline engine_event finished(int32_t completion, finish_reason why = finish_reason::stop) {
  engine_event e;
  e.type = engine_event::kind::finished;
  e.reason = why;
  e.usage = {3, completion, 0};
  return e;
}

// One request through its formatter (ids "<prefix>-1", created 1700000000).
struct format_run {
  api::served_model m;
  api::parsed_request r;
  prepared_generation g;
  std::unique_ptr<generation_formatter> f;
  stream_events events;
};

// Parses body for kind; configure sets how the output is parsed (g's
// reasoning, harmony, tool_format) before the formatter is made.
inline std::unique_ptr<format_run> start_run(api::endpoint kind, const std::string& body,
                                             const std::function<void(format_run&)>& configure) {
  auto x = std::make_unique<format_run>();
  x->m.tok = &tiny_tokenizer();
  x->m.n_vocab = 6;
  x->m.max_model_len = 64;
  x->m.name = "tiny";
  EXPECT_FALSE(api::parse_request(kind, body, x->r));
  x->g.prompt = {1, 3};
  configure(*x);
  x->f = make_formatter(x->m, x->r, x->g, [](const char* p) { return std::string(p) + "-1"; }, 1700000000);
  x->events = x->f->begin();
  return x;
}

// Feeds pieces (one tokens event each) then the finish; returns all streamed events.
inline stream_events feed(format_run& x, const std::vector<std::string>& pieces, finish_reason why = finish_reason::stop) {
  for (const auto& p : pieces) {
    auto ev = x.f->on_event(0, tokens(p));
    x.events.insert(x.events.end(), ev.begin(), ev.end());
  }
  auto ev = x.f->on_event(0, finished(static_cast<int32_t>(pieces.size()), why));
  x.events.insert(x.events.end(), ev.begin(), ev.end());
  auto end = x.f->end();
  x.events.insert(x.events.end(), end.begin(), end.end());
  return x.events;
}

// The chat message streamed deltas add up to: reasoning_content (null when
// no delta had it), content, and tool_calls (when some delta had calls).
inline boost::json::object streamed_message(const stream_events& evs) {
  namespace json = boost::json;
  std::optional<std::string> reasoning;
  std::string content;
  json::array calls;
  for (const auto& e : evs) {
    if (e.data == "[DONE]") continue;
    const json::object o = json::parse(e.data).as_object();
    if (o.at("choices").as_array().empty()) continue;
    const json::object& d = o.at("choices").at(0).at("delta").as_object();
    if (const auto* r = d.if_contains("reasoning_content")) {
      EXPECT_FALSE(r->as_string().empty()) << "a reasoning delta is never empty";
      EXPECT_EQ(d.if_contains("reasoning") ? *d.if_contains("reasoning") : json::value(), *r) << "vLLM's name, same text";
      reasoning = reasoning.value_or("") + std::string(r->as_string());
    }
    if (const auto* c = d.if_contains("content"); c && c->is_string()) content += c->as_string();
    const auto* t = d.if_contains("tool_calls");
    if (!t) continue;
    const json::object& call = t->at(0).as_object();
    const auto i = static_cast<size_t>(call.at("index").as_int64());
    if (i == calls.size()) {
      calls.push_back(json::object{{"id", call.at("id")}, {"type", "function"},
                                   {"function", json::object{{"name", call.at("function").at("name")}, {"arguments", ""}}}});
    }
    calls.at(i).at("function").at("arguments").as_string() += call.at("function").at("arguments").as_string();
  }
  json::object m{{"reasoning_content", reasoning ? json::value(*reasoning) : json::value(nullptr)}, {"content", content}};
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  return m;
}

// <unk> <s> </s> (ids 0-2), "a".."z", then extra, all normal tokens; a
// SentencePiece vocabulary without a space prefix.
inline vocab_spec letters_vocab(std::initializer_list<const char*> extra) {
  vocab_spec s;
  s.model = "llama";
  s.add_space_prefix = false;
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.token_types = {2, 3, 3};
  for (char c = 'a'; c <= 'z'; ++c) s.tokens.emplace_back(1, c);
  for (const char* t : extra) s.tokens.emplace_back(t);
  s.token_types.resize(s.tokens.size(), 1);
  s.unk_id = 0;
  s.bos_id = 1;
  s.eos_id = 2;
  return s;
}

inline std::vector<std::string> types_of(const stream_events& evs) {
  std::vector<std::string> t;
  for (const auto& e : evs) t.push_back(e.type);
  return t;
}

inline std::shared_ptr<const constraint_spec> choice_of(api::constraint_compiler& cc, std::vector<std::string> choices) {
  api::output_constraint oc;
  oc.type = api::output_constraint::kind::choice;
  oc.choices = std::move(choices);
  oc.param = "guided_choice";
  std::optional<api::api_error> err;
  auto spec = cc.compile(oc, err);
  EXPECT_FALSE(err.has_value());
  return spec;
}

}  // namespace spate::test
