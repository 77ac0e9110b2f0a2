#include "protocol/responses_format.h"

#include <algorithm>

namespace spate {

namespace json = boost::json;

namespace {

// The request's tools in the Responses shape, for the response object.
json::array responses_tools(const api::tool_request& t) {
  json::array out;
  for (const json::value& tool : t.tools) {
    const json::object& fn = tool.at("function").as_object();
    json::object o{{"type", "function"}, {"name", fn.at("name")}, {"strict", false}};
    o["description"] = fn.contains("description") ? fn.at("description") : json::value(nullptr);
    o["parameters"] = fn.contains("parameters") ? fn.at("parameters") : json::value(nullptr);
    out.push_back(std::move(o));
  }
  return out;
}

json::value tool_choice_json(const api::tool_request& t) {
  using choice = api::tool_request::choice;
  switch (t.mode) {
    case choice::none: return "none";
    case choice::automatic: return "auto";
    case choice::required: return "required";
    case choice::named: return json::object{{"type", "function"}, {"name", t.name}};
  }
  return "auto";
}

// text.format as the request gave it.
json::value format_json(const api::output_constraint& c) {
  using kind = api::output_constraint::kind;
  if (c.type == kind::json_object) return json::object{{"type", "json_object"}};
  if (c.type == kind::json_schema) return json::object{{"type", "json_schema"}, {"schema", c.schema}, {"strict", true}};
  return json::object{{"type", "text"}};
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

responses_formatter::responses_formatter(std::string response_id, std::string message_id, std::string model, int64_t created_at,
                                         const api::parsed_request& req, const api::output_format& output, std::string reasoning_id)
    : id_(std::move(response_id)), msg_id_(std::move(message_id)), model_(std::move(model)), created_at_(created_at), stream_(req.stream),
      tool_use_(output.tools.has_value()), reasoning_id_(std::move(reasoning_id)) {
  if (output.parses()) parser_ = std::make_unique<api::output_parser>(output, api::tool_call_ids(std::hash<std::string>{}(id_)));
  tools_echo_ = responses_tools(req.tool_use);
  tool_choice_echo_ = tool_choice_json(req.tool_use);
  parallel_echo_ = req.tool_use.parallel;
  format_echo_ = format_json(req.constraint);
  reasoning_echo_ = json::object{{"effort", req.reasoning_effort ? json::value(*req.reasoning_effort) : json::value(nullptr)},
                                 {"summary", nullptr}};
  instructions_ = nullptr;
  max_output_tokens_ = req.params.max_tokens ? json::value(*req.params.max_tokens) : json::value(nullptr);
  temperature_ = static_cast<double>(req.params.temperature);
  top_p_ = static_cast<double>(req.params.top_p);
}

json::object responses_formatter::text_part() const {
  json::object p;
  p["type"] = "output_text";
  p["text"] = text_;
  p["annotations"] = json::array();
  p["logprobs"] = json::array();
  return p;
}

json::object responses_formatter::message_item(bool done) const {
  json::object m;
  m["id"] = msg_id_;
  m["type"] = "message";
  m["status"] = done ? (status_ == "in_progress" ? "completed" : status_) : "in_progress";
  m["role"] = "assistant";
  json::array content;
  if (done) content.push_back(text_part());
  m["content"] = std::move(content);
  return m;
}

json::object responses_formatter::reasoning_item(const reasoning_part& p, bool done) const {
  json::object r;
  r["id"] = p.id;
  r["type"] = "reasoning";
  r["summary"] = json::array();
  json::array content;
  if (done) content.push_back(json::object{{"type", "reasoning_text"}, {"text", p.text}});
  r["content"] = std::move(content);
  r["encrypted_content"] = nullptr;
  // Cut by max_output_tokens before its end marker: incomplete, as the response.
  r["status"] = !done ? "in_progress" : (p.complete || status_ == "in_progress") ? "completed" : status_;
  return r;
}

json::object responses_formatter::reasoning_address(const reasoning_part& p) const {
  return json::object{{"item_id", p.id}, {"output_index", p.output_index}, {"content_index", 0}};
}

json::array responses_formatter::output_items() const {
  json::array output;
  if (!stream_) {
    for (const auto& p : reasoning_) output.push_back(reasoning_item(p, true));
    if (!blank(text_) || calls_.empty()) output.push_back(message_item(true));
    for (const auto& c : calls_) output.push_back(call_item(c));
    return output;
  }
  // In output_index order, as the items were added.
  std::vector<std::pair<int64_t, json::object>> items;
  for (const auto& p : reasoning_) items.emplace_back(p.output_index, reasoning_item(p, true));
  if (msg_index_ >= 0) items.emplace_back(msg_index_, message_item(true));
  for (const auto& c : calls_) items.emplace_back(c.output_index, call_item(c));
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [index, item] : items) output.push_back(std::move(item));
  return output;
}

json::object responses_formatter::response_object() const {
  json::object r;
  r["id"] = id_;
  r["object"] = "response";
  r["created_at"] = created_at_;
  r["status"] = status_;
  r["model"] = model_;
  json::array output;
  if (status_ != "in_progress" && error_.empty()) output = output_items();
  r["output"] = std::move(output);
  r["output_text"] = text_;
  if (error_.empty()) {
    r["error"] = nullptr;
  } else {
    json::object e;
    e["code"] = "server_error";
    e["message"] = error_;
    r["error"] = std::move(e);
  }
  if (incomplete_reason_.empty()) {
    r["incomplete_details"] = nullptr;
  } else {
    json::object d;
    d["reason"] = incomplete_reason_;
    r["incomplete_details"] = std::move(d);
  }
  r["instructions"] = instructions_;
  r["max_output_tokens"] = max_output_tokens_;
  r["metadata"] = json::object();
  r["parallel_tool_calls"] = parallel_echo_;
  r["temperature"] = temperature_;
  r["top_p"] = top_p_;
  r["tool_choice"] = tool_choice_echo_;
  r["tools"] = tools_echo_;
  r["text"] = json::object{{"format", format_echo_}};
  r["reasoning"] = reasoning_echo_;
  r["truncation"] = "disabled";
  if (has_usage_) {
    json::object u;
    u["input_tokens"] = usage_.prompt_tokens;
    json::object in_d;
    in_d["cached_tokens"] = usage_.cached_prompt_tokens;
    u["input_tokens_details"] = std::move(in_d);
    u["output_tokens"] = usage_.completion_tokens;
    json::object out_d;
    out_d["reasoning_tokens"] = n_reasoning_tokens_;
    u["output_tokens_details"] = std::move(out_d);
    u["total_tokens"] = usage_.prompt_tokens + usage_.completion_tokens;
    r["usage"] = std::move(u);
  } else {
    r["usage"] = nullptr;
  }
  return r;
}

json::object responses_formatter::part_address() const {
  json::object o;
  o["item_id"] = msg_id_;
  o["output_index"] = msg_index_;
  o["content_index"] = 0;
  return o;
}

json::object responses_formatter::call_item(const function_call& c) const {
  return json::object{{"id", c.item_id}, {"type", "function_call"}, {"call_id", c.call_id}, {"name", c.name},
                      {"arguments", c.arguments}, {"status", !c.done ? "in_progress" : c.complete ? "completed" : "incomplete"}};
}

void responses_formatter::on_call_event(const api::output_event& ev, stream_events& out) {
  using kind = api::output_event::kind;
  if (ev.type == kind::call_begin) {
    const int64_t index = n_items_++;
    calls_.push_back({"fc_" + ev.id.substr(ev.id.find('_') + 1), ev.id, ev.name, "", false, true, index});
    if (stream_) {
      out.push_back(make("response.output_item.added", json::object{{"output_index", index}, {"item", call_item(calls_.back())}}));
    }
    return;
  }
  function_call& c = calls_.at(static_cast<size_t>(ev.index));
  if (ev.type == kind::arguments) {
    c.arguments += ev.text;
    if (stream_) {
      out.push_back(make("response.function_call_arguments.delta",
                         json::object{{"item_id", c.item_id}, {"output_index", c.output_index}, {"delta", ev.text}}));
    }
    return;
  }
  c.done = true;  // call_end
  c.complete = ev.complete;
  if (!stream_) return;
  out.push_back(make("response.function_call_arguments.done",
                     json::object{{"item_id", c.item_id}, {"output_index", c.output_index}, {"arguments", c.arguments}}));
  out.push_back(make("response.output_item.done", json::object{{"output_index", c.output_index}, {"item", call_item(c)}}));
}

void responses_formatter::on_reasoning_event(const api::output_event& ev, stream_events& out) {
  using kind = api::output_event::kind;
  if (ev.type == kind::reasoning_begin) {
    const size_t k = reasoning_.size();
    reasoning_.push_back({k == 0 ? reasoning_id_ : reasoning_id_ + "_" + std::to_string(k + 1), "", false, false, n_items_++});
    if (!stream_) return;
    out.push_back(make("response.output_item.added",
                       json::object{{"output_index", reasoning_.back().output_index}, {"item", reasoning_item(reasoning_.back(), false)}}));
    json::object a = reasoning_address(reasoning_.back());
    a["part"] = json::object{{"type", "reasoning_text"}, {"text", ""}};
    out.push_back(make("response.content_part.added", std::move(a)));
    return;
  }
  reasoning_part& p = reasoning_.back();
  if (ev.type == kind::reasoning) {
    p.text += ev.text;
    if (!stream_) return;
    json::object d = reasoning_address(p);
    d["delta"] = ev.text;
    out.push_back(make("response.reasoning_text.delta", std::move(d)));
    return;
  }
  p.done = true;  // reasoning_end
  p.complete = ev.complete;
  if (!stream_) return;
  json::object done = reasoning_address(p);
  done["text"] = p.text;
  out.push_back(make("response.reasoning_text.done", std::move(done)));
  json::object part = reasoning_address(p);
  part["part"] = json::object{{"type", "reasoning_text"}, {"text", p.text}};
  out.push_back(make("response.content_part.done", std::move(part)));
  out.push_back(make("response.output_item.done", json::object{{"output_index", p.output_index}, {"item", reasoning_item(p, true)}}));
}

void responses_formatter::on_output(api::output_events evs, stream_events& out) {
  using kind = api::output_event::kind;
  for (const auto& ev : evs) {
    switch (ev.type) {
      case kind::content: on_content(ev.text, out); break;
      case kind::reasoning_begin:
      case kind::reasoning:
      case kind::reasoning_end: on_reasoning_event(ev, out); break;
      default: on_call_event(ev, out); break;
    }
  }
}

stream_event responses_formatter::make(std::string type, json::object o) {
  o["type"] = type;
  o["sequence_number"] = seq_++;
  return {std::move(type), json::serialize(o)};
}

stream_events responses_formatter::begin() {
  stream_events ev;
  if (!stream_) return ev;
  json::object a;
  a["response"] = response_object();
  ev.push_back(make("response.created", a));
  json::object b;
  b["response"] = response_object();
  ev.push_back(make("response.in_progress", b));
  return ev;
}

void responses_formatter::open_message(stream_events& out) {
  msg_index_ = n_items_++;
  json::object c;
  c["output_index"] = msg_index_;
  c["item"] = message_item(false);
  out.push_back(make("response.output_item.added", c));
  json::object d = part_address();
  d["part"] = text_part();
  out.push_back(make("response.content_part.added", d));
}

void responses_formatter::stream_text(std::string_view text, stream_events& out) {
  if (msg_index_ < 0) {
    held_.append(text);
    // Whitespace alone opens no message item while calls may come (tool use).
    if (held_.empty() || (tool_use_ && blank(held_))) return;
    open_message(out);
    out.push_back(delta(held_));
    held_.clear();
    return;
  }
  if (!text.empty()) out.push_back(delta(text));
}

stream_event responses_formatter::delta(std::string_view text) {
  text_.append(text);
  json::object o = part_address();
  o["delta"] = text;
  o["logprobs"] = json::array();
  return make("response.output_text.delta", o);
}

stream_events responses_formatter::finish(finish_reason reason, const request_usage& usage) {
  has_usage_ = true;
  usage_ = usage;
  reason_ = reason;
  if (reason == finish_reason::length) {
    status_ = "incomplete";
    incomplete_reason_ = "max_output_tokens";
  } else {
    status_ = "completed";
  }
  stream_events ev;
  if (stream_ && msg_index_ < 0 && calls_.empty()) {
    // No calls: the message item is there, as in the non-streaming output, with
    // whatever text was held back (whitespace), if any.
    open_message(ev);
    if (!held_.empty()) ev.push_back(delta(held_));
  }
  held_.clear();  // whitespace only, after calls: no message item for it (non-streaming leaves it out too)
  if (msg_index_ >= 0) {
    json::object a = part_address();
    a["text"] = text_;
    a["logprobs"] = json::array();
    ev.push_back(make("response.output_text.done", a));
    json::object b = part_address();
    b["part"] = text_part();
    ev.push_back(make("response.content_part.done", b));
    json::object c;
    c["output_index"] = msg_index_;
    c["item"] = message_item(true);
    ev.push_back(make("response.output_item.done", c));
  }
  json::object d;
  d["response"] = response_object();
  ev.push_back(make(status_ == "incomplete" ? "response.incomplete" : "response.completed", d));
  return ev;
}

stream_events responses_formatter::fail(std::string_view message) {
  status_ = "failed";
  error_ = std::string(message);
  json::object d;
  d["response"] = response_object();
  return {make("response.failed", d)};
}

void responses_formatter::on_content(std::string_view text, stream_events& out) {
  if (stream_) {
    stream_text(text, out);
  } else {
    text_.append(text);
  }
}

stream_events responses_formatter::on_event(int32_t /*choice: always 0*/, const engine_event& e) {
  stream_events out;
  if (done_) return out;
  switch (e.type) {
    case engine_event::kind::tokens: {
      n_tokens_ += static_cast<int32_t>(e.token_ids.size());
      if (!parser_) {
        on_content(e.text, out);
        break;
      }
      const bool was_reasoning = parser_->in_reasoning();
      api::output_events evs = parser_->feed(e.text);
      const bool reasoned = std::any_of(evs.begin(), evs.end(), [](const api::output_event& ev) {
        return ev.type == api::output_event::kind::reasoning_begin || ev.type == api::output_event::kind::reasoning ||
               ev.type == api::output_event::kind::reasoning_end;
      });
      if (was_reasoning || reasoned) n_reasoning_tokens_ += static_cast<int32_t>(e.token_ids.size());
      on_output(std::move(evs), out);
      break;
    }
    case engine_event::kind::finished: {
      done_ = true;
      const bool cut = e.reason == finish_reason::length;
      if (parser_) on_output(parser_->finish(cut), out);
      if (!stream_ && !cut) {  // a call that broke off is content (its text came as such), unless the limit cut it
        std::erase_if(calls_, [](const function_call& c) { return !c.complete; });
      }
      stream_events fin = finish(e.reason, e.usage);
      out.insert(out.end(), std::make_move_iterator(fin.begin()), std::make_move_iterator(fin.end()));
      break;
    }
    case engine_event::kind::error:
      done_ = true;
      out = fail(e.error.empty() ? "internal error" : e.error);
      break;
  }
  if (!stream_) out.clear();
  return out;
}

final_body responses_formatter::result() const {
  if (!error_.empty()) return {false, "", error_};
  return {true, json::serialize(response_object()), ""};
}

std::string responses_formatter::finish_reason_text() const {
  if (!error_.empty()) return "error";
  return has_usage_ ? openai_finish_reason(reason_) : "";
}

}  // namespace spate
