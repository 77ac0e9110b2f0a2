// Jinja2's compile-time scope analysis (jinja2.idtracking), which decides how each local
// variable of a scope starts when the scope is entered. The renderer resolves names
// dynamically (innermost scope that binds the name, then the context), which agrees with
// Jinja2 except for one case this pass records: a name assigned in a scope, and neither
// read in that scope before its first assignment nor known to an enclosing scope, starts
// *undefined* there instead of falling through to the context. E.g. with x=5 passed in,
//   {% for m in [1] %}{{ x }}{% endfor %}{% set x = 1 %}   renders "" (x is a top-level
// local, undefined until set), while  {{ x }}{% set x = 1 %}  renders "5".
// Assignments in only some branches of an if fall back to the context, as in Jinja2.
#pragma once

#include "jinja/jinja_ast.h"

namespace spate::jinja {

// Fills template_ast::missing, stmt::missing / else_missing and macro_def::missing.
void analyze_scopes(template_ast& ast);

}  // namespace spate::jinja
