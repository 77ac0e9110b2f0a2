// Python operators as Jinja2's sandboxed environment applies them: attribute and item access
// (SandboxedEnvironment.getattr / getitem, including the immutable sandbox's refusal of
// mutating methods), slicing, arithmetic, comparisons, `in`, and markupsafe.Markup's escaping
// concatenation. All throw runtime_error with Python's message on a TypeError and the
// undefined value's message when an undefined is misused.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "jinja/jinja_value.h"

namespace spate::jinja {

// obj.name: the Python attribute (bound method, namespace attribute, loop property) if there
// is one, else obj[name], else undefined.
value get_attr(render_context& ctx, const value& obj, const std::string& name);
// The Python attribute obj.name only (no item fallback), as the attr filter uses it.
std::optional<value> find_attribute(const value& obj, const std::string& name);
// obj[key]: the item if there is one, else for a string key the attribute, else undefined.
value get_item(render_context& ctx, const value& obj, const value& key);

struct slice_spec {
  value start, stop, step;  // None when omitted
};
// obj[start:stop:step]. Jinja2 compiles slices to a plain Python subscript, so failures raise
// TypeError; with `lenient` (the expression was constant-folded, which goes through the
// sandbox's getitem) they give undefined instead.
value get_slice(render_context& ctx, const value& obj, const slice_spec& s, bool lenient);

// op: + - * / // % **
value binary_op(render_context& ctx, std::string_view op, const value& a, const value& b);
value negate(render_context& ctx, const value& a);
value unary_plus(render_context& ctx, const value& a);
// op: == != < <= > >= in notin
bool compare_op(render_context& ctx, std::string_view op, const value& a, const value& b);
// item in container
bool contains(render_context& ctx, const value& container, const value& item);

// A bound method of a str / list / tuple / dict / range value, or nullopt. Mutating methods
// the immutable sandbox refuses come back as an undefined that raises SecurityError.
std::optional<value> find_method(const value& self, const std::string& name);

// markupsafe.escape(v): Markup, escaped unless v already is Markup.
value markup_escape(render_context& ctx, const value& v);

}  // namespace spate::jinja
