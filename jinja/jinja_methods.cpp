// Methods of str / list / tuple / dict / range values (find_method in jinja_ops.h).
#include <algorithm>
#include <cstring>

#include "jinja/jinja_args.h"
#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_format.h"
#include "jinja/jinja_ops.h"
#include "jinja/jinja_pystr.h"
#include "jinja/jinja_unicode.h"

namespace spate::jinja {
namespace {

value make_str(render_context& ctx, std::string s, bool markup) {
  ctx.check_string(s.size());
  ctx.charge(s.size());
  return value::string(std::move(s), markup);
}

// For Markup methods: string arguments are escaped unless they are Markup themselves.
std::string arg_text(const value& self, const value& arg, const char* what) {
  const std::string& s = str_arg(arg, what);
  return self.is_markup() && !arg.is_markup() ? pystr::html_escape(s) : s;
}

value str_list(render_context& ctx, const std::vector<std::string>& parts, bool markup) {
  std::vector<value> out;
  out.reserve(parts.size());
  std::size_t bytes = 0;
  for (const auto& p : parts) {
    bytes += p.size() + sizeof(value);
    out.push_back(value::string(p, markup));
  }
  ctx.charge(bytes);
  return value::list(std::move(out));
}

// ----- str -----

value m_upper(render_context& ctx, const value& self, call_args& a) {
  bound_args b("upper", a, {});
  return make_str(ctx, unicode::upper(self.str()), self.is_markup());
}
value m_lower(render_context& ctx, const value& self, call_args& a) {
  bound_args b("lower", a, {});
  return make_str(ctx, unicode::lower(self.str()), self.is_markup());
}
value m_title(render_context& ctx, const value& self, call_args& a) {
  bound_args b("title", a, {});
  return make_str(ctx, unicode::title(self.str()), self.is_markup());
}
value m_capitalize(render_context& ctx, const value& self, call_args& a) {
  bound_args b("capitalize", a, {});
  return make_str(ctx, unicode::capitalize(self.str()), self.is_markup());
}
value m_swapcase(render_context& ctx, const value& self, call_args& a) {
  bound_args b("swapcase", a, {});
  return make_str(ctx, unicode::swapcase(self.str()), self.is_markup());
}

value strip_impl(render_context& ctx, const value& self, call_args& a, const char* name, bool l, bool r) {
  bound_args b(name, a, {"chars"});
  if (b.has(0) && !b.get(0).is_none()) {
    const std::string chars = arg_text(self, b.get(0), "strip arg");
    return make_str(ctx, pystr::strip(self.str(), &chars, l, r), self.is_markup());
  }
  return make_str(ctx, pystr::strip(self.str(), nullptr, l, r), self.is_markup());
}
value m_strip(render_context& ctx, const value& self, call_args& a) {
  return strip_impl(ctx, self, a, "strip", true, true);
}
value m_lstrip(render_context& ctx, const value& self, call_args& a) {
  return strip_impl(ctx, self, a, "lstrip", true, false);
}
value m_rstrip(render_context& ctx, const value& self, call_args& a) {
  return strip_impl(ctx, self, a, "rstrip", false, true);
}

value split_impl(render_context& ctx, const value& self, call_args& a, bool right) {
  bound_args b(right ? "rsplit" : "split", a, {"sep", "maxsplit"});
  const std::int64_t maxsplit = b.has(1) ? int_arg(b.get(1)) : -1;
  std::vector<std::string> parts;
  if (b.has(0) && !b.get(0).is_none()) {
    const std::string& sep = str_arg(b.get(0), "must be str or None");
    parts = right ? pystr::rsplit(self.str(), &sep, maxsplit) : pystr::split(self.str(), &sep, maxsplit);
  } else {
    parts = right ? pystr::rsplit(self.str(), nullptr, maxsplit) : pystr::split(self.str(), nullptr, maxsplit);
  }
  return str_list(ctx, parts, self.is_markup());
}
value m_split(render_context& ctx, const value& self, call_args& a) { return split_impl(ctx, self, a, false); }
value m_rsplit(render_context& ctx, const value& self, call_args& a) { return split_impl(ctx, self, a, true); }

value m_splitlines(render_context& ctx, const value& self, call_args& a) {
  bound_args b("splitlines", a, {"keepends"});
  return str_list(ctx, pystr::splitlines(self.str(), b.has(0) && truthy(b.get(0))), self.is_markup());
}

value affix_impl(render_context& ctx, const value& self, call_args& a, const char* name, bool at_end) {
  bound_args b(name, a, {"prefix", "start", "end"});
  if (!b.has(0)) throw runtime_error(std::string(name) + "() takes at least 1 argument (0 given)");
  const std::optional<std::int64_t> start = b.has(1) ? opt_int_arg(b.get(1)) : std::nullopt;
  const std::optional<std::int64_t> end = b.has(2) ? opt_int_arg(b.get(2)) : std::nullopt;
  const value& p = b.get(0);
  if (p.is_string()) return value::boolean(pystr::starts_with(self.str(), p.str(), start, end, at_end));
  if (p.is(kind::tuple)) {
    for (const auto& x : p.seq().items) {
      if (!x.is_string())
        throw runtime_error("tuple for " + std::string(name) + " must only contain str, not " + type_name(x));
      if (pystr::starts_with(self.str(), x.str(), start, end, at_end)) return value::boolean(true);
    }
    return value::boolean(false);
  }
  throw runtime_error(std::string(name) + " first arg must be str or a tuple of str, not " + type_name(p));
}
value m_startswith(render_context& ctx, const value& self, call_args& a) {
  return affix_impl(ctx, self, a, "startswith", false);
}
value m_endswith(render_context& ctx, const value& self, call_args& a) {
  return affix_impl(ctx, self, a, "endswith", true);
}

std::int64_t find_impl(const value& self, call_args& a, const char* name, bool reverse, bool is_count) {
  bound_args b(name, a, {"sub", "start", "end"});
  if (!b.has(0)) throw runtime_error(std::string(name) + "() takes at least 1 argument (0 given)");
  const std::string& sub = str_arg(b.get(0), "must be str");
  const std::optional<std::int64_t> start = b.has(1) ? opt_int_arg(b.get(1)) : std::nullopt;
  const std::optional<std::int64_t> end = b.has(2) ? opt_int_arg(b.get(2)) : std::nullopt;
  if (is_count) return pystr::count(self.str(), sub, start, end);
  return pystr::find(self.str(), sub, start, end, reverse);
}
value m_find(render_context&, const value& self, call_args& a) {
  return value::integer(find_impl(self, a, "find", false, false));
}
value m_rfind(render_context&, const value& self, call_args& a) {
  return value::integer(find_impl(self, a, "rfind", true, false));
}
value m_count(render_context&, const value& self, call_args& a) {
  return value::integer(find_impl(self, a, "count", false, true));
}
value m_index(render_context&, const value& self, call_args& a) {
  const std::int64_t i = find_impl(self, a, "index", false, false);
  if (i < 0) throw runtime_error("substring not found");
  return value::integer(i);
}
value m_rindex(render_context&, const value& self, call_args& a) {
  const std::int64_t i = find_impl(self, a, "rindex", true, false);
  if (i < 0) throw runtime_error("substring not found");
  return value::integer(i);
}

value m_replace(render_context& ctx, const value& self, call_args& a) {
  bound_args b("replace", a, {"old", "new", "count"});
  if (!b.has(1)) throw runtime_error("replace() takes at least 2 arguments");
  const std::string old = arg_text(self, b.get(0), "replace() argument 1");
  const std::string repl = arg_text(self, b.get(1), "replace() argument 2");
  const std::int64_t count = b.has(2) ? int_arg(b.get(2)) : -1;
  if (!old.empty() && !repl.empty() && repl.size() > old.size()) {
    const std::size_t n = static_cast<std::size_t>(pystr::count(self.str(), old, std::nullopt, std::nullopt));
    ctx.check_string(self.str().size() + n * (repl.size() - old.size()));
  } else if (old.empty()) {
    ctx.check_string(self.str().size() + (self.str_data().cp_len + 1) * repl.size());
  }
  return make_str(ctx, pystr::replace(self.str(), old, repl, count), self.is_markup());
}

value m_join(render_context& ctx, const value& self, call_args& a) {
  bound_args b("join", a, {"iterable"});
  if (!b.has(0)) throw runtime_error("join() takes exactly one argument (0 given)");
  std::string out;
  value_iter it(b.get(0), ctx);
  value x;
  std::size_t i = 0;
  while (it.next(x)) {
    if (!x.is_string())
      throw runtime_error("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(x) + " found");
    if (i) out += self.str();
    out += self.is_markup() && !x.is_markup() ? pystr::html_escape(x.str()) : x.str();
    ctx.check_string(out.size());
    ++i;
  }
  return make_str(ctx, std::move(out), self.is_markup());
}

value pad_impl(render_context& ctx, const value& self, call_args& a, const char* name, int align) {
  bound_args b(name, a, {"width", "fillchar"});
  if (!b.has(0)) throw runtime_error(std::string(name) + "() takes at least 1 argument (0 given)");
  const std::int64_t width = int_arg(b.get(0));
  std::string fill = " ";
  if (b.has(1)) {
    fill = str_arg(b.get(1), "fill character");
    if (unicode::count_code_points(fill) != 1)
      throw runtime_error("The fill character must be exactly one character long");
  }
  if (width > 0) ctx.check_string(static_cast<std::size_t>(width) * fill.size());
  return make_str(ctx, pystr::pad(self.str(), width, fill, align), self.is_markup());
}
value m_center(render_context& ctx, const value& self, call_args& a) { return pad_impl(ctx, self, a, "center", 0); }
value m_ljust(render_context& ctx, const value& self, call_args& a) { return pad_impl(ctx, self, a, "ljust", -1); }
value m_rjust(render_context& ctx, const value& self, call_args& a) { return pad_impl(ctx, self, a, "rjust", 1); }
value m_zfill(render_context& ctx, const value& self, call_args& a) {
  bound_args b("zfill", a, {"width"});
  if (!b.has(0)) throw runtime_error("zfill() takes exactly one argument (0 given)");
  const std::int64_t width = int_arg(b.get(0));
  if (width > 0) ctx.check_string(static_cast<std::size_t>(width));
  return make_str(ctx, pystr::zfill(self.str(), width), self.is_markup());
}

value partition_impl(render_context& ctx, const value& self, call_args& a, bool right) {
  bound_args b(right ? "rpartition" : "partition", a, {"sep"});
  if (!b.has(0)) throw runtime_error("partition() takes exactly one argument (0 given)");
  const std::string sep = arg_text(self, b.get(0), "must be str");
  if (sep.empty()) throw runtime_error("empty separator");
  const std::string& s = self.str();
  const std::size_t f = right ? s.rfind(sep) : s.find(sep);
  const bool m = self.is_markup();
  if (f == std::string::npos) {
    if (right) return value::tuple({value::string("", m), value::string("", m), value::string(s, m)});
    return value::tuple({value::string(s, m), value::string("", m), value::string("", m)});
  }
  ctx.charge(s.size());
  return value::tuple(
      {value::string(s.substr(0, f), m), value::string(sep, m), value::string(s.substr(f + sep.size()), m)});
}
value m_partition(render_context& ctx, const value& self, call_args& a) { return partition_impl(ctx, self, a, false); }
value m_rpartition(render_context& ctx, const value& self, call_args& a) { return partition_impl(ctx, self, a, true); }

value m_removeprefix(render_context& ctx, const value& self, call_args& a) {
  bound_args b("removeprefix", a, {"prefix"});
  if (!b.has(0)) throw runtime_error("removeprefix() takes exactly one argument (0 given)");
  const std::string& p = str_arg(b.get(0), "removeprefix() argument");
  const std::string& s = self.str();
  if (s.compare(0, p.size(), p) == 0) return make_str(ctx, s.substr(p.size()), false);
  return value::string(s);
}
value m_removesuffix(render_context& ctx, const value& self, call_args& a) {
  bound_args b("removesuffix", a, {"suffix"});
  if (!b.has(0)) throw runtime_error("removesuffix() takes exactly one argument (0 given)");
  const std::string& p = str_arg(b.get(0), "removesuffix() argument");
  const std::string& s = self.str();
  if (!p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0)
    return make_str(ctx, s.substr(0, s.size() - p.size()), false);
  return value::string(s);
}

template <class Pred>
value char_class(const value& self, call_args& a, const char* name, Pred pred) {
  bound_args b(name, a, {});
  const std::string& s = self.str();
  if (s.empty()) return value::boolean(false);
  std::size_t pos = 0;
  while (pos < s.size())
    if (!pred(unicode::decode(s, pos))) return value::boolean(false);
  return value::boolean(true);
}
bool ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool alpha_approx(char32_t c) { return c < 0x80 ? ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') : unicode::is_cased(c); }
value m_isdigit(render_context&, const value& self, call_args& a) {
  return char_class(self, a, "isdigit", ascii_digit);
}
value m_isdecimal(render_context&, const value& self, call_args& a) {
  return char_class(self, a, "isdecimal", ascii_digit);
}
value m_isnumeric(render_context&, const value& self, call_args& a) {
  return char_class(self, a, "isnumeric", ascii_digit);
}
value m_isalpha(render_context&, const value& self, call_args& a) {
  return char_class(self, a, "isalpha", alpha_approx);
}
value m_isalnum(render_context&, const value& self, call_args& a) {
  return char_class(self, a, "isalnum", [](char32_t c) { return ascii_digit(c) || alpha_approx(c); });
}
value m_isspace(render_context&, const value& self, call_args& a) {
  return char_class(self, a, "isspace", unicode::is_space);
}
value m_isascii(render_context&, const value& self, call_args& a) {
  bound_args b("isascii", a, {});
  return value::boolean(self.str_data().ascii);
}
value m_islower(render_context&, const value& self, call_args& a) {
  bound_args b("islower", a, {});
  return value::boolean(unicode::islower(self.str()));
}
value m_isupper(render_context&, const value& self, call_args& a) {
  bound_args b("isupper", a, {});
  return value::boolean(unicode::isupper(self.str()));
}

value m_format(render_context& ctx, const value& self, call_args& a) {
  std::string out = python_format(ctx, self.str(), a, self.is_markup());
  return make_str(ctx, std::move(out), self.is_markup());
}

// ----- list / tuple -----

value m_seq_count(render_context&, const value& self, call_args& a) {
  bound_args b("count", a, {"value"});
  if (!b.has(0)) throw runtime_error("count() takes exactly one argument (0 given)");
  std::int64_t n = 0;
  for (const auto& x : self.seq().items) n += py_equal(x, b.get(0));
  return value::integer(n);
}

value m_seq_index(render_context& ctx, const value& self, call_args& a) {
  bound_args b("index", a, {"value", "start", "stop"});
  if (!b.has(0)) throw runtime_error("index expected at least 1 argument, got 0");
  const auto& items = self.seq().items;
  const auto n = static_cast<std::int64_t>(items.size());
  std::int64_t lo, hi;
  pystr::adjust_bounds(n, b.has(1) ? std::optional<std::int64_t>(int_arg(b.get(1))) : std::nullopt,
                       b.has(2) ? std::optional<std::int64_t>(int_arg(b.get(2))) : std::nullopt, lo, hi);
  for (std::int64_t i = lo; i < hi; ++i)
    if (py_equal(items[static_cast<std::size_t>(i)], b.get(0))) return value::integer(i);
  throw runtime_error(self.is(kind::list) ? to_repr(b.get(0), ctx) + " is not in list"
                                          : "tuple.index(x): x not in tuple");
}

value m_list_copy(render_context& ctx, const value& self, call_args& a) {
  bound_args b("copy", a, {});
  ctx.charge(self.seq().items.size() * sizeof(value));
  return value::list(self.seq().items);
}

// ----- dict -----

value m_dict_get(render_context&, const value& self, call_args& a) {
  bound_args b("get", a, {"key", "default"});
  if (!b.has(0)) throw runtime_error("get expected at least 1 argument, got 0");
  if (!is_hashable(b.get(0))) throw runtime_error("unhashable type: " + py_str_repr(type_name(b.get(0))));
  if (const value* v = self.dict_ref().find(b.get(0))) return *v;
  return b.get_or(1, value::none());
}

value make_view(const value& self, view_obj::which_t which) {
  auto v = std::make_shared<view_obj>();
  v->dict = self;
  v->which = which;
  return value::from_object(kind::dict_view, std::move(v));
}
value m_dict_items(render_context&, const value& self, call_args& a) {
  bound_args b("items", a, {});
  return make_view(self, view_obj::items);
}
value m_dict_keys(render_context&, const value& self, call_args& a) {
  bound_args b("keys", a, {});
  return make_view(self, view_obj::keys);
}
value m_dict_values(render_context&, const value& self, call_args& a) {
  bound_args b("values", a, {});
  return make_view(self, view_obj::values);
}
value m_dict_copy(render_context& ctx, const value& self, call_args& a) {
  bound_args b("copy", a, {});
  auto d = std::make_shared<dict_obj>();
  for (const auto& [k, v] : self.dict_ref().items) d->set(k, v);
  ctx.charge(d->items.size() * 2 * sizeof(value));
  return value::dict(std::move(d));
}

// ----- range -----

value m_range_count(render_context& ctx, const value& self, call_args& a) {
  bound_args b("count", a, {"value"});
  if (!b.has(0)) throw runtime_error("count() takes exactly one argument (0 given)");
  std::int64_t n = 0;
  value_iter it(self, ctx);
  value x;
  while (it.next(x)) n += py_equal(x, b.get(0));
  return value::integer(n);
}

value m_unsupported(render_context&, const value& self, call_args&) {
  throw runtime_error("this method of " + py_str_repr(type_name(self)) + " objects is not supported by the renderer");
}

struct method_entry {
  const char* name;
  builtin_fn fn;  // nullptr: refused by the immutable sandbox
};

constexpr method_entry k_str_methods[] = {
    {"capitalize", m_capitalize},
    {"casefold", m_unsupported},
    {"center", m_center},
    {"count", m_count},
    {"encode", m_unsupported},
    {"endswith", m_endswith},
    {"expandtabs", m_unsupported},
    {"find", m_find},
    {"format", m_format},
    {"format_map", m_unsupported},
    {"index", m_index},
    {"isalnum", m_isalnum},
    {"isalpha", m_isalpha},
    {"isascii", m_isascii},
    {"isdecimal", m_isdecimal},
    {"isdigit", m_isdigit},
    {"isidentifier", m_unsupported},
    {"islower", m_islower},
    {"isnumeric", m_isnumeric},
    {"isprintable", m_unsupported},
    {"isspace", m_isspace},
    {"istitle", m_unsupported},
    {"isupper", m_isupper},
    {"join", m_join},
    {"ljust", m_ljust},
    {"lower", m_lower},
    {"lstrip", m_lstrip},
    {"maketrans", m_unsupported},
    {"partition", m_partition},
    {"removeprefix", m_removeprefix},
    {"removesuffix", m_removesuffix},
    {"replace", m_replace},
    {"rfind", m_rfind},
    {"rindex", m_rindex},
    {"rjust", m_rjust},
    {"rpartition", m_rpartition},
    {"rsplit", m_rsplit},
    {"rstrip", m_rstrip},
    {"split", m_split},
    {"splitlines", m_splitlines},
    {"startswith", m_startswith},
    {"strip", m_strip},
    {"swapcase", m_swapcase},
    {"title", m_title},
    {"translate", m_unsupported},
    {"upper", m_upper},
    {"zfill", m_zfill},
};

constexpr method_entry k_list_methods[] = {
    {"append", nullptr}, {"clear", nullptr},     {"copy", m_list_copy}, {"count", m_seq_count},
    {"extend", nullptr}, {"index", m_seq_index}, {"insert", nullptr},   {"pop", nullptr},
    {"remove", nullptr}, {"reverse", nullptr},   {"sort", nullptr},
};

constexpr method_entry k_tuple_methods[] = {{"count", m_seq_count}, {"index", m_seq_index}};

constexpr method_entry k_dict_methods[] = {
    {"clear", nullptr},  {"copy", m_dict_copy},     {"fromkeys", m_unsupported},
    {"get", m_dict_get}, {"items", m_dict_items},   {"keys", m_dict_keys},
    {"pop", nullptr},    {"popitem", nullptr},      {"setdefault", nullptr},
    {"update", nullptr}, {"values", m_dict_values},
};

constexpr method_entry k_range_methods[] = {{"count", m_range_count}, {"index", m_unsupported}};

template <std::size_t N>
std::optional<value> lookup(const method_entry (&table)[N], const value& self, const std::string& name) {
  for (const auto& e : table) {
    if (name != e.name) continue;
    if (!e.fn) return value::undefined_unsafe(self, name);
    auto b = std::make_shared<builtin_obj>();
    b->name = e.name;
    b->fn = e.fn;
    b->self = self;
    b->is_method = true;
    return value::from_object(kind::builtin, std::move(b));
  }
  return std::nullopt;
}

}  // namespace

std::optional<value> find_method(const value& self, const std::string& name) {
  switch (self.type()) {
    case kind::string: return lookup(k_str_methods, self, name);
    case kind::list: return lookup(k_list_methods, self, name);
    case kind::tuple: return lookup(k_tuple_methods, self, name);
    case kind::dict: return lookup(k_dict_methods, self, name);
    case kind::range: return lookup(k_range_methods, self, name);
    default: return std::nullopt;
  }
}

}  // namespace spate::jinja
