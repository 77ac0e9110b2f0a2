#include "server/jinja_builtins.h"

#include <algorithm>
#include <chrono>
#include <clocale>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <locale.h>
#include <unordered_set>

#include "server/jinja_args.h"
#include "server/jinja_context.h"
#include "server/jinja_error.h"
#include "server/jinja_format.h"
#include "server/jinja_ops.h"
#include "server/jinja_pystr.h"
#include "server/jinja_tojson.h"
#include "server/jinja_unicode.h"

namespace spate::jinja {
namespace {

// ---------------------------------------------------------------------------------------------
// Helpers

value make_str(render_context& ctx, std::string s, bool markup = false) {
  ctx.check_string(s.size());
  ctx.charge(s.size());
  return value::string(std::move(s), markup);
}

// markupsafe.soft_str: strings (and Markup) unchanged, anything else str().
value soft_str(render_context& ctx, const value& v) {
  if (v.is_string()) return v;
  return make_str(ctx, to_str(v, ctx));
}

value ignore_case(render_context& ctx, const value& v) {
  if (v.is_string()) return value::string(unicode::lower(v.str()), v.is_markup());
  return v;
}

// A lazy generator; `body` runs on each pull (the first pull runs the filter's set-up).
value make_generator(std::string type_name, int depth, std::function<bool(value&)> body) {
  if (depth > k_max_value_depth) throw runtime_error("too many nested generators");
  auto g = std::make_shared<gen_obj>();
  g->type_name = std::move(type_name);
  g->depth = depth;
  g->pull = std::move(body);
  return value::from_object(kind::generator, std::move(g));
}

int gen_depth(const value& src) { return (src.is(kind::generator) ? src.depth() : 0) + 1; }

const std::string k_dot = ".";
const std::string k_comma = ",";

// jinja2.filters.make_attrgetter: "a.b.0" looked up with environment.getitem.
struct attr_path {
  std::vector<value> parts;
};

attr_path prepare_attribute(const value& attribute) {
  attr_path p;
  if (attribute.is_none()) return p;
  if (!attribute.is_string()) {
    p.parts.push_back(attribute);
    return p;
  }
  for (const auto& part : pystr::split(attribute.str(), &k_dot, -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits && part.size() < 18) p.parts.push_back(value::integer(std::stoll(part)));
    else p.parts.push_back(value::string(part));
  }
  return p;
}

value apply_path(render_context& ctx, const attr_path& p, value item, const value* dflt) {
  for (const auto& part : p.parts) {
    item = get_item(ctx, item, part);
    if (dflt && !dflt->is_none() && item.is_undefined()) item = *dflt;
  }
  return item;
}

void check_kwargs_empty(const call_args& a, const char* fname) {
  if (!a.kwargs.empty())
    throw runtime_error(std::string(fname) + "() got an unexpected keyword argument " + py_str_repr(a.kwargs[0].first));
}

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
    if (c >= '0' && c <= '9') d = c - '0';
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') d = (c | 0x20) - 'a' + 10;
    else return false;
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

// ---------------------------------------------------------------------------------------------
// Filters

value f_abs(render_context&, const value& v, call_args& a) {
  check_kwargs_empty(a, "abs");
  if (!a.args.empty()) throw runtime_error("abs() takes exactly one argument");
  if (v.is_int_like()) {
    if (v.as_int() == INT64_MIN) throw runtime_error("integer overflow (integers are limited to 64 bits)");
    return value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  if (v.is(kind::floating)) return value::floating(std::fabs(v.as_float()));
  throw runtime_error("bad operand type for abs(): " + py_str_repr(type_name(v)));
}

value f_attr(render_context&, const value& v, call_args& a) {
  bound_args b("do_attr", a, {"name"});
  if (!b.has(0)) throw runtime_error("do_attr() missing 1 required positional argument: 'name'");
  if (!b.get(0).is_string()) return value::undefined_hint("attribute name must be a string");
  if (auto x = find_attribute(v, b.get(0).str())) return *x;
  return value::undefined_attr(v, b.get(0).str());
}

value f_batch(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_batch", a, {"linecount", "fill_with"});
  if (!b.has(0)) throw runtime_error("do_batch() missing 1 required positional argument: 'linecount'");
  const std::int64_t n = int_arg(b.get(0));
  const value fill = b.get_or(1, value::none());
  struct st {
    value src;
    std::unique_ptr<value_iter> it;
    bool done = false;
  };
  auto s = std::make_shared<st>();
  s->src = v;
  return make_generator("generator", gen_depth(v), [s, n, fill, &ctx](value& out) {
    if (s->done) return false;
    if (!s->it) s->it = std::make_unique<value_iter>(s->src, ctx);
    std::vector<value> tmp;
    value x;
    while (static_cast<std::int64_t>(tmp.size()) < std::max<std::int64_t>(n, 1) && s->it->next(x)) tmp.push_back(x);
    if (tmp.empty()) {
      s->done = true;
      return false;
    }
    if (static_cast<std::int64_t>(tmp.size()) < n) {
      s->done = true;
      if (!fill.is_none())
        while (static_cast<std::int64_t>(tmp.size()) < n) tmp.push_back(fill);
    }
    ctx.charge(tmp.size() * sizeof(value));
    out = value::list(std::move(tmp));
    return true;
  });
}

value f_capitalize(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_capitalize", a, {});
  const value s = soft_str(ctx, v);
  return make_str(ctx, unicode::capitalize(s.str()), s.is_markup());
}

value f_center(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_center", a, {"width"});
  const value s = soft_str(ctx, v);
  const std::int64_t width = b.has(0) ? int_arg(b.get(0)) : 80;
  if (width > 0) ctx.check_string(static_cast<std::size_t>(width));
  return make_str(ctx, pystr::pad(s.str(), width, " ", 0), s.is_markup());
}

value f_length(render_context& ctx, const value& v, call_args& a) {
  check_kwargs_empty(a, "len");
  if (!a.args.empty()) throw runtime_error("len() takes exactly one argument");
  return value::integer(py_len(v, ctx));
}

value f_default(render_context&, const value& v, call_args& a) {
  bound_args b("do_default", a, {"default_value", "boolean"});
  const bool boolean = b.has(1) && truthy(b.get(1));
  if (v.is_undefined() || (boolean && !truthy(v))) return b.get_or(0, value::string(""));
  return v;
}

value f_dictsort(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_dictsort", a, {"case_sensitive", "by", "reverse"});
  const bool case_sensitive = b.has(0) && truthy(b.get(0));
  int pos = 0;
  if (b.has(1)) {
    const value& by = b.get(1);
    if (by.is_string() && by.str() == "key") pos = 0;
    else if (by.is_string() && by.str() == "value") pos = 1;
    else throw runtime_error("You can only sort by either \"key\" or \"value\"");
  }
  const bool reverse = b.has(2) && truthy(b.get(2));
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is(kind::dict)) throw runtime_error(py_str_repr(type_name(v)) + " object has no attribute 'items'");
  std::vector<std::pair<value, value>> items;  // (sort key, tuple)
  for (const auto& [k, x] : v.dict_ref().items) {
    value key = pos == 0 ? k : x;
    if (!case_sensitive) key = ignore_case(ctx, key);
    items.emplace_back(std::move(key), value::tuple({k, x}));
  }
  std::stable_sort(items.begin(), items.end(), [&](const auto& l, const auto& r) {
    return reverse ? py_less(r.first, l.first, ctx) : py_less(l.first, r.first, ctx);
  });
  std::vector<value> out;
  for (auto& [k, t] : items) out.push_back(std::move(t));
  ctx.charge(out.size() * sizeof(value) * 3);
  return value::list(std::move(out));
}

value f_escape(render_context& ctx, const value& v, call_args& a) {
  bound_args b("escape", a, {});
  return markup_escape(ctx, v);
}

value f_forceescape(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_forceescape", a, {});
  return make_str(ctx, pystr::html_escape(to_str(v, ctx)), true);
}

value f_first(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_first", a, {});
  value_iter it(v, ctx);
  value x;
  if (it.next(x)) return x;
  return value::undefined_hint("No first item, sequence was empty.");
}

value f_last(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_last", a, {});
  switch (v.type()) {
    case kind::list:
    case kind::tuple:
    case kind::string:
    case kind::dict:
    case kind::dict_view:
    case kind::range: {
      value last;
      bool any = false;
      if (v.is_seq()) {
        if (!v.seq().items.empty()) return v.seq().items.back();
      } else {
        value_iter it(v, ctx);
        value x;
        while (it.next(x)) {
          last = x;
          any = true;
        }
        if (any) return last;
      }
      return value::undefined_hint("No last item, sequence was empty.");
    }
    case kind::undefined:
      return value::undefined_hint("No last item, sequence was empty.");
    default:
      throw runtime_error(py_str_repr(type_name(v)) + " object is not reversible");
  }
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

value f_format(render_context& ctx, const value& v, call_args& a) {
  if (!a.args.empty() && !a.kwargs.empty())
    throw runtime_error("can't handle positional and keyword arguments at the same time");
  const value s = soft_str(ctx, v);
  value args;
  if (!a.kwargs.empty()) {
    auto d = std::make_shared<dict_obj>();
    for (auto& [k, x] : a.kwargs) d->set(value::string(k), x);
    args = value::dict(std::move(d));
  } else {
    args = value::tuple(a.args);
  }
  return make_str(ctx, percent_format(ctx, s.str(), args, s.is_markup()), s.is_markup());
}

value f_indent(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_indent", a, {"width", "first", "blank"});
  std::string indention = "    ";
  if (b.has(0)) {
    const value& w = b.get(0);
    if (w.is_string()) {
      indention = w.str();
    } else {
      const std::int64_t n = int_arg(w);
      if (n > 0) ctx.check_string(static_cast<std::size_t>(n));
      indention.assign(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)), ' ');
    }
  }
  const bool first = b.has(1) && truthy(b.get(1));
  const bool blank = b.has(2) && truthy(b.get(2));
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is_string()) throw runtime_error("unsupported operand type(s) for +=: " + py_str_repr(type_name(v)) + " and 'str'");
  const std::vector<std::string> lines = pystr::splitlines(v.str() + "\n", false);
  std::string rv;
  if (blank) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
      ctx.check_string(rv.size());
    }
  }
  if (first) rv = indention + rv;
  return make_str(ctx, std::move(rv), v.is_markup());
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

