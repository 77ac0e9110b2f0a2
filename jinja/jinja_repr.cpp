// Python's str() and repr() of template values (float repr, str repr with its quoting and
// escaping rules, containers, Markup, namespaces), declared in jinja_value.h.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_unicode.h"
#include "jinja/jinja_value.h"

namespace spate::jinja {

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view s(buf, static_cast<std::size_t>(res.ptr - buf));
  std::string out;
  if (s[0] == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  const std::size_t e = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e))
    if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int exp = 0;
  std::string_view es = s.substr(e + 1);
  const bool eneg = es[0] == '-';
  if (es[0] == '+' || es[0] == '-') es.remove_prefix(1);
  std::from_chars(es.data(), es.data() + es.size(), exp);
  if (eneg) exp = -exp;
  const int decpt = exp + 1;
  const int nd = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (nd > 1) {
      out += '.';
      out += digits.substr(1);
    }
    int x = decpt - 1;
    out += 'e';
    out += x < 0 ? '-' : '+';
    x = x < 0 ? -x : x;
    if (x < 10) out += '0';
    out += std::to_string(x);
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= nd) {
    out += digits;
    out.append(static_cast<std::size_t>(decpt - nd), '0');
    out += ".0";
  } else {
    out += digits.substr(0, static_cast<std::size_t>(decpt));
    out += '.';
    out += digits.substr(static_cast<std::size_t>(decpt));
  }
  return out;
}

std::string py_str_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out += quote;
  std::size_t pos = 0;
  char buf[16];
  while (pos < s.size()) {
    const std::size_t start = pos;
    const char32_t c = unicode::decode(s, pos);
    if (c == static_cast<char32_t>(quote) || c == U'\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == U'\t') {
      out += "\\t";
    } else if (c == U'\n') {
      out += "\\n";
    } else if (c == U'\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c < 0x7F || unicode::is_printable(c)) {
      out.append(s.substr(start, pos - start));
    } else if (c <= 0xFF) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c <= 0xFFFF) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
  }
  out += quote;
  return out;
}

namespace {

struct repr_guard {
  explicit repr_guard(render_context& c) : ctx(c) {
    if (++ctx.repr_depth > 2 * k_max_value_depth) {
      --ctx.repr_depth;
      throw limit_error("value nesting too deep to print");
    }
  }
  ~repr_guard() { --ctx.repr_depth; }
  render_context& ctx;
};

void repr_into(std::string& out, const value& v, render_context& ctx, bool top_str);

void repr_seq(std::string& out, const std::vector<value>& items, render_context& ctx) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    repr_into(out, items[i], ctx, false);
  }
}

void repr_dict_items(std::string& out, const dict_obj& d, render_context& ctx) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : d.items) {
    if (!first) out += ", ";
    first = false;
    repr_into(out, k, ctx, false);
    out += ": ";
    repr_into(out, v, ctx, false);
  }
  out += '}';
}

// dict_items([('k', v), ...]), dict_keys([...]) or dict_values([...]) of a dict view.
void repr_dict_view(std::string& out, const value& v, render_context& ctx) {
  const auto& view = v.as<view_obj>();
  out += type_name(v);
  out += "([";
  bool first = true;
  for (const auto& [k, x] : view.dict.dict_ref().items) {
    if (!first) out += ", ";
    first = false;
    if (view.which == view_obj::items) {
      out += '(';
      repr_into(out, k, ctx, false);
      out += ", ";
      repr_into(out, x, ctx, false);
      out += ')';
    } else {
      repr_into(out, view.which == view_obj::keys ? k : x, ctx, false);
    }
  }
  out += "])";
}

// <Namespace {'a': 1, ...}>; a namespace that contains itself shows {...} where it recurs.
void repr_namespace(std::string& out, const ns_obj& ns, render_context& ctx) {
  out += "<Namespace ";
  if (std::find(ctx.ns_repr_stack.begin(), ctx.ns_repr_stack.end(), &ns) != ctx.ns_repr_stack.end()) {
    out += "{...}";
  } else {
    ctx.ns_repr_stack.push_back(&ns);
    try {
      out += '{';
      bool first = true;
      for (const auto& [k, x] : ns.attrs) {
        if (!first) out += ", ";
        first = false;
        out += py_str_repr(k);
        out += ": ";
        repr_into(out, x, ctx, false);
      }
      out += '}';
    } catch (...) {
      ctx.ns_repr_stack.pop_back();
      throw;
    }
    ctx.ns_repr_stack.pop_back();
  }
  out += '>';
}

void repr_into(std::string& out, const value& v, render_context& ctx, bool top_str) {
  switch (v.type()) {
    case kind::undefined:
      if (!top_str) out += "Undefined";
      return;
    case kind::none: out += "None"; return;
    case kind::boolean: out += v.as_bool() ? "True" : "False"; return;
    case kind::integer: out += std::to_string(v.as_int()); return;
    case kind::floating: out += py_float_repr(v.as_float()); return;
    case kind::string:
      if (top_str) {
        out += v.str();
      } else if (v.is_markup()) {
        out += "Markup(";
        out += py_str_repr(v.str());
        out += ')';
      } else {
        out += py_str_repr(v.str());
      }
      return;
    default: break;
  }
  repr_guard guard(ctx);
  switch (v.type()) {
    case kind::list:
      out += '[';
      repr_seq(out, v.seq().items, ctx);
      out += ']';
      break;
    case kind::tuple:
      out += '(';
      repr_seq(out, v.seq().items, ctx);
      if (v.seq().items.size() == 1) out += ',';
      out += ')';
      break;
    case kind::dict: repr_dict_items(out, v.dict_ref(), ctx); break;
    case kind::dict_view: repr_dict_view(out, v, ctx); break;
    case kind::range: {
      const auto& r = v.as<range_obj>();
      out += "range(" + std::to_string(r.start) + ", " + std::to_string(r.stop);
      if (r.step != 1) out += ", " + std::to_string(r.step);
      out += ')';
      break;
    }
    case kind::generator: out += "<" + v.as<gen_obj>().type_name + " object>"; break;
    case kind::namespace_: repr_namespace(out, v.as<ns_obj>(), ctx); break;
    case kind::macro: {
      const auto& m = v.as<macro_obj>();
      out += "<Macro " + (m.name.empty() ? std::string("anonymous") : py_str_repr(m.name)) + ">";
      break;
    }
    case kind::builtin: {
      const auto& b = v.as<builtin_obj>();
      if (b.is_method)
        out += "<built-in method " + b.name + " of " + type_name(b.self) + " object>";
      else
        out += "<function " + b.name + ">";
      break;
    }
    case kind::loop: {
      auto& l = v.as<loop_obj>();
      out += "<LoopContext " + std::to_string(l.index0 + 1) + "/" + std::to_string(l.get_length()) + ">";
      break;
    }
    default: break;
  }
  if (out.size() > ctx.limits().max_string_bytes) ctx.check_string(out.size());
}

}  // namespace

std::string to_str(const value& v, render_context& ctx) {
  if (v.is_string()) return v.str();
  std::string out;
  repr_into(out, v, ctx, true);
  ctx.charge(out.size());
  return out;
}

std::string to_repr(const value& v, render_context& ctx) {
  std::string out;
  repr_into(out, v, ctx, false);
  ctx.charge(out.size());
  return out;
}

}  // namespace spate::jinja
