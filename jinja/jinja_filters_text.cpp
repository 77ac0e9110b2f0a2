// Jinja2's string filters (jinja2.filters) and transformers' tojson; registered in
// jinja_filters.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/jinja_args.h"
#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_filters_detail.h"
#include "jinja/jinja_format.h"
#include "jinja/jinja_ops.h"
#include "jinja/jinja_pystr.h"
#include "jinja/jinja_tojson.h"
#include "jinja/jinja_unicode.h"

namespace spate::jinja::filters_detail {
namespace {

bool is_title_split(char32_t c) {
  return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
}

}  // namespace

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

value f_escape(render_context& ctx, const value& v, call_args& a) {
  bound_args b("escape", a, {});
  return markup_escape(ctx, v);
}

value f_forceescape(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_forceescape", a, {});
  return make_str(ctx, pystr::html_escape(to_str(v, ctx)), true);
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
  if (!v.is_string())
    throw runtime_error("unsupported operand type(s) for +=: " + py_str_repr(type_name(v)) + " and 'str'");
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

value f_safe(render_context& ctx, const value& v, call_args& a) {
  bound_args b("do_mark_safe", a, {});
  if (v.is_markup()) return v;
  return make_str(ctx, to_str(v, ctx), true);
}

value f_string(render_context& ctx, const value& v, call_args& a) {
  bound_args b("soft_str", a, {});
  return soft_str(ctx, v);
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
  if (length < end_len)
    throw runtime_error("expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
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

}  // namespace spate::jinja::filters_detail