value f_items(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_items", a, {});
  struct st {
    value src;
    std::size_t pos = 0;
    bool started = false;
  };
  auto s = std::make_shared<st>();
  s->src = v;
  return make_generator("generator", 1, [s](value& out) {
    if (!s->started) {
      s->started = true;
      if (!s->src.is_undefined() && !s->src.is(kind::dict)) throw runtime_error("Can only get item pairs from a mapping.");
    }
    if (s->src.is_undefined()) return false;
    const auto& items = s->src.dict_ref().items;
    if (s->pos >= items.size()) return false;
    const auto& [k, x] = items[s->pos++];
    out = value::tuple({k, x});
    return true;
  });
}

value f_join(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_join", a, {"d", "attribute"});
  const std::string sep = b.has(0) ? to_str(b.get(0), ctx) : std::string();
  attr_path path;
  const bool use_attr = b.has(1) && !b.get(1).is_none();
  if (use_attr) path = prepare_attribute(b.get(1));
  std::string out;
  value_iter it(v, ctx);
  value x;
  bool first = true;
  while (it.next(x)) {
    if (!first) out += sep;
    first = false;
    if (use_attr) x = apply_path(ctx, path, x, nullptr);
    out += to_str(x, ctx);
    ctx.check_string(out.size());
  }
  return make_str(ctx, std::move(out));
}

