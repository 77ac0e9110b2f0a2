// Jinja2's built-in filters (jinja2.filters) and transformers' tojson (declared in
// jinja_builtins.h): the registry and the sequence / mapping filters. String filters are in
// jinja_filters_text.cpp, number filters in jinja_filters_number.cpp.
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "jinja/jinja_args.h"
#include "jinja/jinja_builtins.h"
#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_filters_detail.h"
#include "jinja/jinja_ops.h"
#include "jinja/jinja_pystr.h"
#include "jinja/jinja_unicode.h"

namespace spate::jinja {

namespace filters_detail {

value make_str(render_context& ctx, std::string s, bool markup) {
  ctx.check_string(s.size());
  ctx.charge(s.size());
  return value::string(std::move(s), markup);
}

value soft_str(render_context& ctx, const value& v) {
  if (v.is_string()) return v;
  return make_str(ctx, to_str(v, ctx));
}

}  // namespace filters_detail

namespace {

using namespace filters_detail;

// ---------------------------------------------------------------------------------------------
// Helpers

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
    const bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits && part.size() < 18)
      p.parts.push_back(value::integer(std::stoll(part)));
    else
      p.parts.push_back(value::string(part));
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

// ---------------------------------------------------------------------------------------------
// Filters

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

value f_length(render_context& ctx, const value& v, call_args& a) {
  no_kwargs(a, "len");
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
    if (by.is_string() && by.str() == "key")
      pos = 0;
    else if (by.is_string() && by.str() == "value")
      pos = 1;
    else
      throw runtime_error("You can only sort by either \"key\" or \"value\"");
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
    case kind::undefined: return value::undefined_hint("No last item, sequence was empty.");
    default: throw runtime_error(py_str_repr(type_name(v)) + " object is not reversible");
  }
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
      if (!s->src.is_undefined() && !s->src.is(kind::dict))
        throw runtime_error("Can only get item pairs from a mapping.");
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
          if (k == "attribute")
            s->path = prepare_attribute(x);
          else if (k == "default")
            s->dflt = x;
          else
            throw runtime_error("Unexpected keyword argument " + py_str_repr(k));
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
      const char* name = v.is(kind::list)    ? "list_reverseiterator"
                         : v.is(kind::dict)  ? "dict_reversekeyiterator"
                         : v.is(kind::range) ? "range_iterator"
                         : v.is_undefined()  ? "reversed"
                                             : "reversed";
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
      if (key.is_string())
        fast = "s" + key.str();
      else if (key.is_int_like())
        fast = "n" + std::to_string(key.as_int());
      else if (key.is(kind::floating) && std::floor(key.as_float()) == key.as_float() &&
               std::fabs(key.as_float()) < 9e18)
        fast = "n" + std::to_string(static_cast<std::int64_t>(key.as_float()));
      else if (key.is_none())
        fast = "z";
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

struct filter_entry {
  const char* name;
  filter_fn fn;
};

constexpr filter_entry k_filters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_forceescape},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"slice", f_slice},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"truncate", f_truncate},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace

filter_fn find_filter(std::string_view name) {
  for (const auto& f : k_filters)
    if (name == f.name) return f.fn;
  return nullptr;
}

}  // namespace spate::jinja
