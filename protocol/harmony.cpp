// The harmony output parser (harmony.h): a marker lexer (text and whole
// markers, a partial marker held back) under a three-place machine: in a
// header, in a message's text (body), or outside any message.
#include "protocol/harmony.h"

#include <array>
#include <utility>

#include "protocol/tool_calls_detail.h"

namespace spate::api {

namespace {

constexpr std::string_view k_functions = "functions.";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_word(char c) {
  return is_alpha(c) || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == ':' || c == '=' || c == '/';
}

}  // namespace

std::optional<std::string> harmony_open_header(std::string_view prompt) {
  const size_t start = prompt.rfind(k_harmony_start);
  if (start == std::string_view::npos) return std::nullopt;
  const std::string_view tail = prompt.substr(start + k_harmony_start.size());
  const size_t msg = tail.find(k_harmony_message);
  if (msg == std::string_view::npos) return std::nullopt;
  const std::string_view text = tail.substr(msg + k_harmony_message.size());
  for (const std::string_view end : {k_harmony_end, k_harmony_call, k_harmony_return}) {
    if (text.find(end) != std::string_view::npos) return std::nullopt;
  }
  return std::string(tail.substr(0, msg));
}

harmony_header parse_harmony_header(std::string_view text, bool has_role) {
  enum class segment { role, channel, constrain } seg = segment::role;
  harmony_header h;
  bool first = true;  // the next word is the first of its segment
  size_t i = 0;
  while (i < text.size()) {
    const std::string_view rest = text.substr(i);
    if (rest.starts_with(k_harmony_channel) || rest.starts_with(k_harmony_constrain)) {
      const bool channel = rest.starts_with(k_harmony_channel);
      seg = channel ? segment::channel : segment::constrain;
      i += channel ? k_harmony_channel.size() : k_harmony_constrain.size();
      first = true;
      continue;
    }
    if (is_space(text[i])) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < text.size() && !is_space(text[j]) && !text.substr(j).starts_with(k_harmony_channel) &&
           !text.substr(j).starts_with(k_harmony_constrain))
      ++j;
    const std::string_view word = text.substr(i, j - i);
    i = j;
    const bool was_first = std::exchange(first, false);
    if (word.starts_with("to=")) {
      h.recipient = word.substr(3);
    } else if (seg == segment::role) {
      if (was_first && has_role) h.role = word;
    } else if (seg == segment::channel && was_first) {
      h.channel = word;
    } else {
      h.content_type = word;  // "<|constrain|>json", or "commentary json"
    }
  }
  if (h.recipient == "assistant") h.recipient.clear();
  return h;
}

harmony_stream::harmony_stream(harmony_options o, tool_call_ids ids) : opts_(std::move(o)), ids_(ids) {
  if (opts_.open_header) {
    header_raw_ = *opts_.open_header;
    after_start_ = true;
    open_pending_ = true;
  }
}

void harmony_stream::settle(detail::output_event_sink* out) {
  if (!std::exchange(open_pending_, false)) return;
  header_ = parse_harmony_header(header_raw_, after_start_);
  open_body(out);
}

void harmony_stream::feed(std::string_view text, detail::output_event_sink* out) {
  settle(out);
  size_t i = 0;
  while (i < text.size()) {
    if (pending_.empty()) {
      const size_t lt = text.find('<', i);
      const size_t stop = lt == std::string_view::npos ? text.size() : lt;
      if (stop > i) on_text(text.substr(i, stop - i), out);
      if (lt == std::string_view::npos) return;
      pending_ = "<";
      i = lt + 1;
      continue;
    }
    pending_ += text[i++];
    resolve_pending(out);
  }
}

// pending_ starts with '<': a whole marker, a prefix of one (kept), or text.
void harmony_stream::resolve_pending(detail::output_event_sink* out) {
  static constexpr std::array<std::pair<std::string_view, marker>, 7> k_markers{{
      {k_harmony_start, marker::start},
      {k_harmony_channel, marker::channel},
      {k_harmony_message, marker::message},
      {k_harmony_constrain, marker::constrain},
      {k_harmony_end, marker::end},
      {k_harmony_call, marker::call},
      {k_harmony_return, marker::ret},
  }};
  bool prefix = false;
  for (const auto& [text, m] : k_markers) {
    if (pending_ == text) {
      pending_.clear();
      on_marker(m, out);
      return;
    }
    prefix = prefix || text.starts_with(pending_);
  }
  if (prefix) return;
  // Not a marker: its '<' is text; a marker can only start at a later '<'.
  const std::string rest = pending_.substr(1);
  pending_.clear();
  on_text("<", out);
  feed(rest, out);
}

void harmony_stream::finish(bool cut, detail::output_event_sink* out) {
  settle(out);
  if (!cut && !pending_.empty()) on_text(std::exchange(pending_, std::string{}), out);
  pending_.clear();
  switch (place_) {
    case place::header:
      // Only the first header can still be plain text (" to" is not a recipient yet).
      if (!cut && !after_start_ && !has_marker_ && !header_raw_.starts_with(" to=") && out) out->content(header_raw_);
      break;
    case place::body: close_body(kind_ == body_kind::call && !cut, out); break;  // reasoning: ended by the output
    case place::outside: break;
  }
  place_ = place::outside;
  held_ws_.clear();
  header_raw_.clear();
}

void harmony_stream::on_text(std::string_view text, detail::output_event_sink* out) {
  switch (place_) {
    case place::header: header_text(text, out); return;
    case place::body: body_text(text, out); return;
    case place::outside: outside_text(text, out); return;
  }
}

