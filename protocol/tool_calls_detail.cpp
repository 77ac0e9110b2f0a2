// Byte-at-a-time JSON string decoding and value checking, and the event
// collector, for the tool-call stream parser (see tool_calls_detail.h).
#include "protocol/tool_calls_detail.h"

#include "util/hex.h"
#include "util/utf8.h"

#include <utility>

namespace spate::api::detail {
namespace {

constexpr auto hex_value = hex_digit_value;

char unescape(char c) {
  switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return 0;
  }
}

}  // namespace

json_string_decoder::status json_string_decoder::feed(char c, std::string& out) {
  switch (st_) {
    case st::normal:
      if (c == '"') return status::done;
      if (c == '\\') {
        st_ = st::escape;
        return status::more;
      }
      if (static_cast<unsigned char>(c) < 0x20) return status::error;
      out += c;
      return status::more;
    case st::escape:
      if (c == 'u') {
        st_ = st::hex;
        hex_left_ = 4;
        code_ = 0;
        return status::more;
      }
      if (char u = unescape(c)) {
        out += u;
        st_ = st::normal;
        return status::more;
      }
      return status::error;
    case st::hex: return feed_hex(c, out);
    case st::want_backslash:
      if (c != '\\') return status::error;
      st_ = st::want_u;
      return status::more;
    case st::want_u:
      if (c != 'u') return status::error;
      st_ = st::hex;
      hex_left_ = 4;
      code_ = 0;
      return status::more;
  }
  return status::error;
}

json_string_decoder::status json_string_decoder::feed_hex(char c, std::string& out) {
  const int v = hex_value(c);
  if (v < 0) return status::error;
  code_ = code_ * 16 + static_cast<uint32_t>(v);
  if (--hex_left_ > 0) return status::more;
  const bool low = code_ >= 0xDC00 && code_ <= 0xDFFF;
  if (high_) {
    if (!low) return status::error;
    utf8::append(out, 0x10000 + ((high_ - 0xD800) << 10) + (code_ - 0xDC00));
    high_ = 0;
    st_ = st::normal;
    return status::more;
  }
  if (low) return status::error;
  if (code_ >= 0xD800 && code_ <= 0xDBFF) {
    high_ = code_;
    st_ = st::want_backslash;
    return status::more;
  }
  utf8::append(out, code_);
  st_ = st::normal;
  return status::more;
}

json_value_scanner::status json_value_scanner::value_start(char c) {
  switch (c) {
    case '{':
    case '[':
      if (stack_.size() >= k_max_depth) return status::error;
      stack_.push_back(c);
      st_ = c == '{' ? st::obj_first : st::arr_first;
      return status::more;
    case '"':
      st_ = st::string;
      in_key_ = false;
      esc_ = 0;
      return status::more;
    case 't': lit_ = "rue"; st_ = st::literal; return status::more;
    case 'f': lit_ = "alse"; st_ = st::literal; return status::more;
    case 'n': lit_ = "ull"; st_ = st::literal; return status::more;
    default:
      if (c == '-' || (c >= '0' && c <= '9')) {
        st_ = st::number;
        num_ = c == '-' ? 0 : c == '0' ? 1 : 2;
        return status::more;
      }
      return status::error;
  }
}

// A value just ended (its last byte consumed).
json_value_scanner::status json_value_scanner::value_end() {
  if (stack_.empty()) return status::done;
  st_ = st::after;
  return status::more;
}

json_value_scanner::status json_value_scanner::feed_string(char c) {
  if (esc_ == 1) {
    if (c == 'u') {
      esc_ = 5;
      return status::more;
    }
    if (!unescape(c)) return status::error;
    esc_ = 0;
    return status::more;
  }
  if (esc_ > 1) {
    if (hex_value(c) < 0) return status::error;
    esc_ = esc_ == 2 ? 0 : esc_ - 1;
    return status::more;
  }
  if (c == '\\') {
    esc_ = 1;
    return status::more;
  }
  if (static_cast<unsigned char>(c) < 0x20) return status::error;
  if (c != '"') return status::more;
  if (in_key_) {
    st_ = st::colon;
    return status::more;
  }
  return value_end();
}

