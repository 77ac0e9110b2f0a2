#include "protocol/ollama_format.h"

#include <ctime>

#include "protocol/logprobs_format.h"
#include "protocol/ollama_request.h"

namespace spate {

namespace json = boost::json;

namespace {

// "2026-11-29T13:22:45.499127Z" (UTC, microseconds), as Ollama writes created_at.
std::string iso_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  char out[64];
  std::snprintf(out, sizeof out, "%s.%06lldZ", buf, static_cast<long long>(us));
  return out;
}

json::value arguments_object(const std::string& text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  return !ec && v.is_object() ? v : json::value(json::object());
}

}  // namespace

ollama_formatter::ollama_formatter(const api::served_model& m, const api::parsed_request& r, const prepared_generation& g)
    : model_(m), req_(r), gen_(g), chat_(r.ollama_kind == api::endpoint::ollama_chat), created_at_(iso_now()) {
  if (r.stream && g.output().parses()) parser_ = std::make_unique<api::output_parser>(g.output(), api::tool_call_ids(0));
}

json::object ollama_formatter::envelope() const {
  return json::object{{"model", model_.name}, {"created_at", created_at_}};
}

void ollama_formatter::add_events(const api::output_events& evs, pieces& p) {
  using kind = api::output_event::kind;
  for (const auto& ev : evs) {
    switch (ev.type) {
      case kind::content: p.content += ev.text; break;
      case kind::reasoning: if (req_.include_reasoning) p.thinking += ev.text; break;
      case kind::call_begin:
        if (call_args_.size() <= static_cast<size_t>(ev.index)) {
          call_args_.resize(static_cast<size_t>(ev.index) + 1);
          call_names_.resize(static_cast<size_t>(ev.index) + 1);
        }
        call_names_[static_cast<size_t>(ev.index)] = ev.name;
        break;
      case kind::arguments: call_args_[static_cast<size_t>(ev.index)] += ev.text; break;
      case kind::call_end:
        if (ev.complete) {
          p.calls.push_back(json::object{{"function", json::object{{"name", call_names_[static_cast<size_t>(ev.index)]},
                                                                   {"arguments", arguments_object(call_args_[static_cast<size_t>(ev.index)])}}}});
        }
        break;
      default: break;
    }
  }
}

json::object ollama_formatter::chunk(const pieces& p, bool done, const std::vector<token_logprob>* lps) const {
  json::object o = envelope();
  if (chat_) {
    json::object msg{{"role", "assistant"}, {"content", p.content}};
    if (!p.thinking.empty()) msg["thinking"] = p.thinking;
    if (!p.calls.empty()) msg["tool_calls"] = p.calls;
    o["message"] = std::move(msg);
  } else {
    o["response"] = p.content;
    if (!p.thinking.empty()) o["thinking"] = p.thinking;
  }
  if (lps && req_.params.logprobs) o["logprobs"] = chat_logprobs(*model_.tok, *lps)["content"];
  o["done"] = done;
  return o;
}

void ollama_formatter::add_stats(json::object& o) const {
  const int64_t total_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
  int64_t eval_us = 0;
  for (int64_t gap : metrics_.itl_us) eval_us += gap;
  o["done_reason"] = finish_reason_text();
  o["total_duration"] = total_ns + req_.load_duration_ns;
  o["load_duration"] = req_.load_duration_ns;
  o["prompt_eval_count"] = gen_.n_prompt_tokens();
  o["prompt_eval_duration"] = std::max<int64_t>(0, metrics_.ttft_us - metrics_.queue_us) * 1000;
  o["eval_count"] = acc_.completion_tokens;
  o["eval_duration"] = eval_us * 1000;
}

stream_events ollama_formatter::on_event(int32_t, const engine_event& e) {
  stream_events out;
  acc_.add(e, /*keep_content=*/!req_.stream);
  if (e.type == engine_event::kind::finished) metrics_ = e.metrics;
  if (!req_.stream) return out;
  if (e.type == engine_event::kind::error) {
    out.push_back({"", api::ollama_error_body(acc_.error)});
    return out;
  }
  pieces p;
  if (e.type == engine_event::kind::tokens) {
    if (parser_) {
      add_events(parser_->feed(e.text), p);
    } else {
      p.content = e.text;
    }
    pending_logprobs_.insert(pending_logprobs_.end(), e.logprobs.begin(), e.logprobs.end());
    if (!p.content.empty() || !p.thinking.empty() || !p.calls.empty()) {
      out.push_back({"", json::serialize(chunk(p, false, &pending_logprobs_))});
      pending_logprobs_.clear();
    }
    return out;
  }
  if (parser_) add_events(parser_->finish(e.reason == finish_reason::length), p);
  json::object last = chunk(p, true, pending_logprobs_.empty() ? nullptr : &pending_logprobs_);
  add_stats(last);
  out.push_back({"", json::serialize(last)});
  return out;
}

std::string ollama_formatter::finish_reason_text() const {
  if (!acc_.error.empty()) return "error";
  if (!acc_.done) return "";
  return acc_.reason == finish_reason::length ? "length" : "stop";
}

final_body ollama_formatter::result() const {
  if (!acc_.error.empty()) return {false, "", acc_.error};
  pieces p;
  const api::output_format fmt = gen_.output();
  if (!fmt.parses()) {
    p.content = acc_.text;
  } else {
    api::tool_call_ids ids(0);
    const api::parsed_output parsed = api::parse_output(fmt, acc_.text, ids, acc_.reason == finish_reason::length);
    p.content = parsed.content;
    if (parsed.has_reasoning && req_.include_reasoning) p.thinking = parsed.reasoning;
    for (const auto& call : parsed.calls)
      p.calls.push_back(json::object{{"function", json::object{{"name", call.name}, {"arguments", arguments_object(call.arguments)}}}});
  }
  json::object o = chunk(p, true, &acc_.logprobs);
  add_stats(o);
  return {true, json::serialize(o), ""};
}

}  // namespace spate
