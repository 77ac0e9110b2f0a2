#include "jinja/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <boost/json.hpp>

#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_unicode.h"

namespace spate::jinja {

// ---------------------------------------------------------------------------------------------
// Construction

str_obj::str_obj(std::string text) : s(std::move(text)) {
  ascii = unicode::is_ascii(s);
  cp_len = ascii ? s.size() : unicode::count_code_points(s);
}

value value::string(std::string s, bool markup) {
  value v;
  v.kind_ = kind::string;
  v.markup_ = markup;
  v.obj_ = std::make_shared<str_obj>(std::move(s));
  return v;
}

value value::undefined_hint(std::string hint) {
  value v;
  auto info = std::make_shared<undefined_info>();
  info->hint = std::move(hint);
  v.obj_ = std::move(info);
  return v;
}

value value::undefined_name(std::string name) { return undefined_hint(py_str_repr(name) + " is undefined"); }

value value::undefined_attr(const value& owner, std::string name) {
  return undefined_hint(py_str_repr(object_type_repr(owner)) + " has no attribute " + py_str_repr(name));
}

namespace {

// repr() of a scalar key without a render context (used in undefined messages).
std::string key_repr(const value& k) {
  switch (k.type()) {
    case kind::none: return "None";
    case kind::boolean: return k.as_bool() ? "True" : "False";
    case kind::integer: return std::to_string(k.as_int());
    case kind::floating: return py_float_repr(k.as_float());
    case kind::string: return py_str_repr(k.str());
    case kind::undefined: return "Undefined";
    default: return "<" + type_name(k) + " object>";
  }
}

int child_depth(const std::vector<value>& items) {
  int d = 0;
  for (const auto& v : items) d = std::max(d, v.depth());
  return d;
}

}  // namespace

value value::undefined_key(const value& owner, const value& key) {
  if (key.is_string()) return undefined_attr(owner, key.str());
  return undefined_hint(object_type_repr(owner) + " has no element " + key_repr(key));
}

value value::undefined_unsafe(const value& owner, const std::string& name) {
  value v;
  auto info = std::make_shared<undefined_info>();
  info->hint =
      "access to attribute " + py_str_repr(name) + " of " + py_str_repr(type_name(owner)) + " object is unsafe.";
  v.obj_ = std::move(info);
  return v;
}

value value::list(std::vector<value> items) {
  auto o = std::make_shared<seq_obj>();
  o->depth = child_depth(items) + 1;
  if (o->depth > k_max_value_depth) throw runtime_error("value nesting too deep");
  o->items = std::move(items);
  value v;
  v.kind_ = kind::list;
  v.obj_ = std::move(o);
  return v;
}

value value::tuple(std::vector<value> items) {
  value v = list(std::move(items));
  v.kind_ = kind::tuple;
  return v;
}

value value::dict(std::shared_ptr<dict_obj> d) {
  int depth = 0;
  for (const auto& [k, x] : d->items) depth = std::max({depth, k.depth(), x.depth()});
  d->depth = depth + 1;
  if (d->depth > k_max_value_depth) throw runtime_error("value nesting too deep");
  value v;
  v.kind_ = kind::dict;
  v.obj_ = std::move(d);
  return v;
}

value value::from_object(kind k, std::shared_ptr<object> o) noexcept {
  value v;
  v.kind_ = k;
  v.obj_ = std::move(o);
  return v;
}

int value::depth() const noexcept {
  switch (kind_) {
    case kind::list:
    case kind::tuple: return seq().depth;
    case kind::dict: return dict_ref().depth;
    case kind::dict_view: return as<view_obj>().dict.depth() + 1;
    case kind::generator: return as<gen_obj>().depth;
    default: return 0;
  }
}

// ---------------------------------------------------------------------------------------------
// Containers

void dict_obj::set(value key, value v) {
  if (key.is_string()) {
    if (const value* existing = find(key.str())) {
      const_cast<value&>(*existing) = std::move(v);
      return;
    }
  } else {
    for (auto& [k, x] : items)
      if (py_equal(k, key)) {
        x = std::move(v);
        return;
      }
  }
  items.emplace_back(std::move(key), std::move(v));
  if (items.size() > 8) {
    if (index_.empty()) {
      for (std::size_t i = 0; i < items.size(); ++i)
        if (items[i].first.is_string()) index_.emplace(items[i].first.str(), i);
    } else if (items.back().first.is_string()) {
      index_.emplace(items.back().first.str(), items.size() - 1);
    }
  }
}

const value* dict_obj::find(std::string_view key) const {
  if (!index_.empty()) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items[it->second].second;
  }
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

const value* dict_obj::find(const value& key) const {
  if (key.is_string()) return find(key.str());
  for (const auto& [k, v] : items)
    if (py_equal(k, key)) return &v;
  return nullptr;
}

value* ns_obj::find(std::string_view name) {
  for (auto& [k, v] : attrs)
    if (k == name) return &v;
  return nullptr;
}

void ns_obj::set(const std::string& name, value v) {
  if (value* slot = find(name))
    *slot = std::move(v);
  else
    attrs.emplace_back(name, std::move(v));
}

std::int64_t range_obj::size() const {
  if (step > 0 && start < stop) return (stop - start - 1) / step + 1;
  if (step < 0 && start > stop) return (start - stop - 1) / (-step) + 1;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Iteration

value_iter::value_iter(const value& v, render_context& ctx) : src_(v), ctx_(&ctx) {
  switch (v.type()) {
    case kind::undefined:
    case kind::list:
    case kind::tuple:
    case kind::string:
    case kind::dict:
    case kind::dict_view:
    case kind::range:
    case kind::generator: return;
    default: throw runtime_error(py_str_repr(type_name(v)) + " object is not iterable");
  }
}

bool value_iter::next(value& out) {
  switch (src_.type()) {
    case kind::list:
    case kind::tuple: {
      const auto& items = src_.seq().items;
      if (pos_ >= items.size()) return false;
      out = items[pos_++];
      return true;
    }
    case kind::string: {
      const std::string& s = src_.str();
      if (pos_ >= s.size()) return false;
      const std::size_t start = pos_;
      unicode::decode(s, pos_);
      out = value::string(s.substr(start, pos_ - start));
      return true;
    }
    case kind::dict: {
      const auto& items = src_.dict_ref().items;
      if (pos_ >= items.size()) return false;
      out = items[pos_++].first;
      return true;
    }
    case kind::dict_view: {
      const auto& view = src_.as<view_obj>();
      const auto& items = view.dict.dict_ref().items;
      if (pos_ >= items.size()) return false;
      const auto& [k, v] = items[pos_++];
      if (view.which == view_obj::keys)
        out = k;
      else if (view.which == view_obj::values)
        out = v;
      else
        out = value::tuple({k, v});
      return true;
    }
    case kind::range: {
      const auto& r = src_.as<range_obj>();
      if (static_cast<std::int64_t>(pos_) >= r.size()) return false;
      out = value::integer(r.at(static_cast<std::int64_t>(pos_++)));
      return true;
    }
    case kind::generator: {
      auto& g = src_.as<gen_obj>();
      if (g.done) return false;
      if (g.running) throw runtime_error("generator already executing");
      ctx_->step();
      g.running = true;
      bool ok;
      try {
        ok = g.pull(out);
      } catch (...) {
        g.running = false;
        g.done = true;
        throw;
      }
      g.running = false;
      if (!ok) {
        g.done = true;
        g.pull = nullptr;  // release what the generator holds
      }
      return ok;
    }
    default: return false;
  }
}

std::optional<std::int64_t> value_iter::source_size() const {
  switch (src_.type()) {
    case kind::list:
    case kind::tuple:
    case kind::string:
    case kind::dict:
    case kind::dict_view:
    case kind::range:
    case kind::undefined: return py_len(src_, *ctx_);
    default: return std::nullopt;
  }
}

bool loop_obj::next(value& out) {
  if (!lookahead.empty()) {
    out = std::move(lookahead.front());
    lookahead.pop_front();
  } else if (!it->next(out)) {
    return false;
  }
  ++index0;
  prev = std::move(cur);
  cur = out;
  return true;
}

bool loop_obj::peek(value& out) {
  if (lookahead.empty()) {
    value v;
    if (!it->next(v)) return false;
    lookahead.push_back(std::move(v));
  }
  out = lookahead.front();
  return true;
}

std::int64_t loop_obj::get_length() {
  if (length) return *length;
  if (auto n = it->source_size()) {
    length = *n;
  } else {
    value v;
    while (it->next(v)) lookahead.push_back(std::move(v));
    length = index0 + 1 + static_cast<std::int64_t>(lookahead.size());
  }
  return *length;
}

// ---------------------------------------------------------------------------------------------
// Python semantics

bool truthy(const value& v) {
  switch (v.type()) {
    case kind::undefined:
    case kind::none: return false;
    case kind::boolean: return v.as_bool();
    case kind::integer: return v.as_int() != 0;
    case kind::floating: return v.as_float() != 0.0;
    case kind::string: return !v.str().empty();
    case kind::list:
    case kind::tuple: return !v.seq().items.empty();
    case kind::dict: return !v.dict_ref().items.empty();
    case kind::dict_view: return !v.as<view_obj>().dict.dict_ref().items.empty();
    case kind::range: return v.as<range_obj>().size() > 0;
    default: return true;
  }
}

std::string type_name(const value& v) {
  switch (v.type()) {
    case kind::undefined: return "Undefined";
    case kind::none: return "NoneType";
    case kind::boolean: return "bool";
    case kind::integer: return "int";
    case kind::floating: return "float";
    case kind::string: return v.is_markup() ? "Markup" : "str";
    case kind::list: return "list";
    case kind::tuple: return "tuple";
    case kind::dict: return "dict";
    case kind::dict_view: {
      const auto w = v.as<view_obj>().which;
      return w == view_obj::items ? "dict_items" : w == view_obj::keys ? "dict_keys" : "dict_values";
    }
    case kind::range: return "range";
    case kind::generator: return v.as<gen_obj>().type_name;
    case kind::namespace_: return "Namespace";
    case kind::macro: return "Macro";
    case kind::builtin: return v.as<builtin_obj>().is_method ? "builtin_function_or_method" : "function";
    case kind::loop: return "LoopContext";
  }
  return "object";
}

std::string object_type_repr(const value& v) {
  switch (v.type()) {
    case kind::none: return "None";
    case kind::undefined: return "jinja2.runtime.Undefined object";
    case kind::namespace_: return "jinja2.utils.Namespace object";
    case kind::macro: return "jinja2.runtime.Macro object";
    case kind::loop: return "jinja2.runtime.LoopContext object";
    case kind::string:
      if (v.is_markup()) return "markupsafe.Markup object";
      [[fallthrough]];
    default: return type_name(v) + " object";
  }
}

namespace {

bool int_equals_float(std::int64_t i, double d) {
  if (std::isnan(d) || std::floor(d) != d) return false;
  if (d >= 9223372036854775808.0 || d < -9223372036854775808.0) return false;
  return static_cast<std::int64_t>(d) == i;
}

}  // namespace

bool py_equal(const value& a, const value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int_like() && b.is_int_like()) return a.as_int() == b.as_int();
    if (a.is_int_like()) return int_equals_float(a.as_int(), b.as_float());
    if (b.is_int_like()) return int_equals_float(b.as_int(), a.as_float());
    return a.as_float() == b.as_float();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case kind::undefined:
    case kind::none: return true;
    case kind::string: return a.same_object(b) || a.str() == b.str();
    case kind::list:
    case kind::tuple: {
      if (a.same_object(b)) return true;
      const auto& x = a.seq().items;
      const auto& y = b.seq().items;
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i)
        if (!py_equal(x[i], y[i])) return false;
      return true;
    }
    case kind::dict: {
      if (a.same_object(b)) return true;
      const auto& x = a.dict_ref();
      const auto& y = b.dict_ref();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const value* other = y.find(k);
        if (!other || !py_equal(v, *other)) return false;
      }
      return true;
    }
    case kind::range: {
      const auto& x = a.as<range_obj>();
      const auto& y = b.as<range_obj>();
      const std::int64_t n = x.size();
      if (n != y.size()) return false;
      if (n == 0) return true;
      if (x.start != y.start) return false;
      return n == 1 || x.step == y.step;
    }
    default: return a.same_object(b);
  }
}

