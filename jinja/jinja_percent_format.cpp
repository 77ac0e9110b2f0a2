// printf-style `fmt % args` (also the `format` filter), as CPython's str.__mod__ does it:
// %[(key)][flags][width][.precision][length]conversion, one conversion at a time.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_format.h"
#include "jinja/jinja_format_detail.h"
#include "jinja/jinja_pystr.h"
#include "jinja/jinja_unicode.h"

namespace spate::jinja {
namespace {

using format_detail::ascii_repr;
using format_detail::format_float_body;
using format_detail::is_digit;
using format_detail::parse_int;
using format_detail::to_base;

// The right operand of `%`: a tuple gives the positional arguments; any other value is the
// single positional argument. Dicts, lists, ranges and undefined also count as a mapping
// (CPython treats any non-tuple, non-str argument with __getitem__ so), which allows %(key)
// and lifts the "not all arguments converted" check.
class percent_args {
 public:
  explicit percent_args(const value& args)
      : args_(args),
        is_map_(args.is(kind::dict) || args.is(kind::list) || args.is(kind::range) || args.is_undefined()) {
    if (args.is(kind::tuple))
      positional_ = args.seq().items;
    else
      positional_.push_back(args);
  }

  bool is_map() const { return is_map_; }

  // The next positional argument; throws when they are used up.
  value take() {
    if (next_ >= positional_.size()) throw runtime_error("not enough arguments for format string");
    return positional_[next_++];
  }

  // args[key] for %(key): only a dict can be indexed by a str.
  value lookup(const std::string& key) const {
    if (!args_.is(kind::dict))
      throw runtime_error(py_str_repr(type_name(args_)) + " indices must be integers or slices, not str");
    const value* v = args_.dict_ref().find(key);
    if (!v) throw runtime_error(py_str_repr(key));
    return *v;
  }

  // Throws unless every positional argument was consumed (not checked for mappings).
  void check_all_converted() const {
    if (!is_map_ && next_ < positional_.size())
      throw runtime_error("not all arguments converted during string formatting");
  }

