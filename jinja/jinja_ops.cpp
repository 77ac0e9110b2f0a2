#include "jinja/jinja_ops.h"

#include <cmath>
#include <limits>

#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_format.h"
#include "jinja/jinja_pystr.h"

namespace spate::jinja {
namespace {

[[noreturn]] void type_error(const std::string& msg) { throw runtime_error(msg); }

std::string tn(const value& v) { return py_str_repr(type_name(v)); }

[[noreturn]] void unsupported(std::string_view op, const value& a, const value& b) {
  type_error("unsupported operand type(s) for " + std::string(op) + ": " + tn(a) + " and " + tn(b));
}

value loop_method_cycle(render_context& ctx, const value& self, call_args& args) {
  if (args.args.empty()) type_error("no items for cycling given");
  const auto& l = self.as<loop_obj>();
  const auto n = static_cast<std::int64_t>(args.args.size());
  return args.args[static_cast<std::size_t>(((l.index0 % n) + n) % n)];
}

value loop_method_changed(render_context& ctx, const value& self, call_args& args) {
  auto& l = self.as<loop_obj>();
  value now = value::tuple(args.args);
  if (!l.has_changed || !py_equal(l.last_changed, now)) {
    l.has_changed = true;
    l.last_changed = std::move(now);
    ctx.track(std::static_pointer_cast<loop_obj>(self.ptr()));
    return value::boolean(true);
  }
  return value::boolean(false);
}

value bound(const char* name, builtin_fn fn, const value& self) {
  auto b = std::make_shared<builtin_obj>();
  b->name = name;
  b->fn = fn;
  b->self = self;
  b->is_method = true;
  return value::from_object(kind::builtin, std::move(b));
}

std::optional<value> loop_attr(const value& obj, const std::string& name) {
  auto& l = obj.as<loop_obj>();
  if (name == "index0") return value::integer(l.index0);
  if (name == "index") return value::integer(l.index0 + 1);
  if (name == "first") return value::boolean(l.index0 == 0);
  if (name == "depth") return value::integer(l.depth0 + 1);
  if (name == "depth0") return value::integer(l.depth0);
  if (name == "length") return value::integer(l.get_length());
  if (name == "revindex") return value::integer(l.get_length() - l.index0);
  if (name == "revindex0") return value::integer(l.get_length() - l.index0 - 1);
  if (name == "last") {
    value v;
    return value::boolean(!l.peek(v));
  }
  if (name == "previtem") {
    if (l.index0 == 0) return value::undefined_hint("there is no previous item");
    return l.prev;
  }
  if (name == "nextitem") {
    value v;
    if (!l.peek(v)) return value::undefined_hint("there is no next item");
    return v;
  }
  if (name == "cycle") return bound("cycle", loop_method_cycle, obj);
  if (name == "changed") return bound("changed", loop_method_changed, obj);
  return std::nullopt;
}

// The Python attribute obj.name, if it exists (no item fallback).
std::optional<value> python_attr(const value& obj, const std::string& name) {
  switch (obj.type()) {
    case kind::namespace_:
      if (value* v = obj.as<ns_obj>().find(name)) return *v;
      return std::nullopt;
    case kind::loop: return loop_attr(obj, name);
    case kind::range: {
      const auto& r = obj.as<range_obj>();
      if (name == "start") return value::integer(r.start);
      if (name == "stop") return value::integer(r.stop);
      if (name == "step") return value::integer(r.step);
      return find_method(obj, name);
    }
    case kind::macro: {
      if (name == "name") {
        const auto& m = obj.as<macro_obj>();
        return m.name.empty() ? value::none() : value::string(m.name);
      }
      return std::nullopt;
    }
    case kind::string:
    case kind::list:
    case kind::tuple:
    case kind::dict: return find_method(obj, name);
    default: return std::nullopt;
  }
}

bool index_of(const value& key, std::int64_t n, std::int64_t& i) {
  if (!key.is_int_like()) return false;
  i = key.as_int();
  if (i < 0) i += n;
  return true;
}

// obj[key] when it exists; nullopt on KeyError / IndexError / TypeError.
std::optional<value> python_item(render_context& ctx, const value& obj, const value& key) {
  switch (obj.type()) {
    case kind::dict:
      if (!is_hashable(key)) return std::nullopt;
      if (const value* v = obj.dict_ref().find(key)) return *v;
      return std::nullopt;
    case kind::list:
    case kind::tuple: {
      const auto& items = obj.seq().items;
      std::int64_t i;
      if (!index_of(key, static_cast<std::int64_t>(items.size()), i)) return std::nullopt;
      if (i < 0 || i >= static_cast<std::int64_t>(items.size())) return std::nullopt;
      return items[static_cast<std::size_t>(i)];
    }
    case kind::string: {
      const auto& s = obj.str_data();
      std::int64_t i;
      if (!index_of(key, static_cast<std::int64_t>(s.cp_len), i)) return std::nullopt;
      if (i < 0 || i >= static_cast<std::int64_t>(s.cp_len)) return std::nullopt;
      return value::string(pystr::at(s.s, s.ascii, i), obj.is_markup());
    }
    case kind::range: {
      const auto& r = obj.as<range_obj>();
      std::int64_t i;
      if (!index_of(key, r.size(), i) || i < 0 || i >= r.size()) return std::nullopt;
      return value::integer(r.at(i));
    }
    default: return std::nullopt;
  }
}

bool order(render_context& ctx, std::string_view op, const value& a, const value& b) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  auto apply = [&](auto x, auto y) {
    if (op == "<") return x < y;
    if (op == "<=") return x <= y;
    if (op == ">") return x > y;
    return x >= y;
  };
  if (a.is_number() && b.is_number()) {
    if (a.is_int_like() && b.is_int_like()) return apply(a.as_int(), b.as_int());
    return apply(a.as_float(), b.as_float());
  }
  if (a.is_string() && b.is_string()) return apply(a.str().compare(b.str()), 0);
  if ((a.is(kind::list) && b.is(kind::list)) || (a.is(kind::tuple) && b.is(kind::tuple))) {
    const auto& x = a.seq().items;
    const auto& y = b.seq().items;
    const std::size_t n = std::min(x.size(), y.size());
    for (std::size_t i = 0; i < n; ++i)
      if (!py_equal(x[i], y[i])) return order(ctx, op, x[i], y[i]);
    return apply(x.size(), y.size());
  }
  type_error("'" + std::string(op) + "' not supported between instances of " + tn(a) + " and " + tn(b));
}

[[noreturn]] void overflow() { throw runtime_error("integer overflow (integers are limited to 64 bits)"); }

std::int64_t add_checked(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
std::int64_t sub_checked(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}
std::int64_t mul_checked(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

value concat_strings(render_context& ctx, const value& a, const value& b) {
  std::string out;
  bool markup = false;
  if (a.is_markup() || b.is_markup()) {
    markup = true;
    out = a.is_markup() ? a.str() : pystr::html_escape(a.str());
    out += b.is_markup() ? b.str() : pystr::html_escape(b.str());
  } else {
    out.reserve(a.str().size() + b.str().size());
    out = a.str();
    out += b.str();
  }
  ctx.check_string(out.size());
  ctx.charge(out.size());
  return value::string(std::move(out), markup);
}

value repeat(render_context& ctx, const value& seq, std::int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (!s.empty() && static_cast<std::uint64_t>(n) > ctx.limits().max_string_bytes / s.size())
      ctx.check_string(ctx.limits().max_string_bytes + 1);
    std::string out;
    out.reserve(s.size() * static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) out += s;
    ctx.charge(out.size());
    return value::string(std::move(out), seq.is_markup());
  }
  const auto& items = seq.seq().items;
  if (!items.empty() && static_cast<std::uint64_t>(n) > (ctx.limits().max_string_bytes / sizeof(value)) / items.size())
    throw limit_error("template built a list longer than the limit");
  std::vector<value> out;
  out.reserve(items.size() * static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  ctx.charge(out.size() * sizeof(value));
  return seq.is(kind::list) ? value::list(std::move(out)) : value::tuple(std::move(out));
}

double float_mod(double x, double y) {
  double mod = std::fmod(x, y);
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) mod += y;
  } else {
    mod = std::copysign(0.0, y);
  }
  return mod;
}

double float_floordiv(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) div -= 1.0;
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, x / y);
  }
  return floordiv;
}