value f_list(render_context& ctx, const value& v, call_args& a) {
  bound_args b("list", a, {});
  std::vector<value> items = to_vector(v, ctx);
  ctx.charge(items.size() * sizeof(value));
  return value::list(std::move(items));
}

value f_lower(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_lower", a, {});
  const value s = soft_str(ctx, v);
  return make_str(ctx, unicode::lower(s.str()), s.is_markup());
}

value f_upper(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_upper", a, {});
  const value s = soft_str(ctx, v);
  return make_str(ctx, unicode::upper(s.str()), s.is_markup());
}

value call_filter_by_name(render_context& ctx, const value& name, const value& input, call_args args) {
  if (!name.is_string()) throw runtime_error("No filter named " + to_repr(name, ctx) + ".");
  filter_fn f = find_filter(name.str());
  if (!f) throw runtime_error("No filter named " + py_str_repr(name.str()) + ".");
  ctx.step();
  return f(ctx, input, args);
}

bool call_test_by_name(render_context& ctx, const value& name, const value& input, call_args args) {
  if (!name.is_string()) throw runtime_error("No test named " + to_repr(name, ctx) + ".");
  test_fn t = find_test(name.str());
  if (!t) throw runtime_error("No test named " + py_str_repr(name.str()) + ".");
  ctx.step();
  return t(ctx, input, args);
}

value f_map(render_context& ctx, const value& v, call_args& a) {
  struct st {
    value src;
    call_args args;
    std::unique_ptr<value_iter> it;
    bool started = false;
    bool by_attr = false;
    attr_path path;
    value dflt;
    value name;
  };
  auto s = std::make_shared<st>();
  s->src = v;
  s->args = a;
  return make_generator("generator", gen_depth(v), [s, &ctx](value& out) {
    if (!s->started) {
      s->started = true;
      if (!truthy(s->src)) return false;
      auto& args = s->args;
      bool has_attr = false;
      for (auto& [k, x] : args.kwargs) has_attr |= k == "attribute";
      if (args.args.empty() && has_attr) {
        s->by_attr = true;
        s->dflt = value::none();
        for (auto& [k, x] : args.kwargs) {
          if (k == "attribute") s->path = prepare_attribute(x);
          else if (k == "default") s->dflt = x;
          else throw runtime_error("Unexpected keyword argument " + py_str_repr(k));
        }
      } else {
        if (args.args.empty()) throw runtime_error("map requires a filter argument");
        s->name = args.args[0];
        args.args.erase(args.args.begin());
      }
      s->it = std::make_unique<value_iter>(s->src, ctx);
    }
    if (!s->it) return false;
    value x;
    if (!s->it->next(x)) return false;
    out = s->by_attr ? apply_path(ctx, s->path, x, &s->dflt) : call_filter_by_name(ctx, s->name, x, s->args);
    return true;
  });
}

value select_impl(render_context& ctx, const value& v, call_args& a, bool keep, bool lookup_attr) {
  struct st {
    value src;
    call_args args;
    std::unique_ptr<value_iter> it;
    bool started = false;
    attr_path path;
    bool has_test = false;
    value test;
  };
  auto s = std::make_shared<st>();
  s->src = v;
  s->args = a;
  return make_generator("generator", gen_depth(v), [s, keep, lookup_attr, &ctx](value& out) {
    if (!s->started) {
      s->started = true;
      if (!truthy(s->src)) return false;
      auto& args = s->args;
      std::size_t off = 0;
      if (lookup_attr) {
        if (args.args.empty()) throw runtime_error("Missing parameter for attribute name");
        s->path = prepare_attribute(args.args[0]);
        off = 1;
      }
      if (args.args.size() > off) {
        s->has_test = true;
        s->test = args.args[off];
        args.args.erase(args.args.begin(), args.args.begin() + static_cast<std::ptrdiff_t>(off + 1));
      }
      s->it = std::make_unique<value_iter>(s->src, ctx);
    }
    if (!s->it) return false;
    value x;
    while (s->it->next(x)) {
      const value probe = lookup_attr ? apply_path(ctx, s->path, x, nullptr) : x;
      const bool ok = s->has_test ? call_test_by_name(ctx, s->test, probe, s->args) : truthy(probe);
      if (ok == keep) {
        out = x;
        return true;
      }
    }
    return false;
  });
}

value f_select(render_context& ctx, const value& v, call_args& a) { return select_impl(ctx, v, a, true, false); }
value f_reject(render_context& ctx, const value& v, call_args& a) { return select_impl(ctx, v, a, false, false); }
value f_selectattr(render_context& ctx, const value& v, call_args& a) { return select_impl(ctx, v, a, true, true); }
value f_rejectattr(render_context& ctx, const value& v, call_args& a) { return select_impl(ctx, v, a, false, true); }

value min_max(render_context& ctx, const value& v, call_args& a, bool is_max) {
  bound_args b(is_max ? "do_max" : "do_min", a, {"case_sensitive", "attribute"});
  const bool case_sensitive = b.has(0) && truthy(b.get(0));
  attr_path path;
  if (b.has(1)) path = prepare_attribute(b.get(1));
  value_iter it(v, ctx);
  value best, x;
  if (!it.next(best)) return value::undefined_hint("No aggregated item, sequence was empty.");
  auto key = [&](const value& item) {
    value k = apply_path(ctx, path, item, nullptr);
    return case_sensitive ? k : ignore_case(ctx, k);
  };
  value best_key = key(best);
  while (it.next(x)) {
    value k = key(x);
    if (is_max ? py_less(best_key, k, ctx) : py_less(k, best_key, ctx)) {
      best = x;
      best_key = k;
    }
  }
  return best;
}
value f_max(render_context& ctx, const value& v, call_args& a) { return min_max(ctx, v, a, true); }
value f_min(render_context& ctx, const value& v, call_args& a) { return min_max(ctx, v, a, false); }

