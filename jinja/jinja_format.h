// Python string formatting for the renderer: str.format (with jinja2's SandboxedFormatter
// attribute access), format(value, spec), and printf-style `str % args` (also the `format`
// filter). Markup format strings escape their arguments, as markupsafe does.
//
// Supported format specs: [[fill]align][sign][#][0][width][,|_][.precision][type] with types
// s, d, b, o, x, X, c, e, E, f, F, g, G, % (and none). printf conversions: d i u o x X e E f F
// g G c s r a % with flags - + space # 0, width, precision, * and %(name)s mapping keys.
// Anything else raises runtime_error with Python's message.
#pragma once

#include <string>
#include <string_view>

#include "jinja/jinja_value.h"

namespace spate::jinja {

std::string python_format(render_context& ctx, const std::string& fmt, call_args& args, bool markup);
std::string format_value(render_context& ctx, const value& v, std::string_view spec);
// fmt % args: `args` is a tuple (positional), a dict (for %(name)s) or a single value.
std::string percent_format(render_context& ctx, const std::string& fmt, const value& args, bool markup);

}  // namespace spate::jinja