value power(const value& a, const value& b) {
  if (a.is_int_like() && b.is_int_like() && b.as_int() >= 0) {
    std::int64_t base = a.as_int(), e = b.as_int(), result = 1;
    while (e > 0) {
      if (e & 1) result = mul_checked(result, base);
      e >>= 1;
      if (e > 0) base = mul_checked(base, base);
    }
    return value::integer(result);
  }
  const double x = a.as_float(), y = b.as_float();
  if (x == 0.0 && y < 0) throw runtime_error("0.0 cannot be raised to a negative power");
  if (x < 0 && std::floor(y) != y && std::isfinite(y)) throw runtime_error("complex results of ** are not supported");
  const double r = std::pow(x, y);
  if (std::isinf(r) && std::isfinite(x) && std::isfinite(y))
    throw runtime_error("(34, 'Numerical result out of range')");
  return value::floating(r);
}

}  // namespace

std::optional<value> find_attribute(const value& obj, const std::string& name) {
  if (obj.is_undefined()) raise_undefined(obj);
  return python_attr(obj, name);
}

value get_attr(render_context& ctx, const value& obj, const std::string& name) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (auto v = python_attr(obj, name)) return *v;
  if (obj.is(kind::dict))
    if (const value* v = obj.dict_ref().find(name)) return *v;
  return value::undefined_attr(obj, name);
}