value f_replace(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_replace", a, {"old", "new", "count"});
  if (!b.has(1)) throw runtime_error("do_replace() missing required positional arguments: 'old' and 'new'");
  const std::string s = to_str(v, ctx);
  const std::string old = to_str(b.get(0), ctx);
  const std::string repl = to_str(b.get(1), ctx);
  const std::int64_t count = b.has(2) && !b.get(2).is_none() ? int_arg(b.get(2)) : -1;
  if (repl.size() > old.size()) {
    const std::size_t n = old.empty() ? unicode::count_code_points(s) + 1
                                      : static_cast<std::size_t>(pystr::count(s, old, std::nullopt, std::nullopt));
    ctx.check_string(s.size() + n * (repl.size() - old.size()));
  }
  return make_str(ctx, pystr::replace(s, old, repl, count));
}

value f_reverse(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_reverse", a, {});
  switch (v.type()) {
    case kind::string: {
      const auto& d = v.str_data();
      return make_str(ctx, pystr::slice(d.s, d.ascii, static_cast<std::int64_t>(d.cp_len) - 1, -1, -1), v.is_markup());
    }
    case kind::list:
    case kind::tuple:
    case kind::dict:
    case kind::dict_view:
    case kind::range:
    case kind::undefined: {
      // A reverse iterator over the (immutable or live) sequence.
      auto items = std::make_shared<std::vector<value>>(to_vector(v, ctx));
      auto pos = std::make_shared<std::size_t>(items->size());
      const char* name = v.is(kind::list) ? "list_reverseiterator"
                         : v.is(kind::dict) ? "dict_reversekeyiterator"
                         : v.is(kind::range) ? "range_iterator"
                         : v.is_undefined() ? "reversed" : "reversed";
      return make_generator(name, 1, [items, pos](value& out) {
        if (*pos == 0) return false;
        out = (*items)[--*pos];
        return true;
      });
    }
    default: {
      if (!v.is(kind::generator)) throw runtime_error("argument must be iterable");
      std::vector<value> items = to_vector(v, ctx);
      std::reverse(items.begin(), items.end());
      return value::list(std::move(items));
    }
  }
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

value f_safe(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_mark_safe", a, {});
  if (v.is_markup()) return v;
  return make_str(ctx, to_str(v, ctx), true);
}

value f_slice(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_slice", a, {"slices", "fill_with"});
  if (!b.has(0)) throw runtime_error("do_slice() missing 1 required positional argument: 'slices'");
  const std::int64_t slices = int_arg(b.get(0));
  const value fill = b.get_or(1, value::none());
  struct st {
    value src;
    std::vector<value> seq;
    bool started = false;
    std::int64_t k = 0, offset = 0;
  };
  auto s = std::make_shared<st>();
  s->src = v;
  return make_generator("generator", gen_depth(v), [s, slices, fill, &ctx](value& out) {
    if (!s->started) {
      s->started = true;
      s->seq = to_vector(s->src, ctx);
      if (slices == 0) throw runtime_error("integer division or modulo by zero");
    }
    if (s->k >= slices) return false;
    const auto length = static_cast<std::int64_t>(s->seq.size());
    const std::int64_t per = length / slices;
    const std::int64_t extra = length % slices;
    const std::int64_t start = s->offset + s->k * per;
    if (s->k < extra) ++s->offset;
    const std::int64_t end = s->offset + (s->k + 1) * per;
    std::vector<value> tmp;
    for (std::int64_t i = std::max<std::int64_t>(start, 0); i < std::min(end, length); ++i)
      tmp.push_back(s->seq[static_cast<std::size_t>(i)]);
    if (!fill.is_none() && s->k >= extra) tmp.push_back(fill);
    ++s->k;
    out = value::list(std::move(tmp));
    return true;
  });
}

value f_sort(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_sort", a, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = b.has(0) && truthy(b.get(0));
  const bool case_sensitive = b.has(1) && truthy(b.get(1));
  std::vector<attr_path> paths;
  if (b.has(2) && b.get(2).is_string()) {
    for (const auto& part : pystr::split(b.get(2).str(), &k_comma, -1))
      paths.push_back(prepare_attribute(value::string(part)));
  } else {
    paths.push_back(prepare_attribute(b.get_or(2, value::none())));
  }
  std::vector<value> items = to_vector(v, ctx);
  std::vector<std::pair<value, std::size_t>> keyed;
  keyed.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::vector<value> key;
    for (const auto& p : paths) {
      value k = apply_path(ctx, p, items[i], nullptr);
      key.push_back(case_sensitive ? k : ignore_case(ctx, k));
    }
    keyed.emplace_back(value::list(std::move(key)), i);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& l, const auto& r) {
    return reverse ? py_less(r.first, l.first, ctx) : py_less(l.first, r.first, ctx);
  });
  std::vector<value> out;
  out.reserve(items.size());
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  ctx.charge(out.size() * sizeof(value) * 2);
  return value::list(std::move(out));
}

value f_string(render_context& ctx, const value& v, call_args& a) {
  bound_args b("soft_str", a, {});
  return soft_str(ctx, v);
}

