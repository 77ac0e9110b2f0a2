// Jinja2's number filters (abs, float, int, round) with Python's float(str) / int(str, base)
// parsing; registered in jinja_filters.cpp.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jinja/jinja_args.h"
#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_filters_detail.h"
#include "jinja/jinja_ops.h"
#include "jinja/jinja_pystr.h"
#include "jinja/jinja_unicode.h"

namespace spate::jinja::filters_detail {
namespace {

// Python's float(str).
bool parse_py_float(std::string_view text, double& out) {
  const std::string s = pystr::strip(text, nullptr, true, true);
  if (s.empty()) return false;
  std::string t;
  std::size_t i = 0;
  std::string sign;
  if (s[0] == '+' || s[0] == '-') {
    sign = s.substr(0, 1);
    i = 1;
  }
  std::string rest = unicode::lower(s.substr(i));
  if (rest == "inf" || rest == "infinity") {
    out = sign == "-" ? -INFINITY : INFINITY;
    return true;
  }
  if (rest == "nan") {
    out = sign == "-" ? -NAN : NAN;
    return true;
  }
  // digits with single underscores between digits, optional fraction and exponent
  bool seen_digit = false, seen_dot = false, seen_exp = false;
  char prev = 0;
  for (std::size_t k = i; k < s.size(); ++k) {
    const char c = s[k];
    if (c >= '0' && c <= '9') {
      seen_digit = true;
      t += c;
    } else if (c == '_') {
      if (!(prev >= '0' && prev <= '9') || k + 1 >= s.size() || !(s[k + 1] >= '0' && s[k + 1] <= '9')) return false;
    } else if (c == '.' && !seen_dot && !seen_exp) {
      seen_dot = true;
      t += c;
    } else if ((c == 'e' || c == 'E') && seen_digit && !seen_exp) {
      seen_exp = true;
      t += 'e';
      if (k + 1 < s.size() && (s[k + 1] == '+' || s[k + 1] == '-')) t += s[++k];
      if (k + 1 >= s.size()) return false;
      seen_digit = false;
    } else {
      return false;
    }
    prev = c;
  }
  if (!seen_digit) return false;
  t = sign + t;
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return end && *end == 0;
}

// Python's int(str, base). Returns false for ValueError; throws on 64-bit overflow.
bool parse_py_int(std::string_view text, std::int64_t base, std::int64_t& out) {
  if (base != 0 && (base < 2 || base > 36)) return false;
  std::string s = pystr::strip(text, nullptr, true, true);
  if (s.empty()) return false;
  std::size_t i = 0;
  bool neg = false;
  if (s[0] == '+' || s[0] == '-') {
    neg = s[0] == '-';
    i = 1;
  }
  auto prefix_base = [&](char c) -> int {
    c = static_cast<char>(c | 0x20);
    return c == 'x' ? 16 : c == 'o' ? 8 : c == 'b' ? 2 : 0;
  };
  bool had_prefix = false;
  if (i + 1 < s.size() && s[i] == '0' && prefix_base(s[i + 1])) {
    const int pb = prefix_base(s[i + 1]);
    if (base == 0 || base == pb) {
      base = pb;
      i += 2;
      had_prefix = true;
    }
  }
  if (base == 0) {
    base = 10;
    // leading zeros are not allowed for base 0 decimals, except all zeros
    if (i < s.size() && s[i] == '0') {
      for (std::size_t k = i; k < s.size(); ++k)
        if (s[k] != '0' && s[k] != '_') return false;
    }
  }
  std::uint64_t v = 0;
  bool any = false;
  for (std::size_t k = i; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '_') {
      if ((!any && !had_prefix) || k + 1 >= s.size() || s[k + 1] == '_') return false;
      continue;
    }
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
      d = (c | 0x20) - 'a' + 10;
    else
      return false;
    if (d >= base) return false;
    if (v > (UINT64_MAX - static_cast<std::uint64_t>(d)) / static_cast<std::uint64_t>(base))
      throw runtime_error("integer overflow (integers are limited to 64 bits)");
    v = v * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(d);
    any = true;
  }
  if (!any) return false;
  if (v > static_cast<std::uint64_t>(INT64_MAX) + (neg ? 1 : 0))
    throw runtime_error("integer overflow (integers are limited to 64 bits)");
  out = neg ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
  return true;
}

std::int64_t float_to_int(double d) {
  if (std::isinf(d)) throw runtime_error("cannot convert float infinity to integer");
  const double t = std::trunc(d);
  if (t >= 9223372036854775808.0 || t < -9223372036854775808.0)
    throw runtime_error("integer overflow (integers are limited to 64 bits)");
  return static_cast<std::int64_t>(t);
}

}  // namespace