value get_item(render_context& ctx, const value& obj, const value& key) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (auto v = python_item(ctx, obj, key)) return *v;
  if (key.is_string())
    if (auto v = python_attr(obj, key.str())) return *v;
  return value::undefined_key(obj, key);
}

value get_slice(render_context& ctx, const value& obj, const slice_spec& s, bool lenient) {
  if (obj.is_undefined()) raise_undefined(obj);
  const value none_slice = value::undefined_hint(object_type_repr(obj) + " has no element slice");
  switch (obj.type()) {
    case kind::string:
    case kind::list:
    case kind::tuple:
    case kind::range: break;
    case kind::dict:
      if (lenient) return none_slice;
      type_error("unhashable type: 'slice'");
    default:
      if (lenient) return none_slice;
      type_error(tn(obj) + " object is not subscriptable");
  }
  bool bad = false;
  auto bound_of = [&](const value& v, std::optional<std::int64_t>& out) {
    if (v.is_none()) return;
    if (v.is_int_like()) {
      out = v.as_int();
      return;
    }
    if (lenient) {
      bad = true;
      return;
    }
    if (v.is_undefined()) raise_undefined(v);
    type_error("slice indices must be integers or None or have an __index__ method");
  };
  std::optional<std::int64_t> start, stop, step_v;
  bound_of(s.start, start);
  bound_of(s.stop, stop);
  bound_of(s.step, step_v);
  if (bad) return none_slice;
  const std::int64_t step = step_v.value_or(1);
  if (step == 0) throw runtime_error("slice step cannot be zero");
  std::int64_t lo, hi;
  switch (obj.type()) {
    case kind::string: {
      const auto& d = obj.str_data();
      pystr::slice_indices(static_cast<std::int64_t>(d.cp_len), start, stop, step, lo, hi);
      std::string r = pystr::slice(d.s, d.ascii, lo, hi, step);
      ctx.charge(r.size());
      return value::string(std::move(r), obj.is_markup());
    }
    case kind::list:
    case kind::tuple: {
      const auto& items = obj.seq().items;
      pystr::slice_indices(static_cast<std::int64_t>(items.size()), start, stop, step, lo, hi);
      const std::int64_t n = pystr::slice_length(lo, hi, step);
      std::vector<value> out;
      out.reserve(static_cast<std::size_t>(n));
      for (std::int64_t k = 0, i = lo; k < n; ++k, i += step) out.push_back(items[static_cast<std::size_t>(i)]);
      ctx.charge(out.size() * sizeof(value));
      return obj.is(kind::list) ? value::list(std::move(out)) : value::tuple(std::move(out));
    }
    case kind::range: {
      const auto& r = obj.as<range_obj>();
      pystr::slice_indices(r.size(), start, stop, step, lo, hi);
      auto nr = std::make_shared<range_obj>();
      nr->start = r.at(lo);
      nr->stop = r.at(hi);
      nr->step = r.step * step;
      return value::from_object(kind::range, std::move(nr));
    }
    default: type_error(tn(obj) + " object is not subscriptable");
  }
}

