#include "jinja/jinja_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_format_detail.h"
#include "jinja/jinja_ops.h"
#include "jinja/jinja_pystr.h"
#include "jinja/jinja_unicode.h"

namespace spate::jinja {

namespace format_detail {

std::size_t find_closing(std::string_view fmt, std::size_t from, char open, char close) {
  int level = 1;
  for (std::size_t j = from; j < fmt.size(); ++j) {
    if (fmt[j] == open) {
      ++level;
    } else if (fmt[j] == close && --level == 0) {
      return j;
    }
  }
  return std::string_view::npos;
}

std::int64_t parse_int(std::string_view s, std::size_t& p) {
  std::int64_t v = 0;
  while (p < s.size() && is_digit(s[p])) {
    v = v * 10 + (s[p] - '0');
    if (v > 100000000) throw runtime_error("Too many decimal digits in format string");
    ++p;
  }
  return v;
}

std::string to_base(std::uint64_t v, int base, bool upper) {
  if (v == 0) return "0";
  const char* digs = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  while (v) {
    out.insert(out.begin(), digs[v % static_cast<std::uint64_t>(base)]);
    v /= static_cast<std::uint64_t>(base);
  }
  return out;
}

std::string format_float_body(double x, char type, std::int64_t precision, bool alt, bool& add_dot0) {
  const double ax = std::fabs(x);
  char buf[512];
  add_dot0 = false;
  if (std::isnan(x) || std::isinf(x)) {
    std::string s = std::isnan(x) ? "nan" : "inf";
    if (type == 'E' || type == 'F' || type == 'G')
      for (auto& c : s) c = static_cast<char>(c - 32);
    return s;
  }
  if (type == 0) {
    if (precision < 0) return py_float_repr(ax);
    std::snprintf(buf, sizeof buf, alt ? "%#.*g" : "%.*g", static_cast<int>(precision == 0 ? 1 : precision), ax);
    std::string s = buf;
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s;
  }
  const int prec = static_cast<int>(precision < 0 ? 6 : std::min<std::int64_t>(precision, 400));
  const char* f = nullptr;
  switch (type) {
    case 'e': f = alt ? "%#.*e" : "%.*e"; break;
    case 'E': f = alt ? "%#.*E" : "%.*E"; break;
    case 'f': f = alt ? "%#.*f" : "%.*f"; break;
    case 'F': f = alt ? "%#.*F" : "%.*F"; break;
    case 'g': f = alt ? "%#.*g" : "%.*g"; break;
    case 'G': f = alt ? "%#.*G" : "%.*G"; break;
    default: throw runtime_error(std::string("Unknown format code '") + type + "' for object of type 'float'");
  }
  if (ax >= 1e300 && (type == 'f' || type == 'F')) {
    std::vector<char> big(400 + static_cast<std::size_t>(prec));
    std::snprintf(big.data(), big.size(), f, prec == 0 && (type == 'g' || type == 'G') ? 1 : prec, ax);
    return big.data();
  }
  std::snprintf(buf, sizeof buf, f, prec == 0 && (type == 'g' || type == 'G') ? 1 : prec, ax);
  return buf;
}

std::string ascii_repr(const value& v, render_context& ctx) {
  const std::string r = to_repr(v, ctx);
  std::string out;
  char buf[16];
  std::size_t p = 0;
  while (p < r.size()) {
    const std::size_t start = p;
    const char32_t c = unicode::decode(r, p);
    if (c < 0x80) {
      out.append(r, start, p - start);
      continue;
    }
    if (c <= 0xFF)
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
    else if (c <= 0xFFFF)
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
    else
      std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
    out += buf;
  }
  return out;
}

}  // namespace format_detail

namespace {

using format_detail::ascii_repr;
using format_detail::format_float_body;
using format_detail::is_digit;
using format_detail::parse_int;
using format_detail::find_closing;
using format_detail::to_base;

struct spec_t {
  std::string fill = " ";
  char align = 0;  // < > = ^ or 0 (default)
  char sign = '-';
  bool alt = false;
  std::int64_t width = -1;
  char grouping = 0;
  std::int64_t precision = -1;
  char type = 0;
};

spec_t parse_spec(std::string_view s) {
  spec_t sp;
  std::size_t p = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '=' || c == '^'; };
  // [[fill]align]: fill may be any code point.
  if (!s.empty()) {
    std::size_t q = 0;
    unicode::decode(s, q);
    if (q < s.size() && is_align(s[q])) {
      sp.fill = std::string(s.substr(0, q));
      sp.align = s[q];
      p = q + 1;
    } else if (is_align(s[0])) {
      sp.align = s[0];
      p = 1;
    }
  }
  if (p < s.size() && (s[p] == '+' || s[p] == '-' || s[p] == ' ')) sp.sign = s[p++];
  if (p < s.size() && s[p] == '#') {
    sp.alt = true;
    ++p;
  }
  if (p < s.size() && s[p] == '0') {
    if (!sp.align) {
      sp.fill = "0";
      sp.align = '=';
    }
    ++p;
  }
  if (p < s.size() && is_digit(s[p])) sp.width = parse_int(s, p);
  if (p < s.size() && (s[p] == ',' || s[p] == '_')) sp.grouping = s[p++];
  if (p < s.size() && s[p] == '.') {
    ++p;
    if (p >= s.size() || !is_digit(s[p])) throw runtime_error("Format specifier missing precision");
    sp.precision = parse_int(s, p);
  }
  if (p < s.size()) sp.type = s[p++];
  if (p < s.size()) throw runtime_error("Invalid format specifier");
  return sp;
}

// Pads `body` (sign/prefix part separated for '=' alignment) to the spec's width.
std::string pad_to(const spec_t& sp, const std::string& sign_prefix, const std::string& body, char default_align) {
  const char align = sp.align ? sp.align : default_align;
  const auto len =
      static_cast<std::int64_t>(unicode::count_code_points(sign_prefix) + unicode::count_code_points(body));
  if (sp.width <= len) return sign_prefix + body;
  const std::int64_t n = sp.width - len;
  std::string fill;
  auto fill_n = [&](std::int64_t k) {
    std::string f;
    for (std::int64_t i = 0; i < k; ++i) f += sp.fill;
    return f;
  };
  switch (align) {
    case '<': return sign_prefix + body + fill_n(n);
    case '^': return fill_n(n / 2) + sign_prefix + body + fill_n(n - n / 2);
    case '=': return sign_prefix + fill_n(n) + body;
    default: return fill_n(n) + sign_prefix + body;
  }
}

std::string group_digits(const std::string& digits, char sep, int every) {
  if (!sep) return digits;
  std::string out;
  const std::size_t n = digits.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i && (n - i) % static_cast<std::size_t>(every) == 0) out += sep;
    out += digits[i];
  }
  return out;
}

