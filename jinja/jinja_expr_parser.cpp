#include "jinja/jinja_expr_parser.h"

#include "jinja/jinja_builtins.h"

namespace spate::jinja::parse_detail {

std::string describe(const token& t) {
  switch (t.type) {
    case tok::name:
    case tok::op: return t.text;
    case tok::data: return "template data / text";
    case tok::variable_begin: return "begin of print statement";
    case tok::variable_end: return "end of print statement";
    case tok::block_begin: return "begin of statement block";
    case tok::block_end: return "end of statement block";
    case tok::string: return "string";
    case tok::integer: return "integer";
    case tok::floating: return "float";
    case tok::eof: return "end of template";
  }
  return "token";
}

std::string quoted(const std::string& s) { return py_str_repr(s); }

expr_ptr make(ex kind, int line) {
  auto e = std::make_unique<expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

expr_ptr expr_parser::finish(expr_ptr e) {
  int d = 0;
  auto see = [&](const expr_ptr& c) {
    if (c) d = std::max(d, c->depth);
  };
  see(e->a);
  see(e->b);
  see(e->c);
  for (const auto& x : e->items) see(x);
  for (const auto& [k, x] : e->kwargs) see(x);
  e->depth = d + 1;
  if (e->depth > k_max_expr_depth) fail("expression too deeply nested", e->line);
  return e;
}

bool expr_parser::is_tuple_end(const std::vector<std::string>& extra_end) const {
  const tok t = cur().type;
  if (t == tok::variable_end || t == tok::block_end || (t == tok::op && cur().text == ")")) return true;
  if (t == tok::name) return std::find(extra_end.begin(), extra_end.end(), cur().text) != extra_end.end();
  return false;
}

expr_ptr expr_parser::parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra_end,
                                  bool explicit_parens) {
  int line = cur().line;
  std::vector<expr_ptr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    if (simplified)
      args.push_back(parse_primary());
    else
      args.push_back(parse_expression(with_condexpr));
    if (is_op(","))
      is_tuple = true;
    else
      break;
    line = cur().line;
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parens) fail("Expected an expression, got " + quoted(describe(cur())));
  }
  auto t = make(ex::tuple, line);
  t->items = std::move(args);
  return finish(std::move(t));
}

expr_ptr expr_parser::parse_expression(bool with_condexpr) {
  depth_guard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

expr_ptr expr_parser::parse_condexpr() {
  int line = cur().line;
  expr_ptr e1 = parse_or();
  while (is_name("if")) {
    advance();
    const bool soft = soft_;
    soft_ = true;
    auto c = make(ex::cond, line);
    c->b = parse_or();
    if (skip_name("else")) c->c = parse_condexpr();
    soft_ = soft;
    c->a = std::move(e1);
    e1 = finish(std::move(c));
    line = cur().line;
  }
  return e1;
}

expr_ptr expr_parser::parse_or() {
  int line = cur().line;
  expr_ptr left = parse_and();
  while (skip_name("or")) {
    auto n = make(ex::or_, line);
    n->a = std::move(left);
    n->b = parse_and();
    left = finish(std::move(n));
    line = cur().line;
  }
  return left;
}

expr_ptr expr_parser::parse_and() {
  int line = cur().line;
  expr_ptr left = parse_not();
  while (skip_name("and")) {
    auto n = make(ex::and_, line);
    n->a = std::move(left);
    n->b = parse_not();
    left = finish(std::move(n));
    line = cur().line;
  }
  return left;
}

expr_ptr expr_parser::parse_not() {
  if (is_name("not")) {
    depth_guard guard(*this);
    auto n = make(ex::not_, advance().line);
    n->a = parse_not();
    return finish(std::move(n));
  }
  return parse_compare();
}

expr_ptr expr_parser::parse_compare() {
  int line = cur().line;
  expr_ptr first = parse_math1();
  expr_ptr cmp;
  while (true) {
    std::string op;
    if (cur().type == tok::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
                                  cur().text == ">" || cur().text == ">=")) {
      op = advance().text;
    } else if (skip_name("in")) {
      op = "in";
    } else if (is_name("not") && look().type == tok::name && look().text == "in") {
      advance();
      advance();
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(ex::compare, line);
      cmp->items.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->items.push_back(parse_math1());
    line = cur().line;
  }
  if (!cmp) return first;
  cmp->line = line;
  return finish(std::move(cmp));
}

expr_ptr expr_parser::binop(const char* op, int line, expr_ptr a, expr_ptr b) {
  auto n = make(ex::binop, line);
  n->name = op;
  n->a = std::move(a);
  n->b = std::move(b);
  return finish(std::move(n));
}

expr_ptr expr_parser::parse_math1() {
  int line = cur().line;
  expr_ptr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const std::string op = advance().text;
    expr_ptr right = parse_concat();
    left = binop(op.c_str(), line, std::move(left), std::move(right));
    line = cur().line;
  }
  return left;
}