value binary_op(render_context& ctx, std::string_view op, const value& a, const value& b) {
  if (op == "%" && a.is_string()) {  // str.__mod__ runs before the right operand is consulted
    std::string out = percent_format(ctx, a.str(), b, a.is_markup());
    ctx.charge(out.size());
    return value::string(std::move(out), a.is_markup());
  }
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = a.is_int_like() && b.is_int_like();
  switch (op[0]) {
    case '+':
      if (ints) return value::integer(add_checked(a.as_int(), b.as_int()));
      if (nums) return value::floating(a.as_float() + b.as_float());
      if (a.is_string() && b.is_string()) return concat_strings(ctx, a, b);
      if ((a.is(kind::list) && b.is(kind::list)) || (a.is(kind::tuple) && b.is(kind::tuple))) {
        std::vector<value> out = a.seq().items;
        out.insert(out.end(), b.seq().items.begin(), b.seq().items.end());
        ctx.charge(out.size() * sizeof(value));
        return a.is(kind::list) ? value::list(std::move(out)) : value::tuple(std::move(out));
      }
      if (a.is_string() && !a.is_markup()) type_error("can only concatenate str (not \"" + type_name(b) + "\") to str");
      if (a.is(kind::list)) type_error("can only concatenate list (not \"" + type_name(b) + "\") to list");
      if (a.is(kind::tuple)) type_error("can only concatenate tuple (not \"" + type_name(b) + "\") to tuple");
      unsupported("+", a, b);
    case '-':
      if (ints) return value::integer(sub_checked(a.as_int(), b.as_int()));
      if (nums) return value::floating(a.as_float() - b.as_float());
      unsupported("-", a, b);
    case '*':
      if (op.size() == 2) {
        if (nums) return power(a, b);
        unsupported("** or pow()", a, b);
      }
      if (ints) return value::integer(mul_checked(a.as_int(), b.as_int()));
      if (nums) return value::floating(a.as_float() * b.as_float());
      if ((a.is_string() || a.is_seq()) && b.is_int_like()) return repeat(ctx, a, b.as_int());
      if ((b.is_string() || b.is_seq()) && a.is_int_like()) return repeat(ctx, b, a.as_int());
      if ((a.is_string() || a.is_seq()) && b.is_number())
        type_error("can't multiply sequence by non-int of type " + tn(b));
      if ((b.is_string() || b.is_seq()) && a.is_number())
        type_error("can't multiply sequence by non-int of type " + tn(a));
      unsupported("*", a, b);
    case '/':
      if (op.size() == 2) {
        if (!nums) unsupported("//", a, b);
        if (ints) {
          const std::int64_t x = a.as_int(), y = b.as_int();
          if (y == 0) throw runtime_error("integer division or modulo by zero");
          if (x == std::numeric_limits<std::int64_t>::min() && y == -1) overflow();
          std::int64_t q = x / y;
          if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
          return value::integer(q);
        }
        if (b.as_float() == 0.0) throw runtime_error("float floor division by zero");
        return value::floating(float_floordiv(a.as_float(), b.as_float()));
      }
      if (!nums) unsupported("/", a, b);
      if (b.as_float() == 0.0) throw runtime_error("division by zero");
      return value::floating(a.as_float() / b.as_float());
    case '%':
      if (ints) {
        const std::int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) throw runtime_error("integer division or modulo by zero");
        if (y == -1) return value::integer(0);
        std::int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return value::integer(m);
      }
      if (nums) {
        if (b.as_float() == 0.0) throw runtime_error("float modulo");
        return value::floating(float_mod(a.as_float(), b.as_float()));
      }
      unsupported("%", a, b);
    default: throw runtime_error("unknown operator " + std::string(op));
  }
}

value negate(render_context& ctx, const value& a) {
  if (a.is_undefined()) raise_undefined(a);
  if (a.is_int_like()) {
    if (a.as_int() == std::numeric_limits<std::int64_t>::min()) overflow();
    return value::integer(-a.as_int());
  }
  if (a.is(kind::floating)) return value::floating(-a.as_float());
  type_error("bad operand type for unary -: " + tn(a));
}

value unary_plus(render_context& ctx, const value& a) {
  if (a.is_undefined()) raise_undefined(a);
  if (a.is_int_like()) return value::integer(a.as_int());
  if (a.is(kind::floating)) return a;
  type_error("bad operand type for unary +: " + tn(a));
}

bool contains(render_context& ctx, const value& container, const value& item) {
  switch (container.type()) {
    case kind::string:
      if (!item.is_string()) type_error("'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case kind::list:
    case kind::tuple:
      for (const auto& x : container.seq().items)
        if (py_equal(x, item)) return true;
      return false;
    case kind::dict:
      if (!is_hashable(item)) type_error("unhashable type: " + tn(item));
      return container.dict_ref().find(item) != nullptr;
    case kind::dict_view: {
      const auto& view = container.as<view_obj>();
      const auto& d = view.dict.dict_ref();
      if (view.which == view_obj::keys) {
        if (!is_hashable(item)) type_error("unhashable type: " + tn(item));
        return d.find(item) != nullptr;
      }
      if (view.which == view_obj::items) {
        if (!item.is(kind::tuple) || item.seq().items.size() != 2) return false;
        const value* v = d.find(item.seq().items[0]);
        return v && py_equal(*v, item.seq().items[1]);
      }
      for (const auto& [k, v] : d.items)
        if (py_equal(v, item)) return true;
      return false;
    }
    case kind::range:
    case kind::generator:
    case kind::undefined: {
      value_iter it(container, ctx);
      value x;
      while (it.next(x))
        if (py_equal(x, item)) return true;
      return false;
    }
    default: type_error("argument of type " + tn(container) + " is not iterable");
  }
}

bool compare_op(render_context& ctx, std::string_view op, const value& a, const value& b) {
  if (op == "==") return py_equal(a, b);
  if (op == "!=") return !py_equal(a, b);
  if (op == "in") return contains(ctx, b, a);
  if (op == "notin") return !contains(ctx, b, a);
  return order(ctx, op, a, b);
}

value markup_escape(render_context& ctx, const value& v) {
  if (v.is_markup()) return v;
  std::string s = pystr::html_escape(to_str(v, ctx));
  ctx.charge(s.size());
  return value::string(std::move(s), true);
}

}  // namespace spate::jinja
