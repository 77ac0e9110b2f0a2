#include "protocol/anthropic_format.h"

#include "protocol/anthropic_request.h"

namespace spate {

namespace json = boost::json;

namespace {

uint64_t call_seed(const std::string& id) { return std::hash<std::string>{}(id); }

}  // namespace

anthropic_formatter::anthropic_formatter(const api::served_model& m, const api::parsed_request& r, const prepared_generation& g,
                                         std::string id)
    : model_(m), req_(r), gen_(g), id_(std::move(id)) {
  if (r.stream && g.output().parses()) parser_ = std::make_unique<api::output_parser>(g.output(), api::tool_call_ids(call_seed(id_)));
}

stream_event anthropic_formatter::event(const char* type, json::object o) const {
  json::object e{{"type", type}};  // "type" first, as Anthropic writes its events
  for (auto& kv : o) e[kv.key()] = std::move(kv.value());
  return {type, json::serialize(e)};
}

std::string anthropic_formatter::stop_reason(bool called) const {
  switch (acc_.reason) {
    case finish_reason::length: return "max_tokens";
    case finish_reason::stop:
      if (called) return "tool_use";
      return stop_index_ >= 0 ? "stop_sequence" : "end_turn";
    default: return "end_turn";
  }
}

stream_events anthropic_formatter::begin() {
  stream_events out;
  if (!req_.stream) return out;
  json::object msg{{"id", id_},        {"type", "message"},         {"role", "assistant"},
                   {"model", model_.name}, {"content", json::array()}, {"stop_reason", nullptr},
                   {"stop_sequence", nullptr},
                   {"usage", json::object{{"input_tokens", gen_.n_prompt_tokens()}, {"output_tokens", 0}}}};
  out.push_back(event("message_start", json::object{{"message", std::move(msg)}}));
  return out;
}

void anthropic_formatter::open_block(block b, json::object content_block, stream_events& out) {
  close_block(out);
  open_ = b;
  out.push_back(event("content_block_start", json::object{{"index", n_blocks_}, {"content_block", std::move(content_block)}}));
}

void anthropic_formatter::close_block(stream_events& out) {
  if (open_ == block::none) return;
  out.push_back(event("content_block_stop", json::object{{"index", n_blocks_}}));
  open_ = block::none;
  ++n_blocks_;
}

void anthropic_formatter::stream_output(const api::output_events& evs, stream_events& out) {
  using kind = api::output_event::kind;
  for (const auto& ev : evs) {
    switch (ev.type) {
      case kind::content:
        if (ev.text.empty()) break;
        // Whitespace between a tool call and the next is no text block of its own.
        if (open_ != block::text && gen_.tool_format && ev.text.find_first_not_of(" \t\r\n") == std::string::npos) break;
        if (open_ != block::text) open_block(block::text, json::object{{"type", "text"}, {"text", ""}}, out);
        out.push_back(event("content_block_delta",
                            json::object{{"index", n_blocks_}, {"delta", json::object{{"type", "text_delta"}, {"text", ev.text}}}}));
        break;
      case kind::reasoning_begin:
        if (req_.include_reasoning) open_block(block::thinking, json::object{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, out);
        break;
      case kind::reasoning:
        if (open_ == block::thinking) {
          out.push_back(event("content_block_delta", json::object{{"index", n_blocks_},
                                                                   {"delta", json::object{{"type", "thinking_delta"}, {"thinking", ev.text}}}}));
        }
        break;
      case kind::reasoning_end:
        if (open_ == block::thinking) close_block(out);
        break;
      case kind::call_begin:
        open_block(block::tool_use, json::object{{"type", "tool_use"}, {"id", ev.id}, {"name", ev.name}, {"input", json::object()}}, out);
        break;
      case kind::arguments:
        if (open_ == block::tool_use) {
          out.push_back(event("content_block_delta", json::object{{"index", n_blocks_},
                                                                   {"delta", json::object{{"type", "input_json_delta"}, {"partial_json", ev.text}}}}));
        }
        break;
      case kind::call_end:
        if (ev.complete) called_ = true;
        if (open_ == block::tool_use) close_block(out);
        break;
    }
  }
}

stream_events anthropic_formatter::on_event(int32_t, const engine_event& e) {
  stream_events out;
  acc_.add(e, /*keep_content=*/!req_.stream);
  if (e.type == engine_event::kind::finished) stop_index_ = e.stop_index;
  if (!req_.stream) return out;
  if (e.type == engine_event::kind::tokens) {
    api::output_events evs;
    if (parser_) {
      evs = parser_->feed(e.text);
    } else if (!e.text.empty()) {
      evs.emplace_back().text = e.text;
    }
    stream_output(evs, out);
  } else if (e.type == engine_event::kind::finished) {
    if (parser_) stream_output(parser_->finish(e.reason == finish_reason::length), out);
    close_block(out);
    json::object delta{{"stop_reason", stop_reason(called_)},
                       {"stop_sequence", stop_index_ >= 0 ? json::value(gen_.params.stop[static_cast<size_t>(stop_index_)]) : json::value(nullptr)}};
    out.push_back(event("message_delta", json::object{{"delta", std::move(delta)},
                                                      {"usage", json::object{{"output_tokens", acc_.completion_tokens}}}}));
  } else {
    out.push_back({"error", api::anthropic_error_body(500, acc_.error)});
  }
  return out;
}

stream_events anthropic_formatter::end() {
  stream_events out;
  if (req_.stream && acc_.error.empty()) out.push_back(event("message_stop", json::object{}));
  return out;
}

std::string anthropic_formatter::finish_reason_text() const {
  if (!acc_.error.empty()) return "error";
  if (!acc_.done) return "";
  if (req_.stream) return stop_reason(called_);
  api::tool_call_ids ids(call_seed(id_));
  const bool called = gen_.tool_format && !api::parse_output(gen_.output(), acc_.text, ids, acc_.reason == finish_reason::length).calls.empty();
  return stop_reason(called);
}

final_body anthropic_formatter::result() const {
  if (!acc_.error.empty()) return {false, "", acc_.error};
  json::array content;
  bool called = false;
  const api::output_format fmt = gen_.output();
  if (!fmt.parses()) {
    content.push_back(json::object{{"type", "text"}, {"text", acc_.text}});
  } else {
    api::tool_call_ids ids(call_seed(id_));
    const api::parsed_output p = api::parse_output(fmt, acc_.text, ids, acc_.reason == finish_reason::length);
    if (p.has_reasoning && req_.include_reasoning)
      content.push_back(json::object{{"type", "thinking"}, {"thinking", p.reasoning}, {"signature", ""}});
    const bool blank = p.content.find_first_not_of(" \t\r\n") == std::string::npos;
    if (!(blank && !p.calls.empty())) content.push_back(json::object{{"type", "text"}, {"text", p.content}});
    for (const auto& call : p.calls) {
      boost::system::error_code ec;
      json::value input = json::parse(call.arguments, ec);
      if (ec || !input.is_object()) input = json::object();  // a call cut off by max_tokens
      content.push_back(json::object{{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", std::move(input)}});
      called = true;
    }
  }
  json::object o{{"id", id_},
                 {"type", "message"},
                 {"role", "assistant"},
                 {"model", model_.name},
                 {"content", std::move(content)},
                 {"stop_reason", stop_reason(called && acc_.reason == finish_reason::stop)},
                 {"stop_sequence", stop_index_ >= 0 ? json::value(gen_.params.stop[static_cast<size_t>(stop_index_)]) : json::value(nullptr)},
                 {"usage", json::object{{"input_tokens", gen_.n_prompt_tokens()}, {"output_tokens", acc_.completion_tokens}}}};
  return {true, json::serialize(o), ""};
}

}  // namespace spate