bool is_hashable(const value& v) {
  switch (v.type()) {
    case kind::list:
    case kind::dict:
    case kind::dict_view: return false;
    case kind::tuple:
      for (const auto& x : v.seq().items)
        if (!is_hashable(x)) return false;
      return true;
    default: return true;
  }
}

namespace {

[[noreturn]] void unorderable(const value& a, const value& b, const char* op) {
  throw runtime_error(std::string("'") + op + "' not supported between instances of " + py_str_repr(type_name(a)) +
                      " and " + py_str_repr(type_name(b)));
}

}  // namespace

bool py_less(const value& a, const value& b, render_context& ctx) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_int_like() && b.is_int_like()) return a.as_int() < b.as_int();
    return a.as_float() < b.as_float();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if ((a.is(kind::list) && b.is(kind::list)) || (a.is(kind::tuple) && b.is(kind::tuple))) {
    const auto& x = a.seq().items;
    const auto& y = b.seq().items;
    const std::size_t n = std::min(x.size(), y.size());
    for (std::size_t i = 0; i < n; ++i)
      if (!py_equal(x[i], y[i])) return py_less(x[i], y[i], ctx);
    return x.size() < y.size();
  }
  unorderable(a, b, "<");
}

std::int64_t py_len(const value& v, render_context& ctx) {
  switch (v.type()) {
    case kind::undefined: return 0;
    case kind::string: return static_cast<std::int64_t>(v.str_data().cp_len);
    case kind::list:
    case kind::tuple: return static_cast<std::int64_t>(v.seq().items.size());
    case kind::dict: return static_cast<std::int64_t>(v.dict_ref().items.size());
    case kind::dict_view: return static_cast<std::int64_t>(v.as<view_obj>().dict.dict_ref().items.size());
    case kind::range: return v.as<range_obj>().size();
    case kind::loop: return v.as<loop_obj>().get_length();
    default: throw runtime_error("object of type " + py_str_repr(type_name(v)) + " has no len()");
  }
}

