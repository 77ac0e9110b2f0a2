#include "jinja/jinja_lexer.h"

#include <charconv>
#include <cstdio>
#include <limits>

#include "jinja/jinja_error.h"
#include "jinja/jinja_unicode.h"

namespace spate::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Python's newline handling before lexing: \r\n and \r become \n, and one trailing newline
// is dropped (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out.push_back(src[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Length of Unicode whitespace (Python's \s) at s[pos...], greedy.
std::size_t match_space(std::string_view s, std::size_t pos) {
  std::size_t p = pos;
  while (p < s.size()) {
    std::size_t q = p;
    if (!unicode::is_space(unicode::decode(s, q))) break;
    p = q;
  }
  return p - pos;
}

// str.rstrip(): strips trailing Unicode whitespace.
std::string_view rstrip_space(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    std::size_t q = start;
    if (!unicode::is_space(unicode::decode(s, q))) break;
    end = start;
  }
  return s.substr(0, end);
}

bool all_space(std::string_view s) { return !s.empty() && match_space(s, 0) == s.size(); }

// (\d+_)*\d+ at pos: end position, or npos.
std::size_t match_digits(std::string_view s, std::size_t pos) {
  if (pos >= s.size() || !is_digit(s[pos])) return std::string_view::npos;
  std::size_t p = pos;
  while (p < s.size() && is_digit(s[p])) ++p;
  while (p + 1 < s.size() && s[p] == '_' && is_digit(s[p + 1])) {
    ++p;
    while (p < s.size() && is_digit(s[p])) ++p;
  }
  return p;
}

std::size_t match_exponent(std::string_view s, std::size_t pos) {
  if (pos >= s.size() || (s[pos] != 'e' && s[pos] != 'E')) return std::string_view::npos;
  std::size_t p = pos + 1;
  if (p < s.size() && (s[p] == '+' || s[p] == '-')) ++p;
  return match_digits(s, p);
}

// jinja2.lexer.float_re at pos: end position or npos.
std::size_t match_float(std::string_view s, std::size_t pos) {
  if (pos > 0 && s[pos - 1] == '.') return std::string_view::npos;
  const std::size_t a = match_digits(s, pos);
  if (a == std::string_view::npos) return a;
  std::size_t frac = std::string_view::npos;
  if (a < s.size() && s[a] == '.') frac = match_digits(s, a + 1);
  if (frac != std::string_view::npos) {
    const std::size_t e = match_exponent(s, frac);
    return e != std::string_view::npos ? e : frac;
  }
  return match_exponent(s, a);
}

// (_?[digit])+ with the given digit class.
template <class Pred>
std::size_t match_prefixed(std::string_view s, std::size_t p, Pred ok) {
  std::size_t n = 0;
  while (true) {
    std::size_t q = p;
    if (q < s.size() && s[q] == '_') ++q;
    if (q < s.size() && ok(s[q])) {
      p = q + 1;
      ++n;
    } else {
      break;
    }
  }
  return n ? p : std::string_view::npos;
}

// jinja2.lexer.integer_re at pos: end position or npos.
std::size_t match_integer(std::string_view s, std::size_t pos, int& base) {
  if (pos >= s.size() || !is_digit(s[pos])) return std::string_view::npos;
  base = 10;
  if (s[pos] == '0' && pos + 1 < s.size()) {
    const char c = static_cast<char>(s[pos + 1] | 0x20);
    std::size_t e = std::string_view::npos;
    if (c == 'b') {
      e = match_prefixed(s, pos + 2, [](char d) { return d == '0' || d == '1'; });
      base = 2;
    } else if (c == 'o') {
      e = match_prefixed(s, pos + 2, [](char d) { return d >= '0' && d <= '7'; });
      base = 8;
    } else if (c == 'x') {
      e = match_prefixed(s, pos + 2, [](char d) { return is_digit(d) || ((d | 0x20) >= 'a' && (d | 0x20) <= 'f'); });
      base = 16;
    }
    if (e != std::string_view::npos) return e;
    base = 10;
  }
  std::size_t p = pos + 1;
  if (s[pos] != '0') {
    while (true) {
      std::size_t q = p;
      if (q < s.size() && s[q] == '_') ++q;
      if (q < s.size() && is_digit(s[q]))
        p = q + 1;
      else
        break;
    }
  } else {
    while (true) {
      std::size_t q = p;
      if (q < s.size() && s[q] == '_') ++q;
      if (q < s.size() && s[q] == '0')
        p = q + 1;
      else
        break;
    }
  }
  return p;
}

