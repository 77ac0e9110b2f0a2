#include "protocol/output_parser.h"

#include <utility>

#include "protocol/tool_calls_detail.h"

namespace spate::api {

// Stage 1 (splitter or harmony) writes into sink_; its content goes through
// stage 2 (tools) when there is one.
struct output_parser::impl {
  impl(const output_format& f, tool_call_ids ids) {
    if (f.harmony) {
      harmony_options o = *f.harmony;
      o.calls = f.tools == tool_call_format::openai;
      if (f.tools && !o.calls) tools.emplace(*f.tools, ids);  // another format: its calls are in the content
      harmony.emplace(std::move(o), ids);
    } else {
      if (f.reasoning) splitter.emplace(*f.reasoning);
      if (f.tools) tools.emplace(*f.tools, ids);
    }
  }

  std::optional<reasoning_splitter> splitter;
  std::optional<harmony_stream> harmony;
  std::optional<tool_call_stream> tools;
  detail::output_event_sink sink;
  bool announced = false;       // splitter: reasoning_begin was emitted
  bool reasoning_open = false;  // splitter: ... and no reasoning_end yet
  bool finished = false;

  // The splitter's output as events: the part opens once the splitter has
  // reasoning, and closes when it reaches the content (or at the end).
  void split(const reasoning_split& s, bool end) {
    if (!announced && splitter->has_reasoning()) {
      announced = reasoning_open = true;
      sink.reasoning_begin();
    }
    sink.reasoning(s.reasoning);
    const bool closed = splitter->current() == reasoning_splitter::state::content;
    if (reasoning_open && (closed || end)) {
      reasoning_open = false;
      sink.reasoning_end(closed);
    }
    sink.content(s.content);
  }

  void stage_one(std::string_view text) {
    if (harmony) {
      harmony->feed(text, &sink);
    } else if (splitter) {
      reasoning_split s;
      splitter->feed(text, &s);
      split(s, false);
    } else {
      sink.content(text);
    }
  }

  void stage_one_end(bool cut) {
    if (harmony) {
      harmony->finish(cut, &sink);
    } else if (splitter) {
      reasoning_split s;
      splitter->finish(&s);
      split(s, true);
    }
  }

  // Stage 2: content through the tool-call parser.
  output_events route(output_events events, bool end, bool cut) {
    if (!tools) return events;
    output_events out;
    const auto add = [&out](output_events more) {
      for (auto& e : more) out.push_back(std::move(e));
    };
    for (auto& e : events) {
      if (e.type == output_event::kind::content) add(tools->feed(e.text));
      else out.push_back(std::move(e));
    }
    if (end) add(tools->finish(cut));
    return out;
  }
};

output_parser::output_parser(const output_format& f, tool_call_ids ids) : impl_(std::make_unique<impl>(f, ids)) {}
output_parser::~output_parser() = default;
output_parser::output_parser(output_parser&&) noexcept = default;
output_parser& output_parser::operator=(output_parser&&) noexcept = default;

output_events output_parser::feed(std::string_view text) {
  if (impl_->finished) return {};
  impl_->stage_one(text);
  return impl_->route(impl_->sink.take(false), false, false);
}

output_events output_parser::finish(bool cut) {
  if (std::exchange(impl_->finished, true)) return {};
  impl_->stage_one_end(cut);
  return impl_->route(impl_->sink.take(true), true, cut);
}

bool output_parser::in_reasoning() const {
  if (impl_->harmony) return impl_->harmony->in_reasoning();
  return impl_->reasoning_open;
}

parsed_output parse_output(const output_format& f, std::string_view text, tool_call_ids& ids, bool cut) {
  output_parser p(f, ids);
  output_events events = p.feed(text);
  for (auto& e : p.finish(cut)) events.push_back(std::move(e));
  parsed_output out;
  tool_call current;
  int32_t n_calls = 0;
  for (auto& e : events) {
    switch (e.type) {
      case output_event::kind::content: out.content += e.text; break;
      case output_event::kind::reasoning_begin: out.has_reasoning = true; break;
      case output_event::kind::reasoning: out.reasoning += e.text; break;
      case output_event::kind::reasoning_end: break;
      case output_event::kind::call_begin:
        current = tool_call{std::move(e.id), std::move(e.name), {}};
        ++n_calls;
        break;
      case output_event::kind::arguments: current.arguments += e.text; break;
      case output_event::kind::call_end:
        current.complete = e.complete;
        if (e.complete || cut) out.calls.push_back(std::move(current));
        current = tool_call{};
        break;
    }
  }
  for (int32_t i = 0; i < n_calls; ++i) ids.next();  // the parser drew the same ids from its copy
  return out;
}

}  // namespace spate::api
