// The tool-call stream parser (tool_call_stream, see tool_calls.h): one byte
// at a time through a state machine, so that the outcome cannot depend on how
// the text was split. parse_tool_calls() is this machine run over the whole
// text.
//
// raw_ holds the structural text consumed since the last commit (the end of a
// complete call, or the start of a generic "response" string). When the text
// stops fitting the format, fail() ends the open call (complete = false) and
// turns raw_ into content; for the marker formats (hermes, mistral) the part
// of raw_ after the opening marker is scanned again, so a marker inside a
// broken call still counts.
#include <string_view>
#include <utility>

#include "protocol/tool_calls.h"
#include "protocol/tool_calls_detail.h"

namespace spate::api {

using detail::is_json_ws;
using detail::json_string_decoder;
using detail::json_value_scanner;

namespace {

constexpr size_t k_max_key = 64;
constexpr size_t k_max_name = 256;
constexpr size_t k_max_rescan = 4096;  // longer broken text becomes content as is

std::string_view marker_of(tool_call_format f) {
  switch (f) {
    case tool_call_format::hermes: return "<tool_call>";
    case tool_call_format::mistral: return "[TOOL_CALLS]";
    default: return "";
  }
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == ':';
}

}  // namespace

struct tool_call_stream::impl {
  // Top-level states; see step().
  enum class st {
    scan, plain, start, lit, call, tail, h_after, l_after, m_open, m_name, m_args,
    list_first, list_item, list_next, g_key_open, g_key, g_colon, g_value, g_response, g_response_json, g_close,
  };
  // States inside a call object {"name": ..., "arguments": ...}.
  enum class cs { open, key_first, key_next, key, colon, value, name, args_json, args_str, skip, after_pair, buffered };

  impl(tool_call_format f, tool_call_ids ids)
      : fmt_(f), ids_(ids), marker_(marker_of(f)), scan_formats_(!marker_.empty()) {
    st_ = scan_formats_ ? st::scan : st::start;
  }

  tool_call_format fmt_;
  tool_call_ids ids_;
  std::string_view marker_;
  bool scan_formats_;

  detail::output_event_sink sink_;
  detail::repeated_call_filter repeats_;  // on the sink's events

  // Input and the top-level machine.
  std::string input_;
  size_t pos_ = 0;
  std::string rescan_;  // set by fail(): text to process again before the current byte
  st st_;
  st after_call_ = st::tail;  // where a complete call object leads
  st lit_next_ = st::tail;
  const char* lit_ = "";
  std::string raw_;
  std::string hold_;  // scan: a partial marker
  bool finished_ = false;

  // The current call object.
  cs cs_ = cs::open;
  std::string key_, name_;
  size_t obj_start_ = 0;  // where the object's '{' is in raw_
  bool name_seen_ = false, args_seen_ = false, bare_ = false, call_open_ = false;
  int32_t next_index_ = 0, index_ = -1;
  json_string_decoder dec_;
  json_value_scanner val_;
  std::string tmp_;

  // ---- output ----
  void content(std::string_view text) { sink_.content(text); }
  void arguments(std::string_view text) { sink_.arguments(index_, text); }
  void begin_call() {
    index_ = next_index_++;
    sink_.begin(index_, ids_.next(), name_);
    call_open_ = true;
  }
  void end_call(bool complete) {
    sink_.end(index_, complete);
    call_open_ = false;
  }

  // ---- driving ----
  void run(std::string_view text) {
    input_.assign(text);
    pos_ = 0;
    while (pos_ < input_.size()) {
      const char c = input_[pos_];
      if (step(c)) {
        ++pos_;
        if (raw_.size() > k_max_call_bytes) fail();
      }
      if (!rescan_.empty()) {
        input_.insert(pos_, rescan_);
        rescan_.clear();
      }
    }
    input_.clear();
    pos_ = 0;
  }

  // The text stopped fitting the format: see the file comment.
  void fail() {
    if (call_open_) end_call(false);
    std::string text = std::move(raw_);
    raw_.clear();
    reset_call();
    if (!scan_formats_) {
      st_ = st::plain;
      content(text);
      return;
    }
    st_ = st::scan;
    if (text.size() > k_max_rescan) {
      content(text);
      return;
    }
    const size_t skip = std::string_view(text).starts_with(marker_) ? marker_.size() : 0;
    content(std::string_view(text).substr(0, skip));
    rescan_ = text.substr(skip) + rescan_;
  }