bool is_name_char(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  return !unicode::is_space(c) && unicode::is_printable(c);
}

std::size_t match_name(std::string_view s, std::size_t pos) {
  std::size_t p = pos;
  while (p < s.size()) {
    std::size_t q = p;
    if (!is_name_char(unicode::decode(s, q))) break;
    p = q;
  }
  return p;
}

// String literal at pos ('...' or "..." with backslash escapes): end position or npos.
std::size_t match_string(std::string_view s, std::size_t pos) {
  const char q = s[pos];
  if (q != '\'' && q != '"') return std::string_view::npos;
  std::size_t p = pos + 1;
  while (p < s.size()) {
    if (s[p] == '\\') {
      if (p + 1 >= s.size()) return std::string_view::npos;
      std::size_t r = p + 1;
      unicode::decode(s, r);
      p = r;
    } else if (s[p] == q) {
      return p + 1;
    } else {
      ++p;
    }
  }
  return std::string_view::npos;
}

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  c = static_cast<char>(c | 0x20);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// text.encode("ascii", "backslashreplace"): code points past ASCII become \xNN, \uNNNN or
// \UNNNNNNNN.
std::string backslash_replace(std::string_view body) {
  std::string ascii;
  ascii.reserve(body.size());
  char buf[16];
  for (std::size_t p = 0; p < body.size();) {
    const char32_t c = unicode::decode(body, p);
    if (c < 0x80) {
      ascii.push_back(static_cast<char>(c));
    } else {
      if (c <= 0xFF)
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c <= 0xFFFF)
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      ascii += buf;
    }
  }
  return ascii;
}

// ascii.decode("unicode-escape") (Python's escapes; an unknown escape stays as written; a lone
// surrogate becomes U+FFFD). Throws syntax_error at `line` for a malformed escape.
std::string decode_unicode_escape(const std::string& ascii, int line) {
  std::string out;
  out.reserve(ascii.size());
  auto put = [&](char32_t cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // lone surrogate: not representable
    unicode::append_utf8(out, cp);
  };
  for (std::size_t i = 0; i < ascii.size();) {
    const char c = ascii[i];
    if (c != '\\') {
      out.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 >= ascii.size()) throw syntax_error("\\ at end of string", line);
    const char e = ascii[i + 1];
    i += 2;
    switch (e) {
      case '\n': break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case '0':
      case '1':
      case '2':
      case '3':
      case '4':
      case '5':
      case '6':
      case '7': {
        char32_t v = static_cast<char32_t>(e - '0');
        for (int k = 0; k < 2 && i < ascii.size() && ascii[i] >= '0' && ascii[i] <= '7'; ++k, ++i)
          v = v * 8 + static_cast<char32_t>(ascii[i] - '0');
        put(v);
        break;
      }
      case 'x':
      case 'u':
      case 'U': {
        const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t v = 0;
        for (int k = 0; k < n; ++k) {
          const int h =
              i + static_cast<std::size_t>(k) < ascii.size() ? hex_value(ascii[i + static_cast<std::size_t>(k)]) : -1;
          if (h < 0) {
            throw syntax_error(e == 'x'   ? "truncated \\xXX escape"
                               : e == 'u' ? "truncated \\uXXXX escape"
                                          : "truncated \\UXXXXXXXX escape",
                               line);
          }
          v = v * 16 + static_cast<char32_t>(h);
        }
        i += static_cast<std::size_t>(n);
        if (v > 0x10FFFF) throw syntax_error("illegal Unicode character", line);
        put(v);
        break;
      }
      case 'N': throw syntax_error("\\N{...} escapes are not supported", line);
      default: out.push_back('\\'); out.push_back(e);
    }
  }
  return out;
}