void harmony_stream::on_marker(marker m, detail::output_event_sink* out) {
  switch (place_) {
    case place::header: on_header_marker(m, out); return;
    case place::body: on_body_marker(m, out); return;
    case place::outside: break;
  }
  held_ws_.clear();  // whitespace between messages
  if (m == marker::start) begin_header(true, "");
  else if (m == marker::channel) begin_header(false, k_harmony_channel);
  else if (m == marker::message) {
    header_ = harmony_header{};
    open_body(out);
  }
  // "<|constrain|>" or an end marker outside a message: nothing to end.
}

void harmony_stream::on_header_marker(marker m, detail::output_event_sink* out) {
  switch (m) {
    case marker::channel:
    case marker::constrain:
      header_raw_ += m == marker::channel ? k_harmony_channel : k_harmony_constrain;
      has_marker_ = true;
      return;
    case marker::message:
      header_ = parse_harmony_header(header_raw_, after_start_);
      open_body(out);
      return;
    case marker::start: begin_header(true, ""); return;  // the header so far was structure: dropped
    default: place_ = place::outside; return;             // an empty message: nothing to emit
  }
}

void harmony_stream::on_body_marker(marker m, detail::output_event_sink* out) {
  switch (m) {
    case marker::message: body_text(k_harmony_message, out); return;
    case marker::constrain: body_text(k_harmony_constrain, out); return;
    case marker::start:
      close_body(true, out);
      begin_header(true, "");
      return;
    case marker::channel:
      close_body(true, out);
      begin_header(false, k_harmony_channel);
      return;
    default:
      close_body(true, out);
      place_ = place::outside;
      return;
  }
}

bool harmony_stream::header_byte_ok(char c) const {
  if (!is_word(c) && c != ' ') return false;
  if (after_start_) return !header_raw_.empty() || is_alpha(c);  // the role comes first
  if (has_marker_) return true;
  // The output's first header: only " to=RECIPIENT" before its first marker.
  constexpr std::string_view to = " to=";
  const size_t n = header_raw_.size();
  return n < to.size() ? c == to[n] : true;
}

void harmony_stream::header_text(std::string_view text, detail::output_event_sink* out) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (!header_byte_ok(text[i]) || header_raw_.size() >= k_max_harmony_header) {
      // Not a header after all: what it held is content, and so is the rest.
      if (out) out->content(header_raw_);
      header_raw_.clear();
      place_ = place::outside;
      outside_text(text.substr(i), out);
      return;
    }
    header_raw_ += text[i];
  }
}

void harmony_stream::body_text(std::string_view text, detail::output_event_sink* out) {
  if (!out) return;
  switch (kind_) {
    case body_kind::content: out->content(text); return;
    case body_kind::reasoning: out->reasoning(text); return;
    case body_kind::dropped: return;
    case body_kind::call: break;
  }
  // Arguments without the whitespace around them: leading dropped, trailing held.
  if (!args_started_) {
    size_t k = 0;
    while (k < text.size() && is_space(text[k])) ++k;
    text.remove_prefix(k);
    if (text.empty()) return;
    args_started_ = true;
  }
  size_t last = text.size();
  while (last > 0 && is_space(text[last - 1])) --last;
  if (last == 0) {
    held_ws_.append(text);
    return;
  }
  out->arguments(call_index_, held_ws_);
  out->arguments(call_index_, text.substr(0, last));
  held_ws_.assign(text.substr(last));
}

void harmony_stream::outside_text(std::string_view text, detail::output_event_sink* out) {
  size_t last = text.size();
  while (last > 0 && is_space(text[last - 1])) --last;
  if (last == 0) {
    held_ws_.append(text);
    return;
  }
  if (out) {
    out->content(held_ws_);
    out->content(text.substr(0, last));
  }
  held_ws_.assign(text.substr(last));
}

void harmony_stream::begin_header(bool after_start, std::string_view first_marker) {
  place_ = place::header;
  after_start_ = after_start;
  header_raw_.assign(first_marker);
  has_marker_ = !first_marker.empty();
}

void harmony_stream::open_body(detail::output_event_sink* out) {
  const harmony_header& h = header_;
  place_ = place::body;
  ++n_messages_;
  header_raw_.clear();
  held_ws_.clear();
  if (!h.role.empty() && h.role != "assistant") {
    kind_ = body_kind::dropped;
  } else if (!h.recipient.empty()) {
    const bool call = opts_.calls && h.recipient.starts_with(k_functions) && h.recipient.size() > k_functions.size();
    kind_ = call ? body_kind::call : body_kind::dropped;
  } else if (h.channel == "analysis") {
    kind_ = opts_.reasoning ? body_kind::reasoning : body_kind::dropped;
  } else {
    kind_ = body_kind::content;
  }
  if (kind_ == body_kind::reasoning && out) out->reasoning_begin();
  if (kind_ == body_kind::call) {
    call_index_ = n_calls_++;
    args_started_ = false;
    std::string id = ids_.next();
    if (out) out->begin(call_index_, std::move(id), h.recipient.substr(k_functions.size()));
  }
}

// complete: ended by a marker (else by the end of the output).
void harmony_stream::close_body(bool complete, detail::output_event_sink* out) {
  place_ = place::outside;
  held_ws_.clear();  // after call arguments: dropped
  if (!out) return;
  if (kind_ == body_kind::reasoning) out->reasoning_end(complete);
  if (kind_ == body_kind::call) out->end(call_index_, complete);
}

}  // namespace spate::api