value f_abs(render_context&, const value& v, call_args& a) {
  no_kwargs(a, "abs");
  if (!a.args.empty()) throw runtime_error("abs() takes exactly one argument");
  if (v.is_int_like()) {
    if (v.as_int() == INT64_MIN) throw runtime_error("integer overflow (integers are limited to 64 bits)");
    return value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  if (v.is(kind::floating)) return value::floating(std::fabs(v.as_float()));
  throw runtime_error("bad operand type for abs(): " + py_str_repr(type_name(v)));
}

value f_float(render_context&, const value& v, call_args& a) {
  bound_args b("do_float", a, {"default"});
  const value dflt = b.get_or(0, value::floating(0.0));
  if (v.is_undefined()) raise_undefined(v);
  if (v.is_number()) return value::floating(v.as_float());
  if (v.is_string()) {
    double d;
    if (parse_py_float(v.str(), d)) return value::floating(d);
  }
  return dflt;
}

value f_int(render_context&, const value& v, call_args& a) {
  bound_args b("do_int", a, {"default", "base"});
  const value dflt = b.get_or(0, value::integer(0));
  const value base = b.get_or(1, value::integer(10));
  if (v.is_undefined()) raise_undefined(v);
  if (v.is_string()) {
    std::int64_t i;
    if (base.is_int_like() && parse_py_int(v.str(), base.as_int(), i)) return value::integer(i);
    double d;
    if (parse_py_float(v.str(), d)) {
      if (std::isnan(d)) return dflt;
      return value::integer(float_to_int(d));
    }
    return dflt;
  }
  if (v.is_int_like()) return value::integer(v.as_int());
  if (v.is(kind::floating)) {
    if (std::isnan(v.as_float())) return dflt;
    return value::integer(float_to_int(v.as_float()));
  }
  return dflt;
}

value f_round(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_round", a, {"precision", "method"});
  const std::int64_t precision = b.has(0) ? int_arg(b.get(0)) : 0;
  std::string method = "common";
  if (b.has(1)) method = b.get(1).is_string() ? b.get(1).str() : "";
  if (method != "common" && method != "ceil" && method != "floor")
    throw runtime_error("method must be common, ceil or floor");
  if (v.is_undefined()) throw runtime_error("type Undefined doesn't define __round__ method");
  if (!v.is_number()) throw runtime_error("type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_int_like()) {
      if (precision >= 0) return value::integer(v.as_int());
      double p = std::pow(10.0, static_cast<double>(-precision));
      return value::integer(static_cast<std::int64_t>(std::nearbyint(static_cast<double>(v.as_int()) / p) * p));
    }
    const double x = v.as_float();
    if (!std::isfinite(x)) return v;
    if (precision > 300) return v;
    if (precision >= 0) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), x);
      return value::floating(std::strtod(buf, nullptr));
    }
    const double p = std::pow(10.0, static_cast<double>(-precision));
    return value::floating(std::nearbyint(x / p) * p);
  }
  const double p = std::pow(10.0, static_cast<double>(precision));
  const double y = v.as_float() * p;
  const double r = method == "ceil" ? std::ceil(y) : std::floor(y);
  return value::floating(r / p);
}

}  // namespace spate::jinja::filters_detail