expr_ptr expr_parser::parse_concat() {
  const int line = cur().line;
  std::vector<expr_ptr> args;
  args.push_back(parse_math2());
  while (skip_op("~")) args.push_back(parse_math2());
  if (args.size() == 1) return std::move(args[0]);
  auto n = make(ex::concat, line);
  n->items = std::move(args);
  return finish(std::move(n));
}

expr_ptr expr_parser::parse_math2() {
  int line = cur().line;
  expr_ptr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const std::string op = advance().text;
    expr_ptr right = parse_pow();
    left = binop(op.c_str(), line, std::move(left), std::move(right));
    line = cur().line;
  }
  return left;
}

expr_ptr expr_parser::parse_pow() {
  int line = cur().line;
  expr_ptr left = parse_unary(true);
  while (skip_op("**")) {
    expr_ptr right = parse_unary(true);
    left = binop("**", line, std::move(left), std::move(right));
    line = cur().line;
  }
  return left;
}

expr_ptr expr_parser::parse_unary(bool with_filter) {
  depth_guard guard(*this);
  const int line = cur().line;
  expr_ptr node;
  if (is_op("-") || is_op("+")) {
    const bool neg = advance().text == "-";
    node = make(neg ? ex::neg : ex::pos, line);
    node->a = parse_unary(false);
    node = finish(std::move(node));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

expr_ptr expr_parser::parse_primary() {
  const token& t = cur();
  if (t.type == tok::name) {
    expr_ptr n;
    if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
      n = make(ex::literal, t.line);
      n->constant = value::boolean(t.text[0] == 't' || t.text[0] == 'T');
    } else if (t.text == "none" || t.text == "None") {
      n = make(ex::literal, t.line);
      n->constant = value::none();
    } else {
      n = make(ex::name, t.line);
      n->name = t.text;
    }
    advance();
    return n;
  }
  if (t.type == tok::string) {
    auto n = make(ex::literal, t.line);
    std::string s = advance().text;
    while (cur().type == tok::string) s += advance().text;
    n->constant = value::string(std::move(s));
    return n;
  }
  if (t.type == tok::integer || t.type == tok::floating) {
    auto n = make(ex::literal, t.line);
    n->constant = t.type == tok::integer ? value::integer(t.ival) : value::floating(t.fval);
    advance();
    return n;
  }
  if (is_op("(")) {
    depth_guard guard(*this);
    advance();
    expr_ptr n = parse_tuple(false, true, {}, true);
    expect_op(")");
    return n;
  }
  if (is_op("[")) return parse_list();
  if (is_op("{")) return parse_dict();
  fail("unexpected " + quoted(describe(t)), t.line);
}

expr_ptr expr_parser::parse_list() {
  depth_guard guard(*this);
  auto n = make(ex::list, advance().line);
  while (!is_op("]")) {
    if (!n->items.empty()) expect_op(",");
    if (is_op("]")) break;
    n->items.push_back(parse_expression(true));
  }
  expect_op("]");
  return finish(std::move(n));
}

expr_ptr expr_parser::parse_dict() {
  depth_guard guard(*this);
  auto n = make(ex::dict, advance().line);
  while (!is_op("}")) {
    if (!n->items.empty()) expect_op(",");
    if (is_op("}")) break;
    n->items.push_back(parse_expression(true));
    expect_op(":");
    n->items.push_back(parse_expression(true));
  }
  expect_op("}");
  return finish(std::move(n));
}

expr_ptr expr_parser::parse_postfix(expr_ptr node) {
  while (true) {
    if (is_op(".") || is_op("["))
      node = parse_subscript(std::move(node));
    else if (is_op("("))
      node = parse_call(std::move(node));
    else
      break;
  }
  return node;
}

expr_ptr expr_parser::parse_filter_expr(expr_ptr node) {
  while (true) {
    if (is_op("|"))
      node = parse_filter(std::move(node), false);
    else if (is_name("is"))
      node = parse_test(std::move(node));
    else if (is_op("("))
      node = parse_call(std::move(node));
    else
      break;
  }
  return node;
}

expr_ptr expr_parser::parse_subscript(expr_ptr node) {
  const token& t = advance();
  const int line = t.line;
  if (t.text == ".") {
    const token& attr = cur();
    advance();
    if (attr.type == tok::name) {
      auto n = make(ex::getattr, line);
      n->a = std::move(node);
      n->name = attr.text;
      return finish(std::move(n));
    }
    if (attr.type != tok::integer) fail("expected name or number", attr.line);
    auto n = make(ex::getitem, line);
    n->a = std::move(node);
    n->b = make(ex::literal, attr.line);
    n->b->constant = value::integer(attr.ival);
    return finish(std::move(n));
  }
  // "["
  std::vector<expr_ptr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  auto n = make(ex::getitem, line);
  n->a = std::move(node);
  if (args.size() == 1) {
    n->b = std::move(args[0]);
  } else {
    auto tup = make(ex::tuple, line);
    tup->items = std::move(args);
    n->b = finish(std::move(tup));
  }
  return finish(std::move(n));
}

expr_ptr expr_parser::parse_subscribed() {
  const int line = cur().line;
  std::vector<expr_ptr> args;
  if (is_op(":")) {
    advance();
    args.emplace_back();
  } else {
    expr_ptr node = parse_expression(true);
    if (!is_op(":")) return node;
    advance();
    args.push_back(std::move(node));
  }
  if (is_op(":"))
    args.emplace_back();
  else if (!is_op("]") && !is_op(","))
    args.push_back(parse_expression(true));
  else
    args.emplace_back();
  if (is_op(":")) {
    advance();
    if (!is_op("]") && !is_op(","))
      args.push_back(parse_expression(true));
    else
      args.emplace_back();
  } else {
    args.emplace_back();
  }
  auto n = make(ex::slice, line);
  n->a = std::move(args[0]);
  n->b = std::move(args[1]);
  n->c = std::move(args[2]);
  return finish(std::move(n));
}

// Fills items (positional), kwargs, b (*args) and c (**kwargs) of n.
void expr_parser::parse_call_args(expr& n) {
  const int line = cur().line;
  expect_op("(");
  bool require_comma = false;
  auto ensure = [&](bool ok) {
    if (!ok) fail("invalid syntax for function call expression", line);
  };
  while (!is_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*")) {
      ensure(!n.b && !n.c);
      advance();
      n.b = parse_expression(true);
    } else if (is_op("**")) {
      ensure(!n.c);
      advance();
      n.c = parse_expression(true);
    } else if (cur().type == tok::name && look().type == tok::op && look().text == "=") {
      ensure(!n.c);
      std::string key = advance().text;
      advance();
      n.kwargs.emplace_back(std::move(key), parse_expression(true));
    } else {
      ensure(!n.b && !n.c && n.kwargs.empty());
      n.items.push_back(parse_expression(true));
    }
    require_comma = true;
  }
  expect_op(")");
}