std::string sign_of(bool negative, char sign) {
  if (negative) return "-";
  if (sign == '+') return "+";
  if (sign == ' ') return " ";
  return "";
}

std::string format_float(double x, const spec_t& sp) {
  char type = sp.type;
  double v = x;
  std::string suffix;
  if (type == '%') {
    v = x * 100;
    type = 'f';
    suffix = "%";
  } else if (type == 'n') {
    type = 'g';
  }
  bool dot0 = false;
  std::string body = format_float_body(v, type, sp.precision, sp.alt, dot0);
  if (sp.grouping && !std::isnan(v) && !std::isinf(v)) {
    const std::size_t end = body.find_first_of(".eE");
    const std::string ip = body.substr(0, end);
    body = group_digits(ip, sp.grouping, 3) + (end == std::string::npos ? "" : body.substr(end));
  }
  const bool neg = std::signbit(v) && !std::isnan(v);
  return pad_to(sp, sign_of(neg, sp.sign), body + suffix, '>');
}

std::string format_int(std::int64_t i, const spec_t& sp) {
  if (sp.precision >= 0) throw runtime_error("Precision not allowed in integer format specifier");
  const bool neg = i < 0;
  const std::uint64_t mag = neg ? 0 - static_cast<std::uint64_t>(i) : static_cast<std::uint64_t>(i);
  std::string prefix, digits;
  switch (sp.type) {
    case 0:
    case 'd':
    case 'n': digits = group_digits(std::to_string(mag), sp.grouping, 3); break;
    case 'b':
      digits = group_digits(to_base(mag, 2, false), sp.grouping, 4);
      if (sp.alt) prefix = "0b";
      break;
    case 'o':
      digits = group_digits(to_base(mag, 8, false), sp.grouping, 4);
      if (sp.alt) prefix = "0o";
      break;
    case 'x':
      digits = group_digits(to_base(mag, 16, false), sp.grouping, 4);
      if (sp.alt) prefix = "0x";
      break;
    case 'X':
      digits = group_digits(to_base(mag, 16, true), sp.grouping, 4);
      if (sp.alt) prefix = "0X";
      break;
    case 'c': {
      if (i < 0 || i > 0x10FFFF) throw runtime_error("%c arg not in range(0x110000)");
      std::string c;
      unicode::append_utf8(c, static_cast<char32_t>(i));
      return pad_to(sp, "", c, '<');
    }
    default: throw runtime_error(std::string("Unknown format code '") + sp.type + "' for object of type 'int'");
  }
  return pad_to(sp, sign_of(neg, sp.sign) + prefix, digits, '>');
}

