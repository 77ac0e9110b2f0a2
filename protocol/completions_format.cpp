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
      choices_(static_cast<size_t>(std::max(1, g.n))) {}

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
                                          json::value logprobs) const {
  json::object c;
  c["index"] = index;
  if (chat_) {
    json::object delta;
    if (role) delta["role"] = "assistant";
    if (role || !text.empty()) delta["content"] = text;
    c["delta"] = std::move(delta);
  } else {
    c["text"] = text;
  }
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
      out.push_back(chunk(static_cast<int32_t>(i), gen_.prompt_text, "", false));
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
  if (e.type == engine_event::kind::tokens) {
    if (!e.text.empty() || (want_logprobs_ && !e.logprobs.empty())) {
      out.push_back(chunk(index, e.text, "", false, logprobs_json(c.text_offset, e.logprobs)));
    }
  } else if (e.type == engine_event::kind::finished) {
    out.push_back(chunk(index, "", openai_finish_reason(e.reason), false));
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
  return openai_finish_reason(choices_.front().acc.reason);
}

stream_events completions_formatter::end() {
  stream_events out;
  if (!req_.stream) return out;
  if (req_.include_usage) {
    json::object o = envelope(true);
    o["choices"] = json::array();
    o["usage"] = usage_json(static_cast<int32_t>(gen_.prompt.size()), completion_tokens(), cached_tokens());
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
    if (chat_) {
      json::object m;
      m["role"] = "assistant";
      m["content"] = c.text;
      o["message"] = std::move(m);
    } else {
      o["text"] = req_.echo ? gen_.prompt_text + c.text : c.text;
    }
    o["logprobs"] = logprobs_json(text_offset, c.logprobs);
    o["finish_reason"] = openai_finish_reason(c.reason);
    arr.push_back(std::move(o));
  }
  json::object o = envelope(false);
  o["choices"] = std::move(arr);
  o["usage"] = usage_json(static_cast<int32_t>(gen_.prompt.size()), completion_tokens(), cached_tokens());
  return {true, json::serialize(o), ""};
}

}  // namespace spate