std::vector<value> to_vector(const value& v, render_context& ctx) {
  if (v.is_seq()) return v.seq().items;
  std::vector<value> out;
  value_iter it(v, ctx);
  value x;
  while (it.next(x)) {
    out.push_back(std::move(x));
    ctx.charge(sizeof(value));
  }
  return out;
}

std::string undefined_message(const value& v) {
  if (const auto& p = v.ptr()) return static_cast<const undefined_info*>(p.get())->hint;
  return "value is undefined";
}

void raise_undefined(const value& v) { throw runtime_error(undefined_message(v)); }

// ---------------------------------------------------------------------------------------------
// JSON input

namespace {

value from_json_at(const boost::json::value& j, int depth) {
  if (depth > k_max_value_depth)
    throw runtime_error("messages or variables nested too deep (more than " + std::to_string(k_max_value_depth) +
                        " levels)");
  switch (j.kind()) {
    case boost::json::kind::null: return value::none();
    case boost::json::kind::bool_: return value::boolean(j.get_bool());
    case boost::json::kind::int64: return value::integer(j.get_int64());
    case boost::json::kind::uint64: {
      const std::uint64_t u = j.get_uint64();
      if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return value::integer(static_cast<std::int64_t>(u));
      return value::floating(static_cast<double>(u));
    }
    case boost::json::kind::double_: return value::floating(j.get_double());
    case boost::json::kind::string: {
      const auto& s = j.get_string();
      return value::string(unicode::sanitize_utf8(std::string_view(s.data(), s.size())));
    }
    case boost::json::kind::array: {
      std::vector<value> items;
      items.reserve(j.get_array().size());
      for (const auto& x : j.get_array()) items.push_back(from_json_at(x, depth + 1));
      return value::list(std::move(items));
    }
    case boost::json::kind::object: {
      auto d = std::make_shared<dict_obj>();
      for (const auto& kv : j.get_object()) {
        const auto key = kv.key();
        d->set(value::string(unicode::sanitize_utf8(std::string_view(key.data(), key.size()))),
               from_json_at(kv.value(), depth + 1));
      }
      return value::dict(std::move(d));
    }
  }
  return value::none();
}

}  // namespace

value from_json(const boost::json::value& j) { return from_json_at(j, 1); }

}  // namespace spate::jinja