 private:
  const value& args_;
  bool is_map_;
  std::vector<value> positional_;
  std::size_t next_ = 0;
};

// Flags, width, precision and conversion character of one specifier.
struct percent_spec {
  bool left = false, plus = false, space = false, alt = false, zero = false;
  std::int64_t width = -1, precision = -1;
  char conv = 0;
};

// A converted argument: sign (and 0x/0o prefix) apart from the body so that zero padding
// goes between them; numeric says whether the '0' flag applies.
struct percent_field {
  std::string sign, body;
  bool numeric = false;
};

// Reads "(key)" at fmt[i] (i is just past '%'; advanced past ')') and returns args[key];
// parentheses nest. Returns nullopt, leaving i, when there is no key.
std::optional<value> read_mapping_key(const std::string& fmt, std::size_t& i, const percent_args& args) {
  if (fmt[i] != '(') return std::nullopt;
  if (!args.is_map()) throw runtime_error("format requires a mapping");
  const std::size_t j = format_detail::find_closing(fmt, i + 1, '(', ')');
  if (j == std::string::npos) throw runtime_error("incomplete format key");
  value v = args.lookup(fmt.substr(i + 1, j - i - 1));
  i = j + 1;
  return v;
}

// A '*' width or precision: the next positional argument, which must be an int.
std::int64_t star_argument(percent_args& args) {
  const value v = args.take();
  if (!v.is_int_like()) throw runtime_error("* wants int");
  return v.as_int();
}

// Reads [flags][width][.precision][length]conversion from fmt[i] (advancing i past the
// conversion character), taking '*' values from args in order.
percent_spec read_percent_spec(const std::string& fmt, std::size_t& i, percent_args& args) {
  percent_spec sp;
  for (; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '-')
      sp.left = true;
    else if (c == '+')
      sp.plus = true;
    else if (c == ' ')
      sp.space = true;
    else if (c == '#')
      sp.alt = true;
    else if (c == '0')
      sp.zero = true;
    else
      break;
  }
  if (i < fmt.size() && fmt[i] == '*') {
    sp.width = star_argument(args);
    if (sp.width < 0) {
      sp.left = true;
      sp.width = -sp.width;
    }
    ++i;
  } else if (i < fmt.size() && is_digit(fmt[i])) {
    sp.width = parse_int(fmt, i);
  }
  if (i < fmt.size() && fmt[i] == '.') {
    ++i;
    if (i < fmt.size() && fmt[i] == '*') {
      sp.precision = std::max<std::int64_t>(0, star_argument(args));
      ++i;
    } else {
      sp.precision = parse_int(fmt, i);
    }
  }
  while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
  if (i >= fmt.size()) throw runtime_error("incomplete format");
  sp.conv = fmt[i++];
  return sp;
}

// "-" when negative, else "+" or " " per the flags, else "".
std::string sign_for(bool negative, const percent_spec& sp) {
  return negative ? "-" : sp.plus ? "+" : sp.space ? " " : "";
}

std::uint64_t magnitude(std::int64_t n) {
  return n < 0 ? 0 - static_cast<std::uint64_t>(n) : static_cast<std::uint64_t>(n);
}

// Left-pads digits with zeros to the precision (the minimum number of digits).
void pad_digits(std::string& digits, std::int64_t precision) {
  if (precision > 0 && static_cast<std::int64_t>(digits.size()) < precision)
    digits.insert(0, static_cast<std::size_t>(precision) - digits.size(), '0');
}

// %s %r %a: str / repr / ascii, cut to precision code points; in a Markup format string
// escaped unless %s of a Markup value.
percent_field convert_text(render_context& ctx, const percent_spec& sp, const value& arg, bool markup) {
  percent_field f;
  f.body = sp.conv == 's' ? to_str(arg, ctx) : sp.conv == 'r' ? to_repr(arg, ctx) : ascii_repr(arg, ctx);
  if (sp.precision >= 0 && static_cast<std::size_t>(sp.precision) < unicode::count_code_points(f.body))
    f.body = f.body.substr(0, unicode::byte_offset(f.body, static_cast<std::size_t>(sp.precision)));
  if (markup && !(sp.conv == 's' && arg.is_markup())) f.body = pystr::html_escape(f.body);
  return f;
}

// %d %i %u: ints, and finite floats truncated toward zero.
percent_field convert_decimal(const percent_spec& sp, const value& arg) {
  std::int64_t n;
  if (arg.is_int_like())
    n = arg.as_int();
  else if (arg.is(kind::floating) && std::isfinite(arg.as_float()))
    n = static_cast<std::int64_t>(std::trunc(arg.as_float()));
  else
    throw runtime_error(std::string("%") + sp.conv + " format: a real number is required, not " + type_name(arg));
  percent_field f{sign_for(n < 0, sp), std::to_string(magnitude(n)), true};
  pad_digits(f.body, sp.precision);
  return f;
}

// %o %x %X: ints only; '#' adds 0o / 0x / 0X after the sign.
percent_field convert_base(const percent_spec& sp, const value& arg) {
  if (!arg.is_int_like())
    throw runtime_error(std::string("%") + sp.conv + " format: an integer is required, not " + type_name(arg));
  const std::int64_t n = arg.as_int();
  percent_field f{sign_for(n < 0, sp), to_base(magnitude(n), sp.conv == 'o' ? 8 : 16, sp.conv == 'X'), true};
  pad_digits(f.body, sp.precision);
  if (sp.alt) f.sign += sp.conv == 'o' ? "0o" : sp.conv == 'x' ? "0x" : "0X";
  return f;
}

// %e %E %f %F %g %G: any number; precision 6 by default.
percent_field convert_float(const percent_spec& sp, const value& arg) {
  if (!arg.is_number()) throw runtime_error("must be real number, not " + type_name(arg));
  const double x = arg.as_float();
  bool dot0 = false;
  std::string body = format_float_body(x, sp.conv, sp.precision < 0 ? 6 : sp.precision, sp.alt, dot0);
  return {sign_for(std::signbit(x) && !std::isnan(x), sp), std::move(body), true};
}

// %c: a code point given as an int, or a one-character str.
percent_field convert_char(const value& arg) {
  percent_field f;
  if (arg.is_int_like()) {
    const std::int64_t n = arg.as_int();
    if (n < 0 || n > 0x10FFFF) throw runtime_error("%c arg not in range(0x110000)");
    unicode::append_utf8(f.body, static_cast<char32_t>(n));
  } else if (arg.is_string() && arg.str_data().cp_len == 1) {
    f.body = arg.str();
  } else {
    throw runtime_error("%c requires int or char");
  }
  return f;
}

// Converts arg per sp.conv (any conversion but %%).
percent_field convert(render_context& ctx, const percent_spec& sp, const value& arg, bool markup) {
  switch (sp.conv) {
    case 's':
    case 'r':
    case 'a': return convert_text(ctx, sp, arg, markup);
    case 'd':
    case 'i':
    case 'u': return convert_decimal(sp, arg);
    case 'o':
    case 'x':
    case 'X': return convert_base(sp, arg);
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G': return convert_float(sp, arg);
    case 'c': return convert_char(arg);
    default: throw runtime_error(std::string("unsupported format character '") + sp.conv + "'");
  }
}

// Appends the field padded to the width (in code points): spaces on the right with '-',
// zeros between sign and digits with '0' on a number, else spaces on the left.
void append_padded(std::string& out, const percent_spec& sp, const percent_field& f) {
  const auto len = static_cast<std::int64_t>(unicode::count_code_points(f.sign) + unicode::count_code_points(f.body));
  if (sp.width <= len) {
    out += f.sign + f.body;
    return;
  }
  const std::size_t n = static_cast<std::size_t>(sp.width - len);
  if (sp.left)
    out += f.sign + f.body + std::string(n, ' ');
  else if (sp.zero && f.numeric)
    out += f.sign + std::string(n, '0') + f.body;
  else
    out += std::string(n, ' ') + f.sign + f.body;
}

}  // namespace

std::string percent_format(render_context& ctx, const std::string& fmt, const value& args, bool markup) {
  percent_args pargs(args);
  std::string out;
  std::size_t i = 0;
  while (i < fmt.size()) {
    if (fmt[i] != '%') {
      out += fmt[i++];
      continue;
    }
    ++i;
    if (i >= fmt.size()) throw runtime_error("incomplete format");
    std::optional<value> keyed = read_mapping_key(fmt, i, pargs);
    const percent_spec sp = read_percent_spec(fmt, i, pargs);
    if (sp.conv == '%') {
      out += '%';
      continue;
    }
    const value arg = keyed ? std::move(*keyed) : pargs.take();
    append_padded(out, sp, convert(ctx, sp, arg, markup));
    ctx.check_string(out.size());
  }
  pargs.check_all_converted();
  return out;
}

}  // namespace spate::jinja