  void finish(bool cut) {
    if (cut) {
      // Cut by the length limit: what is held is call syntax (a marker, a
      // list, a call, the generic wrapper), never the model's text, so it is
      // dropped instead of becoming content; an open call ends incomplete.
      if (call_open_) end_call(false);
      raw_.clear();
      reset_call();
      if (hold_.size() > 1) hold_.clear();  // a partial marker
    }
    // A broken tail can hold further markers: fail and rescan until settled.
    while (call_open_ || !raw_.empty()) {
      fail();
      run(std::exchange(rescan_, std::string{}));
    }
    content(hold_);
    hold_.clear();
  }

  void reset_call() {
    cs_ = cs::open;
    key_.clear();
    name_.clear();
    name_seen_ = args_seen_ = bare_ = false;
  }
  void enter_call(st after) {
    reset_call();
    st_ = st::call;
    after_call_ = after;
  }
  void go_tail() {
    raw_.clear();
    st_ = st::tail;
  }
  st rest_state() const { return scan_formats_ ? st::scan : st::plain; }
  void start_lit(const char* lit, st next) {
    lit_ = lit;
    lit_next_ = next;
    st_ = st::lit;
  }
  // Consumes c as structure (whitespace allowed) or fails.
  bool ws_raw(char c) {
    if (!is_json_ws(c)) return false;
    raw_ += c;
    return true;
  }

