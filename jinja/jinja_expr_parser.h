// The expression half of the Jinja2 parser (jinja2.parser's parse_tuple down to parse_test,
// with its error messages) and the token-stream helpers that the statement parser in
// jinja_parser.cpp builds on. Internal to jinja/.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_lexer.h"

namespace spate::jinja::parse_detail {

inline constexpr int k_max_nesting = 100;  // nested statements / parenthesized expressions

// How jinja2's error messages name a token ("end of print statement", a name's text, ...).
std::string describe(const token& t);
// repr() of s, for error messages.
std::string quoted(const std::string& s);
// A new expression node of that kind at that line.
expr_ptr make(ex kind, int line);

// A cursor over the tokens of one template (the last token is eof) and the expression
// grammar. Unknown filters and tests are syntax errors unless soft_ is set (inside an if
// statement or conditional expression, where Jinja2 defers them to evaluation). Throws
// syntax_error.
class expr_parser {
 public:
  explicit expr_parser(std::vector<token> toks) : t_(std::move(toks)) {}

 protected:
  // ----- token stream -----
  const token& cur() const { return t_[i_]; }
  const token& look() const { return t_[std::min(i_ + 1, t_.size() - 1)]; }
  const token& advance() {
    const token& k = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return k;
  }
  bool is_name(std::string_view v) const { return cur().type == tok::name && cur().text == v; }
  bool is_op(std::string_view v) const { return cur().type == tok::op && cur().text == v; }
  bool skip_name(std::string_view v) {
    if (!is_name(v)) return false;
    advance();
    return true;
  }
  bool skip_op(std::string_view v) {
    if (!is_op(v)) return false;
    advance();
    return true;
  }

  [[noreturn]] void fail(const std::string& msg, int line = -1) {
    throw syntax_error(msg, line < 0 ? cur().line : line);
  }

  [[noreturn]] void fail_expected(const std::string& what) {
    if (cur().type == tok::eof) fail("unexpected end of template, expected " + quoted(what) + ".");
    fail("expected token " + quoted(what) + ", got " + quoted(describe(cur())));
  }

  void expect_op(std::string_view v) {
    if (!skip_op(v)) fail_expected(std::string(v));
  }
  void expect(tok type, const char* what) {
    if (cur().type != type) fail_expected(what);
    advance();
  }
  const token& expect_name() {
    if (cur().type != tok::name) fail_expected("name");
    return advance();
  }
  const token& expect_name(std::string_view v) {
    if (!is_name(v)) fail_expected(std::string(v));
    return advance();
  }

  struct depth_guard {
    explicit depth_guard(expr_parser& p) : p_(p) {
      if (++p_.nesting_ > k_max_nesting) p_.fail("template nested too deeply");
    }
    ~depth_guard() { --p_.nesting_; }
    expr_parser& p_;
  };

  // Sets e's depth from its children; fails past k_max_expr_depth so that evaluation
  // recursion stays bounded.
  expr_ptr finish(expr_ptr e);

  // ----- expressions -----
  bool is_tuple_end(const std::vector<std::string>& extra_end) const;
  expr_ptr parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra_end,
                       bool explicit_parens);
  expr_ptr parse_expression(bool with_condexpr);
  expr_ptr parse_condexpr();
  expr_ptr parse_or();
  expr_ptr parse_and();
  expr_ptr parse_not();
  expr_ptr parse_compare();
  expr_ptr binop(const char* op, int line, expr_ptr a, expr_ptr b);
  expr_ptr parse_math1();
  expr_ptr parse_concat();
  expr_ptr parse_math2();
  expr_ptr parse_pow();
  expr_ptr parse_unary(bool with_filter);
  expr_ptr parse_primary();
  expr_ptr parse_list();
  expr_ptr parse_dict();
  expr_ptr parse_postfix(expr_ptr node);
  expr_ptr parse_filter_expr(expr_ptr node);
  expr_ptr parse_subscript(expr_ptr node);
  expr_ptr parse_subscribed();
  // Fills items (positional), kwargs, b (*args) and c (**kwargs) of n.
  void parse_call_args(expr& n);
  expr_ptr parse_call(expr_ptr node);
  expr_ptr parse_filter(expr_ptr node, bool start_inline);
  expr_ptr parse_test(expr_ptr node);

  std::vector<token> t_;
  std::size_t i_ = 0;
  bool soft_ = false;
  int nesting_ = 0;  // open depth_guards
};

}  // namespace spate::jinja::parse_detail