value f_sum(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_sum", a, {"attribute", "start"});
  attr_path path;
  const bool use_attr = b.has(0) && !b.get(0).is_none();
  if (use_attr) path = prepare_attribute(b.get(0));
  value total = b.get_or(1, value::integer(0));
  if (total.is_string()) throw runtime_error("sum() can't sum strings [use ''.join(seq) instead]");
  value_iter it(v, ctx);
  value x;
  while (it.next(x)) total = binary_op(ctx, "+", total, use_attr ? apply_path(ctx, path, x, nullptr) : x);
  return total;
}

bool is_title_split(char32_t c) {
  return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
}

value f_title(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_title", a, {});
  const std::string s = soft_str(ctx, v).str();
  std::string out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    // One run of separators or of non-separators: first code point upper, rest lower.
    std::size_t q = pos;
    const bool sep = is_title_split(unicode::decode(s, q));
    std::size_t end = q;
    while (end < s.size()) {
      std::size_t r = end;
      if (is_title_split(unicode::decode(s, r)) != sep) break;
      end = r;
    }
    out += unicode::upper(s.substr(pos, q - pos));
    out += unicode::lower(s.substr(q, end - q));
    pos = end;
  }
  return make_str(ctx, std::move(out));
}

value f_tojson(render_context& ctx, const value& v, call_args& a) {
  bound_args b("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  json_options o;
  o.ensure_ascii = b.has(0) && truthy(b.get(0));
  if (b.has(1) && !b.get(1).is_none()) {
    const value& ind = b.get(1);
    if (ind.is_string()) {
      o.indent = ind.str();
    } else {
      const std::int64_t n = int_arg(ind);
      if (n > 1024) throw limit_error("tojson indent too large");
      o.indent = std::string(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)), ' ');
    }
    o.item_sep = ",";
  }
  if (b.has(2) && !b.get(2).is_none()) {
    const value& sep = b.get(2);
    if (!sep.is_seq() || sep.seq().items.size() != 2)
      throw runtime_error("separators must be a (item_separator, key_separator) pair");
    o.item_sep = str_arg(sep.seq().items[0], "separator");
    o.key_sep = str_arg(sep.seq().items[1], "separator");
  }
  o.sort_keys = b.has(3) && truthy(b.get(3));
  return value::string(to_json(ctx, v, o));
}

value f_trim(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_trim", a, {"chars"});
  const value s = soft_str(ctx, v);
  if (b.has(0) && !b.get(0).is_none()) {
    std::string chars = str_arg(b.get(0), "strip arg");
    if (s.is_markup() && !b.get(0).is_markup()) chars = pystr::html_escape(chars);
    return make_str(ctx, pystr::strip(s.str(), &chars, true, true), s.is_markup());
  }
  return make_str(ctx, pystr::strip(s.str(), nullptr, true, true), s.is_markup());
}

