// Parser for Jinja2 templates: tokens (jinja_lexer) to a syntax tree (jinja_ast), following
// jinja2.parser's grammar and error messages.
//
// Supported statements: if/elif/else, for (with else, loop filter `if`, tuple targets), set
// (expression, tuple and namespace-attribute targets, block form with filters), macro,
// call, filter, with, print, break/continue (jinja2.ext.loopcontrols), raw, comments, and
// Hugging Face's generation/endgeneration. Not supported (syntax error): block, extends,
// include, import, from, autoescape, recursive loops.
//
// Like Jinja2, an unknown filter or test is an error at parse time unless it appears inside
// an if statement or conditional expression (then it fails only when evaluated).
// Nesting of statements and expressions is bounded (syntax_error past the limit).
#pragma once

#include <string_view>

#include "jinja/jinja_ast.h"

namespace spate::jinja {

// Throws syntax_error.
template_ast parse_template(std::string_view source);

}  // namespace spate::jinja