std::string format_str(const std::string& s, const spec_t& sp) {
  if (sp.type && sp.type != 's')
    throw runtime_error(std::string("Unknown format code '") + sp.type + "' for object of type 'str'");
  if (sp.sign != '-') throw runtime_error("Sign not allowed in string format specifier");
  if (sp.align == '=') throw runtime_error("'=' alignment not allowed in string format specifier");
  std::string body = s;
  if (sp.precision >= 0 && static_cast<std::size_t>(sp.precision) < unicode::count_code_points(s))
    body = s.substr(0, unicode::byte_offset(s, static_cast<std::size_t>(sp.precision)));
  return pad_to(sp, "", body, '<');
}

class formatter {
 public:
  formatter(render_context& ctx, call_args& args, bool markup) : ctx_(ctx), args_(args), markup_(markup) {}

  std::string run(std::string_view fmt, int depth) {
    if (depth > 2) throw runtime_error("Max string recursion exceeded");
    std::string out;
    std::size_t i = 0;
    while (i < fmt.size()) {
      const char c = fmt[i];
      if (c == '{') {
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
          out += '{';
          i += 2;
          continue;
        }
        const std::size_t j = find_closing(fmt, i + 1, '{', '}');
        if (j == std::string::npos) throw runtime_error("expected '}' before end of string");
        out += field(fmt.substr(i + 1, j - i - 1), depth);
        ctx_.check_string(out.size());
        i = j + 1;
      } else if (c == '}') {
        if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
          out += '}';
          i += 2;
          continue;
        }
        throw runtime_error("Single '}' encountered in format string");
      } else {
        out += c;
        ++i;
      }
    }
    return out;
  }

 private:
  value arg_for(const std::string& first) {
    if (first.empty()) {
      if (manual_) throw runtime_error("cannot switch from manual field specification to automatic field numbering");
      automatic_ = true;
      return positional(auto_idx_++);
    }
    if (std::all_of(first.begin(), first.end(), is_digit)) {
      if (automatic_) throw runtime_error("cannot switch from automatic field numbering to manual field specification");
      manual_ = true;
      return positional(static_cast<std::size_t>(std::stoll(first)));
    }
    for (auto& [k, v] : args_.kwargs)
      if (k == first) return v;
    throw runtime_error(py_str_repr(first));
  }

  value positional(std::size_t i) {
    if (i >= args_.args.size())
      throw runtime_error("Replacement index " + std::to_string(i) + " out of range for positional args tuple");
    return args_.args[i];
  }

  std::string field(std::string_view f, int depth) {
    // field_name [!conv] [:spec]
    std::size_t p = 0;
    while (p < f.size() && f[p] != '!' && f[p] != ':') {
      if (f[p] == '[') {
        while (p < f.size() && f[p] != ']') ++p;
        if (p >= f.size()) throw runtime_error("Missing ']' in format string");
      }
      ++p;
    }
    const std::string_view name = f.substr(0, p);
    char conv = 0;
    std::string_view spec;
    if (p < f.size() && f[p] == '!') {
      if (p + 1 >= f.size()) throw runtime_error("end of string while looking for conversion specifier");
      conv = f[p + 1];
      p += 2;
      if (p < f.size() && f[p] != ':') throw runtime_error("expected ':' after conversion specifier");
    }
    if (p < f.size() && f[p] == ':') spec = f.substr(p + 1);
    // First part of the name, then .attr / [key] accessors.
    std::size_t q = 0;
    while (q < name.size() && name[q] != '.' && name[q] != '[') ++q;
    value obj = arg_for(std::string(name.substr(0, q)));
    while (q < name.size()) {
      if (name[q] == '.') {
        std::size_t e = q + 1;
        while (e < name.size() && name[e] != '.' && name[e] != '[') ++e;
        if (e == q + 1) throw runtime_error("Empty attribute in format string");
        obj = get_attr(ctx_, obj, std::string(name.substr(q + 1, e - q - 1)));
        q = e;
      } else {
        const std::size_t e = name.find(']', q);
        const std::string key(name.substr(q + 1, e - q - 1));
        if (key.empty()) throw runtime_error("Empty attribute in format string");
        const value k =
            std::all_of(key.begin(), key.end(), is_digit) ? value::integer(std::stoll(key)) : value::string(key);
        value item = get_item(ctx_, obj, k);
        if (item.is_undefined()) throw runtime_error(k.is_string() ? py_str_repr(key) : key);
        obj = item;
        q = e + 1;
        if (q < name.size() && name[q] != '.' && name[q] != '[')
          throw runtime_error("Only '.' or '[' may follow ']' in format field specifier");
      }
    }
    if (conv == 's')
      obj = value::string(to_str(obj, ctx_));
    else if (conv == 'r')
      obj = value::string(to_repr(obj, ctx_));
    else if (conv == 'a')
      obj = value::string(ascii_repr(obj, ctx_));
    else if (conv)
      throw runtime_error(std::string("Unknown conversion specifier ") + conv);
    std::string spec_text(spec);
    if (spec_text.find('{') != std::string::npos) spec_text = run(spec_text, depth + 1);
    if (markup_ && obj.is_markup()) {
      if (!spec_text.empty()) throw runtime_error("Format specifier given to Markup value");
      return obj.str();
    }
    std::string r = format_value(ctx_, obj, spec_text);
    return markup_ ? pystr::html_escape(r) : r;
  }

  render_context& ctx_;
  call_args& args_;
  bool markup_;
  std::size_t auto_idx_ = 0;
  bool automatic_ = false, manual_ = false;
};

}  // namespace

std::string format_value(render_context& ctx, const value& v, std::string_view spec) {
  if (spec.empty()) return to_str(v, ctx);
  if (v.is_undefined()) raise_undefined(v);
  const spec_t sp = parse_spec(spec);
  switch (v.type()) {
    case kind::string: return format_str(v.str(), sp);
    case kind::boolean:
    case kind::integer:
      if (sp.type == 'e' || sp.type == 'E' || sp.type == 'f' || sp.type == 'F' || sp.type == 'g' || sp.type == 'G' ||
          sp.type == '%')
        return format_float(v.as_float(), sp);
      return format_int(v.as_int(), sp);
    case kind::floating:
      if (sp.type && std::string_view("eEfFgGn%").find(sp.type) == std::string_view::npos)
        throw runtime_error(std::string("Unknown format code '") + sp.type + "' for object of type 'float'");
      return format_float(v.as_float(), sp);
    default: throw runtime_error("unsupported format string passed to " + type_name(v) + ".__format__");
  }
}

std::string python_format(render_context& ctx, const std::string& fmt, call_args& args, bool markup) {
  return formatter(ctx, args, markup).run(fmt, 0);
}

}  // namespace spate::jinja