// value_str[1:-1].encode("ascii", "backslashreplace").decode("unicode-escape")
std::string unescape_string(std::string_view body, int line) {
  return decode_unicode_escape(backslash_replace(body), line);
}

class lexer {
 public:
  explicit lexer(std::string_view src) : src_(normalize_newlines(src)), s_(src_) {}

  std::vector<token> run() {
    while (pos_ < s_.size()) {
      root();
    }
    emit(tok::eof, "");
    return std::move(out_);
  }

 private:
  enum class tag { variable, block, comment, raw };

  void emit(tok t, std::string text) {
    token k;
    k.type = t;
    k.line = line_;
    k.text = std::move(text);
    out_.push_back(std::move(k));
  }

  [[noreturn]] void fail(const std::string& msg) { throw syntax_error(msg, line_); }

  // The {% raw %} opening at pos (after "{%"): end of the tag or npos.
  std::size_t match_raw_begin(std::size_t pos, char& sign) const {
    std::size_t p = pos + 2;
    sign = 0;
    if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) sign = s_[p++];
    p += match_space(s_, p);
    if (s_.compare(p, 3, "raw") != 0) return std::string_view::npos;
    p += 3;
    p += match_space(s_, p);
    if (s_.compare(p, 3, "-%}") == 0) return p + 3 + match_space(s_, p + 3);
    if (s_.compare(p, 2, "%}") == 0) return p + 2;
    return std::string_view::npos;
  }

  // Applies the whitespace control before a tag to `text` (the data preceding it).
  std::string_view strip_before(std::string_view text, char sign, bool is_variable, int& stripped_nl) const {
    stripped_nl = 0;
    if (sign == '-') {
      const std::string_view kept = rstrip_space(text);
      stripped_nl = count_newlines(text.substr(kept.size()));
      return kept;
    }
    if (sign != '+' && !is_variable) {  // lstrip_blocks
      const std::size_t nl = text.rfind('\n');
      const std::size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && all_space(text.substr(l_pos))) return text.substr(0, l_pos);
    }
    return text;
  }

  void emit_data(std::string_view text, int stripped_nl) {
    if (!text.empty()) emit(tok::data, std::string(text));
    line_ += count_newlines(text) + stripped_nl;
  }

  void root() {
    // Earliest "{{", "{%" or "{#".
    std::size_t i = pos_;
    tag kind = tag::variable;
    std::size_t raw_end = 0;
    char sign = 0;
    for (;; ++i) {
      i = s_.find('{', i);
      if (i == std::string_view::npos || i + 1 >= s_.size()) {
        i = std::string_view::npos;
        break;
      }
      const char c = s_[i + 1];
      if (c == '{') {
        kind = tag::variable;
        break;
      }
      if (c == '#') {
        kind = tag::comment;
        break;
      }
      if (c == '%') {
        raw_end = match_raw_begin(i, sign);
        kind = raw_end != std::string_view::npos ? tag::raw : tag::block;
        break;
      }
    }
    if (i == std::string_view::npos) {
      const std::string_view rest = s_.substr(pos_);
      emit_data(rest, 0);
      line_starting_ = !rest.empty() && rest.back() == '\n';
      pos_ = s_.size();
      return;
    }
    std::size_t tag_end;
    if (kind == tag::raw) {
      tag_end = raw_end;
    } else {
      tag_end = i + 2;
      sign = 0;
      if (tag_end < s_.size() && (s_[tag_end] == '-' || s_[tag_end] == '+')) sign = s_[tag_end++];
    }
    int stripped_nl = 0;
    const std::string_view text = strip_before(s_.substr(pos_, i - pos_), sign, kind == tag::variable, stripped_nl);
    emit_data(text, stripped_nl);
    const std::string_view tag_text = s_.substr(i, tag_end - i);
    line_starting_ = !tag_text.empty() && tag_text.back() == '\n';
    pos_ = tag_end;
    switch (kind) {
      case tag::variable:
        emit(tok::variable_begin, "{{");
        inside(false);
        break;
      case tag::block:
        emit(tok::block_begin, "{%");
        inside(true);
        break;
      case tag::comment: comment(); break;
      case tag::raw:
        line_ += count_newlines(tag_text);
        raw();
        break;
    }
  }

  void comment() {
    for (std::size_t j = pos_; j < s_.size(); ++j) {
      std::size_t end = std::string_view::npos;
      if (s_[j] == '+' && s_.compare(j + 1, 2, "#}") == 0) {
        end = j + 3;
      } else if (s_[j] == '-' && s_.compare(j + 1, 2, "#}") == 0) {
        end = j + 3 + match_space(s_, j + 3);
      } else if (s_.compare(j, 2, "#}") == 0) {
        end = j + 2;
        if (end < s_.size() && s_[end] == '\n') ++end;  // trim_blocks
      }
      if (end != std::string_view::npos) {
        const std::string_view m = s_.substr(pos_, end - pos_);
        line_ += count_newlines(m);
        line_starting_ = m.back() == '\n';
        pos_ = end;
        return;
      }
    }
    fail("Missing end of comment tag");
  }

  void raw() {
    for (std::size_t j = pos_; j + 1 < s_.size(); ++j) {
      if (s_[j] != '{' || s_[j + 1] != '%') continue;
      std::size_t p = j + 2;
      char sign = 0;
      if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) sign = s_[p++];
      p += match_space(s_, p);
      if (s_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      p += match_space(s_, p);
      std::size_t end;
      if (s_.compare(p, 3, "+%}") == 0) {
        end = p + 3;
      } else if (s_.compare(p, 3, "-%}") == 0) {
        end = p + 3 + match_space(s_, p + 3);
      } else if (s_.compare(p, 2, "%}") == 0) {
        end = p + 2;
        if (end < s_.size() && s_[end] == '\n') ++end;
      } else {
        continue;
      }
      int stripped_nl = 0;
      const std::string_view text = strip_before(s_.substr(pos_, j - pos_), sign, false, stripped_nl);
      emit_data(text, stripped_nl);
      const std::string_view end_tag = s_.substr(j, end - j);
      line_ += count_newlines(end_tag);
      line_starting_ = end_tag.back() == '\n';
      pos_ = end;
      return;
    }
    fail("Missing end of raw directive");
  }

  // Inside {{ ... }} (block=false) or {% ... %} (block=true).
  void inside(bool block) {
    std::vector<char> balance;
    while (pos_ < s_.size()) {
      if (balance.empty() && tag_end(block)) return;
      if (const std::size_t ws = match_space(s_, pos_)) {
        const std::string_view m = s_.substr(pos_, ws);
        line_ += count_newlines(m);
        line_starting_ = m.back() == '\n';
        pos_ += ws;
        continue;
      }
      line_starting_ = false;
      if (float_token() || integer_token()) continue;
      if (std::size_t e = match_name(s_, pos_); e > pos_) {
        const std::string_view name = s_.substr(pos_, e - pos_);
        std::size_t q = 0;
        const char32_t first = unicode::decode(name, q);
        if (first < 0x80 && is_digit(static_cast<char>(first))) fail("Invalid character in identifier");
        emit(tok::name, std::string(name));
        pos_ = e;
        continue;
      }
      if (std::size_t e = match_string(s_, pos_); e != std::string_view::npos) {
        const std::string_view m = s_.substr(pos_, e - pos_);
        emit(tok::string, unescape_string(m.substr(1, m.size() - 2), line_));
        line_ += count_newlines(m);
        pos_ = e;
        continue;
      }
      operator_token(balance);
    }
  }

  // If the tag's closing delimiter (with its whitespace control: "-" strips the whitespace
  // after it, "+" keeps it, a plain %} eats one newline) is at pos_: emits the end token, moves
  // past it and returns true.
  bool tag_end(bool block) {
    std::size_t end = std::string_view::npos;
    if (block) {
      if (s_.compare(pos_, 3, "+%}") == 0) {
        end = pos_ + 3;
      } else if (s_.compare(pos_, 3, "-%}") == 0) {
        end = pos_ + 3 + match_space(s_, pos_ + 3);
      } else if (s_.compare(pos_, 2, "%}") == 0) {
        end = pos_ + 2;
        if (end < s_.size() && s_[end] == '\n') ++end;
      }
    } else {
      if (s_.compare(pos_, 3, "-}}") == 0)
        end = pos_ + 3 + match_space(s_, pos_ + 3);
      else if (s_.compare(pos_, 2, "}}") == 0)
        end = pos_ + 2;
    }
    if (end == std::string_view::npos) return false;
    emit(block ? tok::block_end : tok::variable_end, block ? "%}" : "}}");
    const std::string_view m = s_.substr(pos_, end - pos_);
    line_ += count_newlines(m);
    line_starting_ = m.back() == '\n';
    pos_ = end;
    return true;
  }

  // If a float literal (underscores allowed) is at pos_: emits it, moves past it and returns
  // true. Out of range saturates as Python's float() does.
  bool float_token() {
    const std::size_t e = match_float(s_, pos_);
    if (e == std::string_view::npos) return false;
    std::string digits;
    for (char c : s_.substr(pos_, e - pos_))
      if (c != '_') digits.push_back(c);
    double d = 0;
    auto res = std::from_chars(digits.data(), digits.data() + digits.size(), d);
    if (res.ec == std::errc::result_out_of_range) {
      // Python's float() saturates to inf or rounds to 0 rather than failing.
      d = digits.find_first_of("eE") != std::string::npos &&
                  digits.find('-', digits.find_first_of("eE")) != std::string::npos
              ? 0.0
              : std::numeric_limits<double>::infinity();
    }
    token k;
    k.type = tok::floating;
    k.line = line_;
    k.fval = d;
    out_.push_back(std::move(k));
    pos_ = e;
    return true;
  }

  // If an integer literal (decimal, 0b, 0o or 0x; underscores allowed) is at pos_: emits it,
  // moves past it and returns true. Fails past the 64-bit signed range.
  bool integer_token() {
    int base = 10;
    const std::size_t e = match_integer(s_, pos_, base);
    if (e == std::string_view::npos) return false;
    std::string digits;
    for (char c : s_.substr(pos_ + (base == 10 ? 0 : 2), e - pos_ - (base == 10 ? 0 : 2)))
      if (c != '_') digits.push_back(c);
    std::uint64_t v = 0;
    auto res = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
    if (res.ec != std::errc() || v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail("integer literal too large (64-bit integers only)");
    token k;
    k.type = tok::integer;
    k.line = line_;
    k.ival = static_cast<std::int64_t>(v);
    out_.push_back(std::move(k));
    pos_ = e;
    return true;
  }

  void operator_token(std::vector<char>& balance) {
    static constexpr std::string_view two[] = {"//", "**", "==", "!=", ">=", "<="};
    std::string op;
    for (auto t : two)
      if (s_.compare(pos_, 2, t) == 0) op = std::string(t);
    if (op.empty()) {
      const char c = s_[pos_];
      if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
        std::size_t q = pos_;
        const std::size_t start = q;
        unicode::decode(s_, q);
        fail("unexpected char '" + std::string(s_.substr(start, q - start)) + "' at " +
             std::to_string(unicode::count_code_points(s_.substr(0, pos_))));
      }
      op = std::string(1, c);
    }
    const char c = op[0];
    if (op.size() == 1) {
      if (c == '{')
        balance.push_back('}');
      else if (c == '(')
        balance.push_back(')');
      else if (c == '[')
        balance.push_back(']');
      else if (c == '}' || c == ')' || c == ']') {
        if (balance.empty()) fail("unexpected '" + op + "'");
        const char expected = balance.back();
        balance.pop_back();
        if (expected != c) fail("unexpected '" + op + "', expected '" + std::string(1, expected) + "'");
      }
    }
    emit(tok::op, op);
    pos_ += op.size();
  }

  std::string src_;
  std::string_view s_;
  std::size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<token> out_;
};

}  // namespace

std::vector<token> tokenize(std::string_view source) { return lexer(source).run(); }

}  // namespace spate::jinja
