// Jinja2's built-in filters, tests and global functions (plus the globals Hugging Face adds for
// chat templates: raise_exception, strftime_now, and its tojson), with Python semantics.
// Stateless; all state lives in the render_context passed in.
#pragma once

#include <string_view>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_value.h"

namespace spate::jinja {

// nullptr when there is no filter / test of that name.
filter_fn find_filter(std::string_view name);
test_fn find_test(std::string_view name);

// A global function (range, dict, namespace, raise_exception, strftime_now), or undefined.
value find_global(std::string_view name);

// Calls a built-in function or bound method value.
value call_builtin(render_context& ctx, const value& fn, call_args& args);

}  // namespace spate::jinja