value f_truncate(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_truncate", a, {"length", "killwords", "end", "leeway"});
  const std::int64_t length = b.has(0) ? int_arg(b.get(0)) : 255;
  const bool killwords = b.has(1) && truthy(b.get(1));
  const std::string end = b.has(2) ? str_arg(b.get(2), "end") : std::string("...");
  const std::int64_t leeway = b.has(3) && !b.get(3).is_none() ? int_arg(b.get(3)) : 5;
  const auto end_len = static_cast<std::int64_t>(unicode::count_code_points(end));
  if (length < end_len) throw runtime_error("expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (leeway < 0) throw runtime_error("expected leeway >= 0, got " + std::to_string(leeway));
  if (py_len(v, ctx) <= length + leeway) return v;
  if (!v.is_string()) throw runtime_error("truncate: unsupported operand type " + py_str_repr(type_name(v)));
  const auto& d = v.str_data();
  std::int64_t lo, hi;
  pystr::slice_indices(static_cast<std::int64_t>(d.cp_len), std::nullopt, length - end_len, 1, lo, hi);
  std::string head = pystr::slice(d.s, d.ascii, lo, hi, 1);
  if (!killwords) {
    const std::string sp = " ";
    head = pystr::rsplit(head, &sp, 1)[0];
  }
  return make_str(ctx, head + end, v.is_markup());
}

value f_unique(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_unique", a, {"case_sensitive", "attribute"});
  const bool case_sensitive = b.has(0) && truthy(b.get(0));
  struct st {
    value src;
    attr_path path;
    std::unique_ptr<value_iter> it;
    std::unordered_set<std::string> seen_fast;
    std::vector<value> seen_slow;
  };
  auto s = std::make_shared<st>();
  s->src = v;
  if (b.has(1)) s->path = prepare_attribute(b.get(1));
  return make_generator("generator", gen_depth(v), [s, case_sensitive, &ctx](value& out) {
    if (!s->it) s->it = std::make_unique<value_iter>(s->src, ctx);
    value x;
    while (s->it->next(x)) {
      value key = apply_path(ctx, s->path, x, nullptr);
      if (!case_sensitive) key = ignore_case(ctx, key);
      if (!is_hashable(key)) throw runtime_error("unhashable type: " + py_str_repr(type_name(key)));
      std::string fast;
      if (key.is_string()) fast = "s" + key.str();
      else if (key.is_int_like()) fast = "n" + std::to_string(key.as_int());
      else if (key.is(kind::floating) && std::floor(key.as_float()) == key.as_float() && std::fabs(key.as_float()) < 9e18)
        fast = "n" + std::to_string(static_cast<std::int64_t>(key.as_float()));
      else if (key.is_none()) fast = "z";
      if (!fast.empty()) {
        if (!s->seen_fast.insert(fast).second) continue;
      } else {
        bool dup = false;
        for (const auto& k : s->seen_slow) dup = dup || py_equal(k, key);
        if (dup) continue;
        s->seen_slow.push_back(key);
      }
      out = x;
      return true;
    }
    return false;
  });
}

value f_wordcount(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_wordcount", a, {});
  const std::string s = soft_str(ctx, v).str();
  std::int64_t n = 0;
  bool in_word = false;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = unicode::decode(s, pos);
    const bool w = c < 0x80 ? ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9') || c == '_'
                            : !unicode::is_space(c) && unicode::is_printable(c) && !(c >= 0x2000 && c <= 0x206F) &&
                                  !(c >= 0x3000 && c <= 0x303F);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return value::integer(n);
}

struct filter_entry {
  const char* name;
  filter_fn fn;
};

constexpr filter_entry k_filters[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"batch", f_batch}, {"capitalize", f_capitalize},
    {"center", f_center}, {"count", f_length}, {"d", f_default}, {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape}, {"escape", f_escape}, {"first", f_first},
    {"float", f_float}, {"forceescape", f_forceescape}, {"format", f_format}, {"indent", f_indent},
    {"int", f_int}, {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length},
    {"list", f_list}, {"lower", f_lower}, {"map", f_map}, {"max", f_max}, {"min", f_min},
    {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
    {"round", f_round}, {"safe", f_safe}, {"select", f_select}, {"selectattr", f_selectattr},
    {"slice", f_slice}, {"sort", f_sort}, {"string", f_string}, {"sum", f_sum}, {"title", f_title},
    {"tojson", f_tojson}, {"trim", f_trim}, {"truncate", f_truncate}, {"unique", f_unique},
    {"upper", f_upper}, {"wordcount", f_wordcount},
};

// ---------------------------------------------------------------------------------------------
// Tests

const value& one_arg(call_args& a, const char* name) {
  check_kwargs_empty(a, name);
  if (a.args.size() != 1)
    throw runtime_error(std::string(name) + "() takes 2 positional arguments but " + std::to_string(a.args.size() + 1) +
                        " were given");
  return a.args[0];
}
void no_args(call_args& a, const char* name) {
  check_kwargs_empty(a, name);
  if (!a.args.empty())
    throw runtime_error(std::string(name) + "() takes 1 positional argument but " + std::to_string(a.args.size() + 1) +
                        " were given");
}

bool t_odd(render_context& ctx, const value& v, call_args& a) {
  no_args(a, "test_odd");
  return py_equal(binary_op(ctx, "%", v, value::integer(2)), value::integer(1));
}
bool t_even(render_context& ctx, const value& v, call_args& a) {
  no_args(a, "test_even");
  return py_equal(binary_op(ctx, "%", v, value::integer(2)), value::integer(0));
}
bool t_divisibleby(render_context& ctx, const value& v, call_args& a) {
  return py_equal(binary_op(ctx, "%", v, one_arg(a, "test_divisibleby")), value::integer(0));
}
bool t_defined(render_context&, const value& v, call_args& a) { no_args(a, "test_defined"); return !v.is_undefined(); }
bool t_undefined(render_context&, const value& v, call_args& a) { no_args(a, "test_undefined"); return v.is_undefined(); }
bool t_filter(render_context&, const value& v, call_args& a) {
  no_args(a, "test_filter");
  return v.is_string() && find_filter(v.str()) != nullptr;
}
bool t_test(render_context&, const value& v, call_args& a) {
  no_args(a, "test_test");
  return v.is_string() && find_test(v.str()) != nullptr;
}
bool t_none(render_context&, const value& v, call_args& a) { no_args(a, "test_none"); return v.is_none(); }
bool t_boolean(render_context&, const value& v, call_args& a) { no_args(a, "test_boolean"); return v.is(kind::boolean); }
bool t_false(render_context&, const value& v, call_args& a) { no_args(a, "test_false"); return v.is(kind::boolean) && !v.as_bool(); }
bool t_true(render_context&, const value& v, call_args& a) { no_args(a, "test_true"); return v.is(kind::boolean) && v.as_bool(); }
bool t_integer(render_context&, const value& v, call_args& a) { no_args(a, "test_integer"); return v.is(kind::integer); }
bool t_float(render_context&, const value& v, call_args& a) { no_args(a, "test_float"); return v.is(kind::floating); }
bool t_lower(render_context& ctx, const value& v, call_args& a) {
  no_args(a, "test_lower");
  return unicode::islower(to_str(v, ctx));
}
bool t_upper(render_context& ctx, const value& v, call_args& a) {
  no_args(a, "test_upper");
  return unicode::isupper(to_str(v, ctx));
}
bool t_string(render_context&, const value& v, call_args& a) { no_args(a, "test_string"); return v.is_string(); }
bool t_mapping(render_context&, const value& v, call_args& a) { no_args(a, "test_mapping"); return v.is(kind::dict); }
bool t_number(render_context&, const value& v, call_args& a) { no_args(a, "test_number"); return v.is_number(); }
bool t_sequence(render_context&, const value& v, call_args& a) {
  no_args(a, "test_sequence");
  switch (v.type()) {
    // Undefined has __len__ and (a failing) __getitem__, so Python counts it as a sequence.
    case kind::string: case kind::list: case kind::tuple: case kind::dict: case kind::range: case kind::undefined:
      return true;
    default: return false;
  }
}
bool t_iterable(render_context&, const value& v, call_args& a) {
  no_args(a, "test_iterable");
  switch (v.type()) {
    case kind::string: case kind::list: case kind::tuple: case kind::dict: case kind::dict_view:
    case kind::range: case kind::generator: case kind::undefined: case kind::loop:
      return true;
    default: return false;
  }
}
bool t_callable(render_context&, const value& v, call_args& a) {
  no_args(a, "callable");
  // Undefined defines __call__ (to raise), so Python's callable() is true for it.
  return v.is(kind::macro) || v.is(kind::builtin) || v.is(kind::loop) || v.is_undefined();
}
bool t_sameas(render_context&, const value& v, call_args& a) {
  const value& o = one_arg(a, "test_sameas");
  if (v.type() != o.type()) return false;
  switch (v.type()) {
    case kind::none: return true;
    case kind::undefined: return v.same_object(o) || (!v.ptr() && !o.ptr());
    case kind::boolean: return v.as_bool() == o.as_bool();
    case kind::integer: return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case kind::string: return v.same_object(o) || (v.is_markup() == o.is_markup() && v.str() == o.str());
    default: return v.same_object(o);
  }
}
bool t_escaped(render_context&, const value& v, call_args& a) { no_args(a, "test_escaped"); return v.is_markup(); }
bool t_in(render_context& ctx, const value& v, call_args& a) { return contains(ctx, one_arg(a, "test_in"), v); }
bool t_eq(render_context& ctx, const value& v, call_args& a) { return compare_op(ctx, "==", v, one_arg(a, "eq")); }
bool t_ne(render_context& ctx, const value& v, call_args& a) { return compare_op(ctx, "!=", v, one_arg(a, "ne")); }
bool t_gt(render_context& ctx, const value& v, call_args& a) { return compare_op(ctx, ">", v, one_arg(a, "gt")); }
bool t_ge(render_context& ctx, const value& v, call_args& a) { return compare_op(ctx, ">=", v, one_arg(a, "ge")); }
bool t_lt(render_context& ctx, const value& v, call_args& a) { return compare_op(ctx, "<", v, one_arg(a, "lt")); }
bool t_le(render_context& ctx, const value& v, call_args& a) { return compare_op(ctx, "<=", v, one_arg(a, "le")); }

struct test_entry {
  const char* name;
  test_fn fn;
};

constexpr test_entry k_tests[] = {
    {"odd", t_odd}, {"even", t_even}, {"divisibleby", t_divisibleby}, {"defined", t_defined},
    {"undefined", t_undefined}, {"filter", t_filter}, {"test", t_test}, {"none", t_none},
    {"boolean", t_boolean}, {"false", t_false}, {"true", t_true}, {"integer", t_integer},
    {"float", t_float}, {"lower", t_lower}, {"upper", t_upper}, {"string", t_string},
    {"mapping", t_mapping}, {"number", t_number}, {"sequence", t_sequence}, {"iterable", t_iterable},
    {"callable", t_callable}, {"sameas", t_sameas}, {"escaped", t_escaped}, {"in", t_in},
    {"==", t_eq}, {"eq", t_eq}, {"equalto", t_eq}, {"!=", t_ne}, {"ne", t_ne}, {">", t_gt},
    {"gt", t_gt}, {"greaterthan", t_gt}, {"ge", t_ge}, {">=", t_ge}, {"<", t_lt}, {"lt", t_lt},
    {"lessthan", t_lt}, {"<=", t_le}, {"le", t_le},
};

// ---------------------------------------------------------------------------------------------
// Globals

value g_range(render_context& ctx, const value&, call_args& a) {
  check_kwargs_empty(a, "range");
  if (a.args.empty()) throw runtime_error("range expected at least 1 argument, got 0");
  if (a.args.size() > 3) throw runtime_error("range expected at most 3 arguments, got " + std::to_string(a.args.size()));
  auto r = std::make_shared<range_obj>();
  r->start = 0;
  r->step = 1;
  if (a.args.size() == 1) {
    r->stop = int_arg(a.args[0]);
  } else {
    r->start = int_arg(a.args[0]);
    r->stop = int_arg(a.args[1]);
    if (a.args.size() == 3) r->step = int_arg(a.args[2]);
  }
  if (r->step == 0) throw runtime_error("range() arg 3 must not be zero");
  if (r->size() > 100000)
    throw runtime_error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  return value::from_object(kind::range, std::move(r));
}

// dict(*args, **kwargs) entries.
std::vector<std::pair<value, value>> dict_entries(render_context& ctx, call_args& a, const char* name) {
  if (a.args.size() > 1)
    throw runtime_error(std::string(name) + " expected at most 1 argument, got " + std::to_string(a.args.size()));
  std::vector<std::pair<value, value>> out;
  if (!a.args.empty()) {
    const value& src = a.args[0];
    if (src.is(kind::dict)) {
      for (const auto& kv : src.dict_ref().items) out.push_back(kv);
    } else {
      value_iter it(src, ctx);
      value x;
      std::size_t i = 0;
      while (it.next(x)) {
        std::vector<value> pair = to_vector(x, ctx);
        if (pair.size() != 2)
          throw runtime_error("dictionary update sequence element #" + std::to_string(i) + " has length " +
                              std::to_string(pair.size()) + "; 2 is required");
        out.emplace_back(pair[0], pair[1]);
        ++i;
      }
    }
  }
  for (auto& [k, v] : a.kwargs) out.emplace_back(value::string(k), v);
  return out;
}

value g_dict(render_context& ctx, const value&, call_args& a) {
  auto d = std::make_shared<dict_obj>();
  for (auto& [k, v] : dict_entries(ctx, a, "dict")) {
    if (!is_hashable(k)) throw runtime_error("unhashable type: " + py_str_repr(type_name(k)));
    d->set(k, v);
  }
  ctx.charge(d->items.size() * 2 * sizeof(value));
  return value::dict(std::move(d));
}

value g_namespace(render_context& ctx, const value&, call_args& a) {
  auto ns = std::make_shared<ns_obj>();
  for (auto& [k, v] : dict_entries(ctx, a, "Namespace")) {
    if (!k.is_string()) throw runtime_error("namespace() keys must be strings");
    ns->set(k.str(), v);
  }
  ctx.track(ns);
  return value::from_object(kind::namespace_, std::move(ns));
}

value g_raise_exception(render_context& ctx, const value&, call_args& a) {
  bound_args b("raise_exception", a, {"message"});
  if (!b.has(0)) throw runtime_error("raise_exception() missing 1 required positional argument: 'message'");
  throw raised_error(to_str(b.get(0), ctx));
}

value g_strftime_now(render_context& ctx, const value&, call_args& a) {
  bound_args b("strftime_now", a, {"format"});
  if (!b.has(0)) throw runtime_error("strftime_now() missing 1 required positional argument: 'format'");
  const std::string& fmt = str_arg(b.get(0), "strftime() argument 1");
  std::int64_t secs;
  std::int64_t micros = 0;
  if (ctx.now_unix_s() >= 0) {
    secs = ctx.now_unix_s();
  } else {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
    secs = us / 1000000;
    micros = us % 1000000;
  }
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  localtime_r(&t, &tm);
  tm.tm_isdst = -1;
  // datetime.strftime handles %f, %z and %Z (naive datetime: empty) itself.
  std::string f;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '%' && i + 1 < fmt.size()) {
      const char c = fmt[i + 1];
      if (c == 'f') {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%06lld", static_cast<long long>(micros));
        f += buf;
        ++i;
        continue;
      }
      if (c == 'z' || c == 'Z') {
        ++i;
        continue;
      }
      f += fmt[i];
      f += c;
      ++i;
      continue;
    }
    f += fmt[i];
  }
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(0));
  std::string out;
  for (std::size_t cap = 256; cap <= 65536 + 64 * f.size(); cap *= 4) {
    out.assign(cap, '\0');
    const std::size_t n = strftime_l(out.data(), cap, f.c_str(), &tm, c_locale);
    if (n > 0 || f.empty()) {
      out.resize(n);
      return make_str(ctx, std::move(out));
    }
  }
  return value::string("");
}

