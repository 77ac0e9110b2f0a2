#include "protocol/completions_format.h"

#include <algorithm>

#include "protocol/logprobs_format.h"

namespace spate {

namespace json = boost::json;

completions_formatter::completions_formatter(const api::served_model& m, const api::parsed_request& r, const prepared_generation& g,
                                             std::string id, int64_t created)
    : model_(m),
      req_(r),
      gen_(g),
      chat_(r.kind == api::endpoint::chat_completions),
      want_logprobs_(r.logprobs.has_value() || r.chat_logprobs),
      id_(std::move(id)),
      created_(created),
      choices_(static_cast<size_t>(std::max(1, g.n_choices()))) {
  if (chat_ && r.stream && g.output().parses()) {
    for (size_t i = 0; i < choices_.size(); ++i) {
      choices_[i].parser = std::make_unique<api::output_parser>(g.output(), api::tool_call_ids(call_id_seed(static_cast<int32_t>(i))));
    }
  }
}

uint64_t completions_formatter::call_id_seed(int32_t index) const {
  return std::hash<std::string>{}(id_) + static_cast<uint64_t>(index);
}

stream_event completions_formatter::delta_chunk(int32_t index, json::object delta, const std::string& finish,
                                                json::value logprobs) const {
  json::object c;
  c["index"] = index;
  c["delta"] = std::move(delta);
  c["logprobs"] = std::move(logprobs);
  c["finish_reason"] = finish.empty() ? json::value(nullptr) : json::value(finish);
  json::object o = envelope(true);
  o["choices"] = json::array{c};
  if (req_.include_usage) o["usage"] = nullptr;
  return {"", json::serialize(o)};
}

void completions_formatter::stream_output(int32_t index, choice& c, const api::output_events& evs, json::value logprobs,
                                          stream_events& out) const {
  using kind = api::output_event::kind;
  std::string reasoning, content;
  for (const auto& ev : evs) {
    if (ev.type == kind::content) content += ev.text;
    if (ev.type == kind::reasoning && req_.include_reasoning) reasoning += ev.text;
  }
  if (!content.empty() || !reasoning.empty() || !logprobs.is_null()) {
    out.push_back(chunk(index, content, "", false, std::move(logprobs), reasoning));
  }
  for (const auto& ev : evs) {
    json::object call{{"index", ev.index}};
    if (ev.type == kind::call_begin) {
      call["id"] = ev.id;
      call["type"] = "function";
      call["function"] = json::object{{"name", ev.name}, {"arguments", ""}};
    } else if (ev.type == kind::arguments) {
      call["function"] = json::object{{"arguments", ev.text}};
    } else {
      if (ev.type == kind::call_end && ev.complete) c.called = true;
      continue;
    }
    out.push_back(delta_chunk(index, json::object{{"tool_calls", json::array{std::move(call)}}}, ""));
  }
}

json::object completions_formatter::message_of(int32_t index, const choice_accumulator& c, std::string& finish) const {
  json::object m;
  m["role"] = "assistant";
  const api::output_format fmt = gen_.output();
  if (!fmt.parses()) {
    m["content"] = c.text;
    return m;
  }
  api::tool_call_ids ids(call_id_seed(index));
  const api::parsed_output parsed = api::parse_output(fmt, c.text, ids, c.reason == finish_reason::length);
  if (fmt.splits_reasoning() && req_.include_reasoning) {  // llama-server's name, and vLLM's current one (the same text)
    m["reasoning_content"] = parsed.has_reasoning ? json::value(parsed.reasoning) : json::value(nullptr);
    m["reasoning"] = m["reasoning_content"];
  }
  if (!gen_.tool_format) {
    m["content"] = parsed.content;
    return m;
  }
  const bool blank = parsed.content.find_first_not_of(" \t\r\n") == std::string::npos;
  m["content"] = blank && !parsed.calls.empty() ? json::value(nullptr) : json::value(parsed.content);
  if (parsed.calls.empty()) return m;
  json::array calls;
  for (const auto& call : parsed.calls) {
    calls.push_back(json::object{{"id", call.id}, {"type", "function"},
                                 {"function", json::object{{"name", call.name}, {"arguments", call.arguments}}}});
  }
  m["tool_calls"] = std::move(calls);
  if (c.reason == finish_reason::stop) finish = "tool_calls";
  return m;
}

json::value completions_formatter::logprobs_json(int64_t& text_offset, const std::vector<token_logprob>& lps) const {
  if (!want_logprobs_) return nullptr;
  if (chat_) return chat_logprobs(*model_.tok, lps);
  return completion_logprobs(*model_.tok, lps, text_offset);
}

json::object completions_formatter::envelope(bool streaming) const {
  json::object o;
  o["id"] = id_;
  o["object"] = chat_ ? (streaming ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  o["created"] = created_;
  o["model"] = model_.name;
  return o;
}

stream_event completions_formatter::chunk(int32_t index, std::string_view text, const std::string& finish, bool role,
                                          json::value logprobs, std::string_view reasoning) const {
  if (chat_) {
    json::object delta;
    if (role) delta["role"] = "assistant";
    if (!reasoning.empty()) {
      delta["reasoning_content"] = reasoning;
      delta["reasoning"] = reasoning;
    }
    if (role || !text.empty()) delta["content"] = text;
    return delta_chunk(index, std::move(delta), finish, std::move(logprobs));
  }
  json::object c;
  c["index"] = index;
  c["text"] = text;
  c["logprobs"] = std::move(logprobs);
  c["finish_reason"] = finish.empty() ? json::value(nullptr) : json::value(finish);
  json::object o = envelope(true);
  o["choices"] = json::array{c};
  if (req_.include_usage) o["usage"] = nullptr;
  return {"", json::serialize(o)};
}

stream_events completions_formatter::begin() {
  stream_events out;
  if (!req_.stream) return out;
  for (size_t i = 0; i < choices_.size(); ++i) {
    if (chat_) {
      out.push_back(chunk(static_cast<int32_t>(i), "", "", true));
    } else if (req_.echo) {
      out.push_back(chunk(static_cast<int32_t>(i), gen_.prompt_text_of_choice(static_cast<int32_t>(i)), "", false));
    }
  }
  return out;
}

stream_events completions_formatter::on_event(int32_t index, const engine_event& e) {
  stream_events out;
  choice& c = choices_.at(static_cast<size_t>(index));
  const bool was_done = c.acc.done;
  c.acc.add(e, /*keep_content=*/!req_.stream);
  if (c.acc.done && !was_done) ++n_done_;
  if (!req_.stream) return out;
  if (e.type == engine_event::kind::tokens && chat_) {
    json::value lp = want_logprobs_ && !e.logprobs.empty() ? logprobs_json(c.text_offset, e.logprobs) : json::value(nullptr);
    api::output_events evs;
    if (c.parser) {
      evs = c.parser->feed(e.text);
    } else if (!e.text.empty()) {
      evs.emplace_back().text = e.text;  // content
    }
    stream_output(index, c, evs, std::move(lp), out);
  } else if (e.type == engine_event::kind::tokens) {
    if (!e.text.empty() || (want_logprobs_ && !e.logprobs.empty())) {
      out.push_back(chunk(index, e.text, "", false, logprobs_json(c.text_offset, e.logprobs)));
    }
  } else if (e.type == engine_event::kind::finished) {
    std::string finish = openai_finish_reason(e.reason);
    if (c.parser) {  // what was held back: an incomplete tag is text, open calls end
      stream_output(index, c, c.parser->finish(e.reason == finish_reason::length), nullptr, out);
      if (c.called && e.reason == finish_reason::stop) finish = "tool_calls";
    }
    out.push_back(chunk(index, "", finish, false));
  } else {
    json::object err;
    err["message"] = c.acc.error;
    err["type"] = "server_error";
    err["param"] = nullptr;
    err["code"] = nullptr;
    json::object o;
    o["error"] = std::move(err);
    out.push_back({"", json::serialize(o)});
  }
  return out;
}

int32_t completions_formatter::completion_tokens() const {
  int32_t n = 0;
  for (const auto& c : choices_) n += c.acc.completion_tokens;
  return n;
}

int32_t completions_formatter::cached_tokens() const {
  int32_t n = 0;
  for (const auto& c : choices_) n = std::max(n, c.acc.usage.cached_prompt_tokens);
  return n;
}

const std::string* completions_formatter::first_error() const {
  for (const auto& c : choices_) {
    if (!c.acc.error.empty()) return &c.acc.error;
  }
  return nullptr;
}

std::string completions_formatter::finish_reason_text() const {
  if (first_error()) return "error";
  const choice& c = choices_.front();
  std::string finish = openai_finish_reason(c.acc.reason);
  if (c.parser) {
    if (c.called && c.acc.reason == finish_reason::stop) finish = "tool_calls";
  } else if (chat_ && gen_.tool_format && c.acc.done) {
    message_of(0, c.acc, finish);  // what the answer said
  }
  return finish;
}

stream_events completions_formatter::end() {
  stream_events out;
  if (!req_.stream) return out;
  if (req_.include_usage) {
    json::object o = envelope(true);
    o["choices"] = json::array();
    o["usage"] = usage_json(gen_.n_prompt_tokens(), completion_tokens(), cached_tokens());
    out.push_back({"", json::serialize(o)});
  }
  out.push_back({"", "[DONE]"});
  return out;
}

final_body completions_formatter::result() const {
  if (const std::string* err = first_error()) return {false, "", *err};
  json::array arr;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const choice_accumulator& c = choices_[i].acc;
    int64_t text_offset = 0;  // the whole text's offsets start at 0
    json::object o;
    o["index"] = static_cast<int64_t>(i);
    std::string finish = openai_finish_reason(c.reason);
    if (chat_) {
      o["message"] = message_of(static_cast<int32_t>(i), c, finish);
    } else {
      o["text"] = req_.echo ? gen_.prompt_text_of_choice(static_cast<int32_t>(i)) + c.text : c.text;
    }
    o["logprobs"] = logprobs_json(text_offset, c.logprobs);
    o["finish_reason"] = finish;
    arr.push_back(std::move(o));
  }
  json::object o = envelope(false);
  o["choices"] = std::move(arr);
  o["usage"] = usage_json(gen_.n_prompt_tokens(), completion_tokens(), cached_tokens());
  return {true, json::serialize(o), ""};
}

}  // namespace spate