  bool step(char c);
  bool step_scan(char c);
  bool step_structure(char c);
  bool step_mistral(char c);
  bool step_list(char c);
  bool step_generic(char c);
  bool step_call(char c);
  bool call_value(char c);
  bool call_args(char c);
  bool object_end();
  bool start_buffered();
  bool end_buffered();
  bool complete_call();
};

// Returns whether c was consumed; when not, the state changed and c is
// processed again.
bool tool_call_stream::impl::step(char c) {
  switch (st_) {
    case st::scan: return step_scan(c);
    case st::plain: content(std::string_view(&c, 1)); return true;
    case st::call: return step_call(c);
    case st::lit:
      if (c != *lit_) {
        fail();
        return false;
      }
      raw_ += c;
      if (*++lit_ == 0) {
        if (lit_next_ == st::tail) go_tail();
        else st_ = lit_next_;
      }
      return true;
    case st::tail:
      if (is_json_ws(c)) return true;
      raw_.clear();
      st_ = rest_state();
      return false;
    case st::g_key_open:
    case st::g_key:
    case st::g_colon:
    case st::g_value:
    case st::g_response:
    case st::g_response_json:
    case st::g_close: return step_generic(c);
    case st::m_open:
    case st::m_name:
    case st::m_args: return step_mistral(c);
    case st::list_first:
    case st::list_item:
    case st::list_next: return step_list(c);
    default: return step_structure(c);
  }
}

bool tool_call_stream::impl::step_scan(char c) {
  hold_ += c;
  if (hold_ == marker_) {
    raw_ = std::move(hold_);
    hold_.clear();
    if (fmt_ == tool_call_format::hermes) enter_call(st::h_after);
    else st_ = st::m_open;
    return true;
  }
  size_t k = 0;
  while (k < hold_.size() && !marker_.starts_with(std::string_view(hold_).substr(k))) ++k;
  content(std::string_view(hold_).substr(0, k));
  hold_.erase(0, k);
  return true;
}

// What starts llama3 and generic outputs, and what follows hermes' and
// llama3's calls.
bool tool_call_stream::impl::step_structure(char c) {
  switch (st_) {
    case st::start:
      if (ws_raw(c)) return true;
      if (fmt_ == tool_call_format::generic && c == '{') {
        raw_ += c;
        st_ = st::g_key_open;
        return true;
      }
      if (fmt_ == tool_call_format::llama3_json && (c == '{' || c == '<')) {
        after_call_ = st::l_after;
        if (c == '<') start_lit("<|python_tag|>", st::list_item);
        else st_ = st::list_item;
        return false;
      }
      break;
    case st::h_after:
      if (is_json_ws(c)) return true;
      if (c == '<') {
        start_lit("</tool_call>", st::tail);
        return false;
      }
      st_ = st::scan;
      return false;
    case st::l_after:
      if (is_json_ws(c)) return true;
      if (c == ';') {
        raw_ += c;
        st_ = st::list_item;
        return true;
      }
      break;
    default: break;
  }
  fail();
  return false;
}

// Mistral after "[TOOL_CALLS]": a list of call objects, or name[ARGS]{...}.
bool tool_call_stream::impl::step_mistral(char c) {
  switch (st_) {
    case st::m_open:
      if (ws_raw(c)) return true;
      if (c == '[') {
        raw_ += c;
        st_ = st::list_first;
        after_call_ = st::list_next;
        return true;
      }
      if (is_name_char(c)) {
        reset_call();
        st_ = st::m_name;
        return false;
      }
      break;
    case st::m_name:
      if (is_name_char(c) && name_.size() < k_max_name) {
        raw_ += c;
        name_ += c;
        return true;
      }
      if (c == '[' && !name_.empty()) {
        start_lit("[ARGS]", st::m_args);
        return false;
      }
      break;
    case st::m_args:
      if (ws_raw(c)) return true;
      if (c != '{' && c != '"') break;
      // The call object's arguments states, without the object around them.
      st_ = st::call;
      cs_ = cs::value;
      key_ = "arguments";
      name_seen_ = bare_ = true;
      after_call_ = st::tail;
      return false;
    default: break;
  }
  fail();
  return false;
}

// Lists of call objects: mistral's and generic's [...], llama3's ';'.
bool tool_call_stream::impl::step_list(char c) {
  switch (st_) {
    case st::list_first:
    case st::list_item:
      if (ws_raw(c)) return true;
      if (c == ']' && st_ == st::list_first) {
        raw_ += c;
        if (fmt_ == tool_call_format::generic) st_ = st::g_close;
        else go_tail();
        return true;
      }
      if (c != '{') break;
      enter_call(fmt_ == tool_call_format::llama3_json ? st::l_after : st::list_next);
      return false;
    case st::list_next:
      if (is_json_ws(c)) return true;
      if (c == ',') {
        raw_ += c;
        st_ = st::list_item;
        return true;
      }
      if (c == ']') {
        raw_ += c;
        if (fmt_ == tool_call_format::generic) st_ = st::g_close;
        else go_tail();
        return true;
      }
      break;
    default: break;
  }
  fail();
  return false;
}

// The generic format's outer object: {"tool_calls": [...]}, {"tool_call":
// {...}} or {"response": "..."}.
bool tool_call_stream::impl::step_generic(char c) {
  switch (st_) {
    case st::g_key_open:
      if (ws_raw(c)) return true;
      if (c != '"') break;
      raw_ += c;
      key_.clear();
      dec_.reset();
      st_ = st::g_key;
      return true;
    case st::g_key: {
      const auto s = dec_.feed(c, key_);
      if (s == json_string_decoder::status::error || key_.size() > k_max_key) break;
      raw_ += c;
      if (s == json_string_decoder::status::done) st_ = st::g_colon;
      return true;
    }
    case st::g_colon:
      if (ws_raw(c)) return true;
      if (c != ':') break;
      raw_ += c;
      st_ = st::g_value;
      return true;
    case st::g_value:
      if (ws_raw(c)) return true;
      if (key_ == "tool_calls" && c == '[') {
        raw_ += c;
        st_ = st::list_first;
        after_call_ = st::list_next;
        return true;
      }
      if (key_ == "tool_call" && c == '{') {
        enter_call(st::g_close);
        return false;
      }
      if (key_ == "response" && c == '"') {
        raw_.clear();  // committed: the string is the content
        dec_.reset();
        st_ = st::g_response;
        return true;
      }
      if (key_ == "response") {
        raw_.clear();  // committed: the value, as written, is the content (a response format's JSON)
        val_.reset();
        st_ = st::g_response_json;
        return false;
      }
      break;
    case st::g_response_json: {
      const auto s = val_.feed(c);
      if (s == json_value_scanner::status::error) {
        st_ = st::plain;  // the rest is content too
        return false;
      }
      if (s == json_value_scanner::status::done_unconsumed) {
        st_ = st::g_close;
        return false;
      }
      content(std::string_view(&c, 1));
      if (s == json_value_scanner::status::done) st_ = st::g_close;
      return true;
    }
    case st::g_response: {
      tmp_.clear();
      const auto s = dec_.feed(c, tmp_);
      if (s == json_string_decoder::status::error) break;
      content(tmp_);
      if (s == json_string_decoder::status::done) st_ = st::g_close;
      return true;
    }
    case st::g_close:
      if (is_json_ws(c)) return true;
      if (c != '}') break;
      go_tail();
      return true;
    default: break;
  }
  fail();
  return false;
}

bool tool_call_stream::impl::step_call(char c) {
  switch (cs_) {
    case cs::open:
      if (ws_raw(c)) return true;
      if (c != '{') break;
      obj_start_ = raw_.size();
      raw_ += c;
      cs_ = cs::key_first;
      return true;
    case cs::key_first:
    case cs::key_next:
      if (ws_raw(c)) return true;
      if (c == '}' && cs_ == cs::key_first) {
        raw_ += c;
        return object_end();
      }
      if (c != '"') break;
      raw_ += c;
      key_.clear();
      dec_.reset();
      cs_ = cs::key;
      return true;
    case cs::key: {
      const auto s = dec_.feed(c, key_);
      if (s == json_string_decoder::status::error || key_.size() > k_max_key) break;
      raw_ += c;
      if (s == json_string_decoder::status::done) cs_ = cs::colon;
      return true;
    }
    case cs::colon:
      if (ws_raw(c)) return true;
      if (c != ':') break;
      raw_ += c;
      cs_ = cs::value;
      return true;
    case cs::value:
      if (ws_raw(c)) return true;
      return call_value(c);
    case cs::name: {
      const auto s = dec_.feed(c, name_);
      if (s == json_string_decoder::status::error || name_.size() > k_max_name) break;
      raw_ += c;
      if (s == json_string_decoder::status::done) {
        name_seen_ = true;
        cs_ = cs::after_pair;
      }
      return true;
    }
    case cs::args_json:
    case cs::args_str: return call_args(c);
    case cs::buffered: {
      const auto s = val_.feed(c);
      if (s == json_value_scanner::status::error) break;
      raw_ += c;
      if (s == json_value_scanner::status::done) return end_buffered();
      return true;
    }
    case cs::skip: {
      const auto s = val_.feed(c);
      if (s == json_value_scanner::status::error) break;
      if (s == json_value_scanner::status::done_unconsumed) {
        cs_ = cs::after_pair;
        return false;
      }
      raw_ += c;
      if (s == json_value_scanner::status::done) cs_ = cs::after_pair;
      return true;
    }
    case cs::after_pair:
      if (ws_raw(c)) return true;
      if (c == ',') {
        raw_ += c;
        cs_ = cs::key_next;
        return true;
      }
      if (c != '}') break;
      raw_ += c;
      return object_end();
  }
  fail();
  return false;
}

// The first byte of a member's value in a call object.
bool tool_call_stream::impl::call_value(char c) {
  if (key_ == "name") {
    if (name_seen_ || args_seen_ || c != '"') {
      fail();
      return false;
    }
    raw_ += c;
    dec_.reset();
    name_.clear();
    cs_ = cs::name;
    return true;
  }
  if (key_ == "arguments" || key_ == "parameters") {
    if (!name_seen_ && !args_seen_ && !bare_) return start_buffered();
    if (!name_seen_ || args_seen_ || (c != '{' && c != '"')) {
      fail();
      return false;
    }
    raw_ += c;
    begin_call();
    if (c == '"') {
      dec_.reset();
      cs_ = cs::args_str;
      return true;
    }
    val_.reset();
    val_.feed(c);
    arguments(std::string_view(&c, 1));
    cs_ = cs::args_json;
    return true;
  }
  if (key_ == "id" || key_ == "type") {
    val_.reset();
    const auto s = val_.feed(c);
    if (s == json_value_scanner::status::error) {
      fail();
      return false;
    }
    raw_ += c;
    cs_ = s == json_value_scanner::status::done ? cs::after_pair : cs::skip;
    return true;
  }
  fail();
  return false;
}

// A byte of the arguments value: streamed as is (an object) or decoded (a
// string holding JSON).
bool tool_call_stream::impl::call_args(char c) {
  bool done = false;
  if (cs_ == cs::args_str) {
    tmp_.clear();
    const auto s = dec_.feed(c, tmp_);
    if (s == json_string_decoder::status::error) {
      fail();
      return false;
    }
    raw_ += c;
    arguments(tmp_);
    done = s == json_string_decoder::status::done;
  } else {
    const auto s = val_.feed(c);
    if (s == json_value_scanner::status::error) {
      fail();
      return false;
    }
    raw_ += c;
    arguments(std::string_view(&c, 1));
    done = s == json_value_scanner::status::done;
  }
  if (!done) return true;
  args_seen_ = true;
  if (bare_) return complete_call();
  cs_ = cs::after_pair;
  return true;
}

// The arguments come before the name: the object cannot stream; it is
// checked to its end and then parsed whole. The current byte (the value's
// first) is processed again in the buffered state.
bool tool_call_stream::impl::start_buffered() {
  val_.reset();
  for (size_t i = obj_start_; i < raw_.size(); ++i)
    if (val_.feed(raw_[i]) != json_value_scanner::status::more) {
      fail();
      return false;
    }
  cs_ = cs::buffered;
  return false;
}

// The buffered object's last byte was consumed: a call if it has the shape.
bool tool_call_stream::impl::end_buffered() {
  boost::json::parse_options opt;
  opt.max_depth = json_value_scanner::k_max_depth + 2;
  boost::system::error_code ec;
  const auto v = boost::json::parse(std::string_view(raw_).substr(obj_start_), ec, {}, opt);
  const auto* obj = ec ? nullptr : v.if_object();
  const boost::json::value* name = nullptr;
  const boost::json::value* args = nullptr;
  bool ok = obj != nullptr;
  static const boost::json::object k_none;
  for (const auto& kv : obj ? *obj : k_none) {
    if (kv.key() == "name" && kv.value().is_string() && !name) name = &kv.value();
    else if ((kv.key() == "arguments" || kv.key() == "parameters") && !args) args = &kv.value();
    else if (kv.key() != "id" && kv.key() != "type") ok = false;
  }
  if (!ok || !name || !args || (!args->is_object() && !args->is_string())) {
    fail();
    return true;
  }
  name_ = name->get_string();
  begin_call();
  arguments(args->is_string() ? std::string(args->get_string()) : boost::json::serialize(*args));
  return complete_call();
}

// The call object's closing '}' was consumed.
bool tool_call_stream::impl::object_end() {
  if (!name_seen_ || (!args_seen_ && fmt_ == tool_call_format::llama3_json)) {
    fail();
    return true;
  }
  if (!args_seen_) {
    begin_call();
    arguments("{}");
  }
  return complete_call();
}

bool tool_call_stream::impl::complete_call() {
  end_call(true);
  raw_.clear();
  const st next = after_call_;
  reset_call();
  if (next == st::tail) go_tail();
  else st_ = next;
  return true;
}

tool_call_stream::tool_call_stream(tool_call_format f, uint64_t id_seed)
    : impl_(std::make_unique<impl>(f, tool_call_ids(id_seed))) {}
tool_call_stream::tool_call_stream(tool_call_format f, tool_call_ids ids) : impl_(std::make_unique<impl>(f, ids)) {}
tool_call_stream::~tool_call_stream() = default;
tool_call_stream::tool_call_stream(tool_call_stream&&) noexcept = default;
tool_call_stream& tool_call_stream::operator=(tool_call_stream&&) noexcept = default;

tool_stream_events tool_call_stream::feed(std::string_view delta) {
  if (impl_->finished_) return {};
  impl_->run(delta);
  return impl_->repeats_.filter(impl_->sink_.take(false));
}

tool_stream_events tool_call_stream::finish(bool cut) {
  if (impl_->finished_) return {};
  impl_->finished_ = true;
  impl_->finish(cut);
  return impl_->repeats_.filter(impl_->sink_.take(true));
}

const tool_call_ids& tool_call_stream::ids() const { return impl_->ids_; }

}  // namespace spate::api