value bound_method(const char* name, builtin_fn fn, const value& self) {
  auto b = std::make_shared<builtin_obj>();
  b->name = name;
  b->fn = fn;
  b->self = self;
  b->is_method = true;
  return value::from_object(kind::builtin, std::move(b));
}

// jinja2.utils.Joiner: "" on the first call, the separator afterwards. State lives in a
// namespace object bound as the method's self.
value joiner_call(render_context&, const value& self, call_args& a) {
  bound_args b("joiner", a, {});
  auto& st = self.as<ns_obj>();
  value* used = st.find("used");
  if (!truthy(*used)) {
    *used = value::boolean(true);
    return value::string("");
  }
  return *st.find("sep");
}

value g_joiner(render_context& ctx, const value&, call_args& a) {
  bound_args b("joiner", a, {"sep"});
  auto st = std::make_shared<ns_obj>();
  st->set("sep", b.get_or(0, value::string(", ")));
  st->set("used", value::boolean(false));
  ctx.track(st);
  return bound_method("joiner", joiner_call, value::from_object(kind::namespace_, std::move(st)));
}

// jinja2.utils.Cycler, as a namespace with current / next() / reset().
value cycler_step(render_context&, const value& self, call_args& a, bool advance) {
  bound_args b(advance ? "next" : "reset", a, {});
  auto& st = self.as<ns_obj>();
  const auto& items = st.find("items")->seq().items;
  value* pos = st.find("pos");
  if (!advance) {
    *pos = value::integer(0);
    *st.find("current") = items[0];
    return value::none();
  }
  const value rv = items[static_cast<std::size_t>(pos->as_int())];
  *pos = value::integer((pos->as_int() + 1) % static_cast<std::int64_t>(items.size()));
  *st.find("current") = items[static_cast<std::size_t>(pos->as_int())];
  return rv;
}
value cycler_next(render_context& ctx, const value& self, call_args& a) { return cycler_step(ctx, self, a, true); }
value cycler_reset(render_context& ctx, const value& self, call_args& a) { return cycler_step(ctx, self, a, false); }