// num_: 0 after '-', 1 after a leading '0', 2 integer digits, 3 after '.',
// 4 fraction digits, 5 after 'e', 6 after the exponent's sign, 7 exponent
// digits. Accepting: 1, 2, 4, 7.
json_value_scanner::status json_value_scanner::feed_number(char c) {
  const bool digit = c >= '0' && c <= '9';
  switch (num_) {
    case 0: if (digit) { num_ = c == '0' ? 1 : 2; return status::more; } return status::error;
    case 1:
    case 2:
      if (digit && num_ == 2) return status::more;
      if (c == '.') { num_ = 3; return status::more; }
      if (c == 'e' || c == 'E') { num_ = 5; return status::more; }
      break;
    case 3: if (digit) { num_ = 4; return status::more; } return status::error;
    case 4:
      if (digit) return status::more;
      if (c == 'e' || c == 'E') { num_ = 5; return status::more; }
      break;
    case 5:
      if (c == '+' || c == '-') { num_ = 6; return status::more; }
      [[fallthrough]];
    case 6: if (digit) { num_ = 7; return status::more; } return status::error;
    case 7: if (digit) return status::more; break;
    default: return status::error;
  }
  // The number ended before c.
  if (stack_.empty()) return status::done_unconsumed;
  st_ = st::after;
  return feed(c);
}

json_value_scanner::status json_value_scanner::feed(char c) {
  switch (st_) {
    case st::value:
      if (is_json_ws(c) && !stack_.empty()) return status::more;
      return value_start(c);
    case st::obj_first:
    case st::obj_key:
      if (is_json_ws(c)) return status::more;
      if (c == '"') {
        st_ = st::string;
        in_key_ = true;
        esc_ = 0;
        return status::more;
      }
      if (c == '}' && st_ == st::obj_first) {
        stack_.pop_back();
        return value_end();
      }
      return status::error;
    case st::colon:
      if (is_json_ws(c)) return status::more;
      if (c != ':') return status::error;
      st_ = st::value;
      return status::more;
    case st::arr_first:
      if (is_json_ws(c)) return status::more;
      if (c == ']') {
        stack_.pop_back();
        return value_end();
      }
      return value_start(c);
    case st::after:
      if (is_json_ws(c)) return status::more;
      if (c == ',') {
        st_ = stack_.back() == '{' ? st::obj_key : st::value;
        return status::more;
      }
      if ((c == '}' && stack_.back() == '{') || (c == ']' && stack_.back() == '[')) {
        stack_.pop_back();
        return value_end();
      }
      return status::error;
    case st::string: return feed_string(c);
    case st::number: return feed_number(c);
    case st::literal:
      if (c != *lit_) return status::error;
      if (*++lit_ == 0) return value_end();
      return status::more;
  }
  return status::error;
}

size_t incomplete_utf8_tail(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto b = static_cast<unsigned char>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: look further back
    size_t need = 0;
    if (b >= 0xC2 && b <= 0xDF) need = 2;
    else if (b >= 0xE0 && b <= 0xEF) need = 3;
    else if (b >= 0xF0 && b <= 0xF4) need = 4;
    return need > back ? back : 0;
  }
  return 0;
}

void output_event_sink::append(kind k, int32_t index, std::string_view text) {
  if (!out_.empty() && out_.back().type == k && out_.back().index == index) {
    out_.back().text += text;
    return;
  }
  output_event e;
  e.type = k;
  e.index = index;
  e.text = text;
  out_.push_back(std::move(e));
}

void output_event_sink::flush_carry() {
  if (carry_.empty()) return;
  std::string c = std::move(carry_);
  carry_.clear();
  append(carry_kind_, carry_index_, c);
}

void output_event_sink::text(kind k, int32_t index, std::string_view text) {
  if (text.empty()) return;
  flush_carry();
  append(k, index, text);
}

void output_event_sink::content(std::string_view t) { text(kind::content, -1, t); }

void output_event_sink::arguments(int32_t index, std::string_view t) { text(kind::arguments, index, t); }

void output_event_sink::push(kind k, int32_t index, bool complete) {
  flush_carry();
  output_event e;
  e.type = k;
  e.index = index;
  e.complete = complete;
  out_.push_back(std::move(e));
}

void output_event_sink::begin(int32_t index, std::string id, std::string name) {
  push(kind::call_begin, index);
  out_.back().id = std::move(id);
  out_.back().name = std::move(name);
}

void output_event_sink::end(int32_t index, bool complete) { push(kind::call_end, index, complete); }

void output_event_sink::reasoning_begin() { push(kind::reasoning_begin); }

void output_event_sink::reasoning(std::string_view t) { text(kind::reasoning, -1, t); }

void output_event_sink::reasoning_end(bool complete) { push(kind::reasoning_end, -1, complete); }

output_events output_event_sink::take(bool final) {
  if (final) flush_carry();
  if (!final && !out_.empty() &&
      (out_.back().type == kind::content || out_.back().type == kind::arguments || out_.back().type == kind::reasoning)) {
    auto& e = out_.back();
    if (const size_t n = incomplete_utf8_tail(e.text)) {
      carry_ = e.text.substr(e.text.size() - n);
      carry_kind_ = e.type;
      carry_index_ = e.index;
      e.text.resize(e.text.size() - n);
      if (e.text.empty()) out_.pop_back();
    }
  }
  output_events r = std::move(out_);
  out_.clear();
  return r;
}

}  // namespace spate::api::detail
