// Jinja2's built-in tests (jinja2.tests), declared in jinja_builtins.h.
#include <string>

#include "jinja/jinja_args.h"
#include "jinja/jinja_builtins.h"
#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_ops.h"
#include "jinja/jinja_unicode.h"

namespace spate::jinja {
namespace {

const value& one_arg(call_args& a, const char* name) {
  no_kwargs(a, name);
  if (a.args.size() != 1)
    throw runtime_error(std::string(name) + "() takes 2 positional arguments but " + std::to_string(a.args.size() + 1) +
                        " were given");
  return a.args[0];
}
void no_args(call_args& a, const char* name) {
  no_kwargs(a, name);
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
bool t_defined(render_context&, const value& v, call_args& a) {
  no_args(a, "test_defined");
  return !v.is_undefined();
}
bool t_undefined(render_context&, const value& v, call_args& a) {
  no_args(a, "test_undefined");
  return v.is_undefined();
}
bool t_filter(render_context&, const value& v, call_args& a) {
  no_args(a, "test_filter");
  return v.is_string() && find_filter(v.str()) != nullptr;
}
bool t_test(render_context&, const value& v, call_args& a) {
  no_args(a, "test_test");
  return v.is_string() && find_test(v.str()) != nullptr;
}
bool t_none(render_context&, const value& v, call_args& a) {
  no_args(a, "test_none");
  return v.is_none();
}
bool t_boolean(render_context&, const value& v, call_args& a) {
  no_args(a, "test_boolean");
  return v.is(kind::boolean);
}
bool t_false(render_context&, const value& v, call_args& a) {
  no_args(a, "test_false");
  return v.is(kind::boolean) && !v.as_bool();
}
bool t_true(render_context&, const value& v, call_args& a) {
  no_args(a, "test_true");
  return v.is(kind::boolean) && v.as_bool();
}
bool t_integer(render_context&, const value& v, call_args& a) {
  no_args(a, "test_integer");
  return v.is(kind::integer);
}
bool t_float(render_context&, const value& v, call_args& a) {
  no_args(a, "test_float");
  return v.is(kind::floating);
}
bool t_lower(render_context& ctx, const value& v, call_args& a) {
  no_args(a, "test_lower");
  return unicode::islower(to_str(v, ctx));
}
bool t_upper(render_context& ctx, const value& v, call_args& a) {
  no_args(a, "test_upper");
  return unicode::isupper(to_str(v, ctx));
}
bool t_string(render_context&, const value& v, call_args& a) {
  no_args(a, "test_string");
  return v.is_string();
}
bool t_mapping(render_context&, const value& v, call_args& a) {
  no_args(a, "test_mapping");
  return v.is(kind::dict);
}
bool t_number(render_context&, const value& v, call_args& a) {
  no_args(a, "test_number");
  return v.is_number();
}
bool t_sequence(render_context&, const value& v, call_args& a) {
  no_args(a, "test_sequence");
  switch (v.type()) {
    // Undefined has __len__ and (a failing) __getitem__, so Python counts it as a sequence.
    case kind::string:
    case kind::list:
    case kind::tuple:
    case kind::dict:
    case kind::range:
    case kind::undefined: return true;
    default: return false;
  }
}
bool t_iterable(render_context&, const value& v, call_args& a) {
  no_args(a, "test_iterable");
  switch (v.type()) {
    case kind::string:
    case kind::list:
    case kind::tuple:
    case kind::dict:
    case kind::dict_view:
    case kind::range:
    case kind::generator:
    case kind::undefined:
    case kind::loop: return true;
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
bool t_escaped(render_context&, const value& v, call_args& a) {
  no_args(a, "test_escaped");
  return v.is_markup();
}
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
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"filter", t_filter},
    {"test", t_test},
    {"none", t_none},
    {"boolean", t_boolean},
    {"false", t_false},
    {"true", t_true},
    {"integer", t_integer},
    {"float", t_float},
    {"lower", t_lower},
    {"upper", t_upper},
    {"string", t_string},
    {"mapping", t_mapping},
    {"number", t_number},
    {"sequence", t_sequence},
    {"iterable", t_iterable},
    {"callable", t_callable},
    {"sameas", t_sameas},
    {"escaped", t_escaped},
    {"in", t_in},
    {"==", t_eq},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"!=", t_ne},
    {"ne", t_ne},
    {">", t_gt},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"<", t_lt},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<=", t_le},
    {"le", t_le},
};

}  // namespace

test_fn find_test(std::string_view name) {
  for (const auto& t : k_tests)
    if (name == t.name) return t.fn;
  return nullptr;
}

}  // namespace spate::jinja