expr_ptr expr_parser::parse_call(expr_ptr node) {
  auto n = make(ex::call, cur().line);
  parse_call_args(*n);
  n->a = std::move(node);
  return finish(std::move(n));
}

expr_ptr expr_parser::parse_filter(expr_ptr node, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) advance();
    const token& t = expect_name();
    auto n = make(ex::filter, t.line);
    n->name = t.text;
    while (is_op(".")) {
      advance();
      n->name += "." + expect_name().text;
    }
    if (is_op("(")) parse_call_args(*n);
    n->filter = find_filter(n->name);
    if (!n->filter && !soft_) fail("No filter named " + quoted(n->name) + ".", n->line);
    n->a = std::move(node);
    node = finish(std::move(n));
    start_inline = false;
  }
  return node;
}

expr_ptr expr_parser::parse_test(expr_ptr node) {
  const int line = advance().line;
  const bool negated = skip_name("not");
  auto n = make(ex::test, line);
  n->name = expect_name().text;
  while (is_op(".")) {
    advance();
    n->name += "." + expect_name().text;
  }
  const tok t = cur().type;
  if (is_op("(")) {
    parse_call_args(*n);
  } else if ((t == tok::name || t == tok::string || t == tok::integer || t == tok::floating || is_op("[") ||
              is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail("You cannot chain multiple tests with is");
    expr_ptr arg = parse_primary();
    n->items.push_back(parse_postfix(std::move(arg)));
  }
  n->test = find_test(n->name);
  if (!n->test && !soft_) fail("No test named " + quoted(n->name) + ".", line);
  n->a = std::move(node);
  expr_ptr result = finish(std::move(n));
  if (negated) {
    auto x = make(ex::not_, line);
    x->a = std::move(result);
    result = finish(std::move(x));
  }
  return result;
}

}  // namespace spate::jinja::parse_detail
