// Syntax tree of a parsed Jinja template (the subset of jinja2.nodes the renderer supports).
// Built by jinja_parser, evaluated by jinja_render. Immutable after parsing, so one tree may
// be rendered by several threads at once. Expression trees are at most k_max_expr_depth deep.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/jinja_value.h"

namespace spate::jinja {

inline constexpr int k_max_expr_depth = 200;

using filter_fn = value (*)(render_context& ctx, const value& input, call_args& args);
using test_fn = bool (*)(render_context& ctx, const value& input, call_args& args);

struct expr;
using expr_ptr = std::unique_ptr<expr>;

enum class ex : std::uint8_t {
  literal,  // constant: None, bool, int, float, str
  name,     // variable load: name
  list,     // [items...]
  tuple,    // (items...)
  dict,     // {items[0]: items[1], ...}
  getattr,  // a.name
  getitem,  // a[b]
  slice,    // a:b:c inside [] (each part may be null)
  call,     // a(items..., kwargs..., *b, **c)
  filter,   // a|name(items..., kwargs..., *b, **c); a is null for the body of filter/set blocks
  test,     // a is name(items..., kwargs..., *b, **c)
  neg,      // -a
  pos,      // +a
  not_,     // not a
  binop,    // a <name> b, name in + - * / // % **
  concat,   // items joined by ~
  compare,  // items[0] ops[0] items[1] ops[1] items[2] ...
  and_,     // a and b
  or_,      // a or b
  cond,     // a if b else c (c may be null)
};

struct expr {
  ex kind;
  int line = 0;
  int depth = 1;
  value constant;
  std::string name;
  std::vector<expr_ptr> items;
  std::vector<std::pair<std::string, expr_ptr>> kwargs;
  std::vector<std::string> ops;
  expr_ptr a, b, c;
  filter_fn filter = nullptr;  // resolved filter (null: unknown, fails when evaluated)
  test_fn test = nullptr;      // resolved test (null: unknown, fails when evaluated)
};

// Left-hand side of an assignment / loop variable.
struct target {
  enum kind_t : std::uint8_t { name, tuple, ns_attr };
  kind_t kind = name;
  std::string id;    // name, or namespace variable for ns_attr
  std::string attr;  // ns_attr: attribute
  std::vector<target> items;
};

struct stmt;
using stmt_ptr = std::unique_ptr<stmt>;
using stmt_list = std::vector<stmt_ptr>;

struct macro_def {
  std::string name;  // empty for the caller of a call block
  std::vector<std::string> params;
  std::vector<expr_ptr> defaults;  // for the last defaults.size() params
  stmt_list body;
  bool catch_kwargs = false;   // body reads `kwargs`
  bool catch_varargs = false;  // body reads `varargs`
  bool uses_caller = false;    // body reads `caller`
  int line = 0;
  std::vector<std::string> missing;  // locals that start undefined (see jinja_symbols.h)
};

enum class st : std::uint8_t {
  text,          // text
  output,        // {{ e }}
  if_,           // branches (condition, body) ..., else_
  for_,          // for tgt in e [if cond] body [else else_]
  set,           // set tgt = e
  set_block,     // set tgt [| filter] body endset
  macro,         // macro
  call_block,    // call [(params)] e body endcall; macro holds the caller
  filter_block,  // filter f body endfilter
  with,          // with bindings body endwith
  scope,         // a plain block with its own scope (generation ... endgeneration)
  break_,
  continue_,
};

struct stmt {
  st kind;
  int line = 0;
  std::string text;
  expr_ptr e;
  expr_ptr cond;    // for-loop filter
  expr_ptr filter;  // filter chain applied to a block body (innermost input is the body)
  target tgt;
  std::vector<std::pair<expr_ptr, stmt_list>> branches;
  stmt_list body, else_;
  std::unique_ptr<macro_def> macro;
  std::vector<std::pair<target, expr_ptr>> bindings;
  // Locals of the scope this statement opens (for body / block body, and the for-else
  // body) that start undefined rather than inherited (see jinja_symbols.h).
  std::vector<std::string> missing, else_missing;
};

struct template_ast {
  stmt_list body;
  std::vector<std::string> missing;  // top-level locals that start undefined
};

}  // namespace spate::jinja