value g_cycler(render_context& ctx, const value&, call_args& a) {
  check_kwargs_empty(a, "Cycler");
  if (a.args.empty()) throw runtime_error("at least one item has to be provided");
  auto st = std::make_shared<ns_obj>();
  ctx.track(st);
  const value self = value::from_object(kind::namespace_, st);
  st->set("items", value::tuple(a.args));
  st->set("pos", value::integer(0));
  st->set("current", a.args[0]);
  st->set("next", bound_method("next", cycler_next, self));
  st->set("reset", bound_method("reset", cycler_reset, self));
  return self;
}

value g_lipsum(render_context&, const value&, call_args&) {
  throw runtime_error("lipsum() is not supported (it produces random text)");
}

struct global_entry {
  const char* name;
  builtin_fn fn;
};

constexpr global_entry k_globals[] = {
    {"range", g_range}, {"dict", g_dict}, {"namespace", g_namespace}, {"joiner", g_joiner},
    {"cycler", g_cycler}, {"lipsum", g_lipsum},
    {"raise_exception", g_raise_exception}, {"strftime_now", g_strftime_now},
};

}  // namespace

filter_fn find_filter(std::string_view name) {
  for (const auto& f : k_filters)
    if (name == f.name) return f.fn;
  return nullptr;
}

test_fn find_test(std::string_view name) {
  for (const auto& t : k_tests)
    if (name == t.name) return t.fn;
  return nullptr;
}

value find_global(std::string_view name) {
  for (const auto& g : k_globals) {
    if (name != g.name) continue;
    auto b = std::make_shared<builtin_obj>();
    b->name = g.name;
    b->fn = g.fn;
    return value::from_object(kind::builtin, std::move(b));
  }
  return value();
}

value call_builtin(render_context& ctx, const value& fn, call_args& args) {
  const auto& b = fn.as<builtin_obj>();
  return b.fn(ctx, b.self, args);
}

}  // namespace spate::jinja
