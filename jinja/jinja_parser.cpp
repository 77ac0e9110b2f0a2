#include "jinja/jinja_parser.h"

#include <algorithm>
#include <functional>

#include "jinja/jinja_builtins.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_lexer.h"

namespace spate::jinja {
namespace {

constexpr int k_max_nesting = 100;  // nested statements / parenthesized expressions

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

class parser {
 public:
  explicit parser(std::vector<token> toks) : t_(std::move(toks)) {}

  template_ast run() {
    template_ast a;
    a.body = subparse({});
    return a;
  }

 private:
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
    explicit depth_guard(parser& p) : p_(p) {
      if (++p_.nesting_ > k_max_nesting) p_.fail("template nested too deeply");
    }
    ~depth_guard() { --p_.nesting_; }
    parser& p_;
  };

  // Bounds the depth of the tree so that evaluation recursion stays bounded.
  expr_ptr finish(expr_ptr e) {
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

  // ----- statements -----
  [[noreturn]] void fail_unknown_or_eof(const std::string* name, int line) {
    std::vector<std::string> expected;
    for (const auto& ends : end_stack_)
      for (const auto& e : ends) expected.push_back(e);
    std::string currently;
    if (!end_stack_.empty()) {
      for (const auto& e : end_stack_.back()) {
        if (!currently.empty()) currently += " or ";
        currently += quoted(e);
      }
    }
    std::string msg = name ? "Encountered unknown tag " + quoted(*name) + "." : "Unexpected end of template.";
    if (!currently.empty()) {
      if (name && std::find(expected.begin(), expected.end(), *name) != expected.end())
        msg += " You probably made a nesting mistake. Jinja is expecting this tag, but currently looking for " +
               currently + ".";
      else
        msg += " Jinja was looking for the following tags: " + currently + ".";
    }
    if (!tag_stack_.empty())
      msg += " The innermost block that needs to be closed is " + quoted(tag_stack_.back()) + ".";
    fail(msg, line);
  }

  stmt_list subparse(const std::vector<std::string>& end_tokens) {
    stmt_list body;
    if (!end_tokens.empty()) end_stack_.push_back(end_tokens);
    while (cur().type != tok::eof) {
      const token& t = cur();
      if (t.type == tok::data) {
        auto s = std::make_unique<stmt>();
        s->kind = st::text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
      } else if (t.type == tok::variable_begin) {
        advance();
        auto s = std::make_unique<stmt>();
        s->kind = st::output;
        s->line = cur().line;
        s->e = parse_tuple(false, true, {}, false);
        expect(tok::variable_end, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == tok::block_begin) {
        advance();
        if (!end_tokens.empty() && cur().type == tok::name &&
            std::find(end_tokens.begin(), end_tokens.end(), cur().text) != end_tokens.end()) {
          end_stack_.pop_back();
          return body;
        }
        body.push_back(parse_statement());
        expect(tok::block_end, "end of statement block");
      } else {
        fail("internal parsing error");
      }
    }
    if (!end_tokens.empty()) end_stack_.pop_back();
    return body;
  }

  stmt_list parse_statements(const std::vector<std::string>& end_tokens, bool drop_needle) {
    skip_op(":");
    expect(tok::block_end, "end of statement block");
    stmt_list body = subparse(end_tokens);
    if (cur().type == tok::eof) {
      end_stack_.push_back(end_tokens);
      fail_unknown_or_eof(nullptr, cur().line);
    }
    if (drop_needle) advance();
    return body;
  }

  stmt_ptr parse_statement() {
    depth_guard guard(*this);
    const token& t = cur();
    if (t.type != tok::name) fail("tag name expected", t.line);
    const std::string name = t.text;
    const int line = t.line;
    static const char* const unsupported[] = {"block", "extends", "include", "import", "from", "autoescape"};
    for (const char* u : unsupported)
      if (name == u) fail("the '" + name + "' tag is not supported in chat templates", line);
    tag_stack_.push_back(name);
    stmt_ptr s;
    if (name == "for")
      s = parse_for();
    else if (name == "if")
      s = parse_if();
    else if (name == "set")
      s = parse_set();
    else if (name == "macro")
      s = parse_macro();
    else if (name == "call")
      s = parse_call_block();
    else if (name == "filter")
      s = parse_filter_block();
    else if (name == "with")
      s = parse_with();
    else if (name == "print")
      s = parse_print();
    else if (name == "break" || name == "continue")
      s = parse_loop_control(name == "break");
    else if (name == "generation")
      s = parse_generation();
    else {
      tag_stack_.pop_back();
      fail_unknown_or_eof(&name, line);
    }
    tag_stack_.pop_back();
    return s;
  }

  stmt_ptr new_stmt(st kind, int line) {
    auto s = std::make_unique<stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  // Runs fn with the parse flags of a new (non-soft) scope; loop controls optionally reset.
  template <class Fn>
  auto in_scope(bool reset_loops, Fn fn) {
    const bool soft = soft_;
    const int loops = loop_depth_;
    soft_ = false;
    if (reset_loops) loop_depth_ = 0;
    struct restore {
      parser& p;
      bool soft;
      int loops;
      ~restore() {
        p.soft_ = soft;
        p.loop_depth_ = loops;
      }
    } r{*this, soft, loops};
    return fn();
  }

  stmt_ptr parse_for() {
    auto s = new_stmt(st::for_, expect_name("for").line);
    s->tgt = parse_assign_target(true, false, {"in"}, false);
    expect_name("in");
    s->e = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s->cond = in_scope(false, [&] { return parse_expression(true); });
    if (is_name("recursive")) fail("recursive loops are not supported");
    s->body = in_scope(false, [&] {
      ++loop_depth_;
      return parse_statements({"endfor", "else"}, false);
    });
    if (advance().text != "endfor") s->else_ = in_scope(false, [&] { return parse_statements({"endfor"}, true); });
    return s;
  }

  stmt_ptr parse_if() {
    auto s = new_stmt(st::if_, expect_name("if").line);
    const bool soft = soft_;
    soft_ = true;
    while (true) {
      expr_ptr cond = parse_tuple(false, false, {}, false);
      stmt_list body = parse_statements({"elif", "else", "endif"}, false);
      s->branches.emplace_back(std::move(cond), std::move(body));
      const token& t = advance();
      if (t.text == "elif") continue;
      if (t.text == "else") s->else_ = parse_statements({"endif"}, true);
      break;
    }
    soft_ = soft;
    return s;
  }

  stmt_ptr parse_set() {
    const int line = advance().line;
    target tgt = parse_assign_target(true, false, {}, true);
    if (skip_op("=")) {
      auto s = new_stmt(st::set, line);
      s->tgt = std::move(tgt);
      s->e = parse_tuple(false, true, {}, false);
      return s;
    }
    auto s = new_stmt(st::set_block, line);
    s->tgt = std::move(tgt);
    in_scope(false, [&] {
      s->filter = parse_filter(nullptr, false);
      s->body = parse_statements({"endset"}, true);
      return 0;
    });
    return s;
  }

  void parse_signature(macro_def& m) {
    expect_op("(");
    while (!is_op(")")) {
      if (!m.params.empty()) expect_op(",");
      const token& n = expect_name();
      std::string name = n.text;
      if (skip_op("="))
        m.defaults.push_back(parse_expression(true));
      else if (!m.defaults.empty())
        fail("non-default argument follows default argument");
      m.params.push_back(std::move(name));
    }
    expect_op(")");
  }

  // Which of caller / kwargs / varargs the body reads (jinja2's find_undeclared).
  static void scan_names(const expr* e, std::vector<std::string>& found) {
    if (!e) return;
    if (e->kind == ex::name && (e->name == "caller" || e->name == "kwargs" || e->name == "varargs"))
      found.push_back(e->name);
    scan_names(e->a.get(), found);
    scan_names(e->b.get(), found);
    scan_names(e->c.get(), found);
    for (const auto& x : e->items) scan_names(x.get(), found);
    for (const auto& [k, x] : e->kwargs) scan_names(x.get(), found);
  }
  static void scan_names(const stmt_list& body, std::vector<std::string>& found) {
    for (const auto& s : body) {
      scan_names(s->e.get(), found);
      scan_names(s->cond.get(), found);
      scan_names(s->filter.get(), found);
      for (const auto& [c, b] : s->branches) {
        scan_names(c.get(), found);
        scan_names(b, found);
      }
      scan_names(s->body, found);
      scan_names(s->else_, found);
      for (const auto& [t, x] : s->bindings) scan_names(x.get(), found);
      if (s->macro) {
        for (const auto& d : s->macro->defaults) scan_names(d.get(), found);
        scan_names(s->macro->body, found);
      }
    }
  }

  void finish_macro(macro_def& m) {
    std::vector<std::string> found;
    scan_names(m.body, found);
    auto has = [&](const char* n) { return std::find(found.begin(), found.end(), n) != found.end(); };
    auto param = [&](const char* n) { return std::find(m.params.begin(), m.params.end(), n) != m.params.end(); };
    if (has("caller")) {
      if (param("caller")) {
        const auto idx =
            static_cast<std::size_t>(std::find(m.params.begin(), m.params.end(), "caller") - m.params.begin());
        if (idx < m.params.size() - m.defaults.size())
          fail(
              "When defining macros or call blocks the special \"caller\" argument must be omitted or be given a "
              "default.",
              m.line);
      } else {
        m.uses_caller = true;
      }
    }
    m.catch_kwargs = has("kwargs") && !param("kwargs");
    m.catch_varargs = has("varargs") && !param("varargs");
  }

  stmt_ptr parse_macro() {
    auto s = new_stmt(st::macro, advance().line);
    auto m = std::make_unique<macro_def>();
    m->line = s->line;
    m->name = expect_name().text;
    in_scope(true, [&] {
      parse_signature(*m);
      m->body = parse_statements({"endmacro"}, true);
      return 0;
    });
    finish_macro(*m);
    s->macro = std::move(m);
    return s;
  }

  stmt_ptr parse_call_block() {
    auto s = new_stmt(st::call_block, advance().line);
    auto m = std::make_unique<macro_def>();
    m->line = s->line;
    if (is_op("("))
      in_scope(true, [&] {
        parse_signature(*m);
        return 0;
      });
    s->e = parse_expression(true);
    if (s->e->kind != ex::call) fail("expected call", s->line);
    m->body = in_scope(true, [&] { return parse_statements({"endcall"}, true); });
    finish_macro(*m);
    s->macro = std::move(m);
    return s;
  }

  stmt_ptr parse_filter_block() {
    auto s = new_stmt(st::filter_block, advance().line);
    in_scope(false, [&] {
      s->filter = parse_filter(nullptr, true);
      s->body = parse_statements({"endfilter"}, true);
      return 0;
    });
    return s;
  }

  stmt_ptr parse_with() {
    auto s = new_stmt(st::with, advance().line);
    while (cur().type != tok::block_end) {
      if (!s->bindings.empty()) expect_op(",");
      target t = parse_assign_target(true, false, {}, false);
      expect_op("=");
      s->bindings.emplace_back(std::move(t), parse_expression(true));
    }
    s->body = in_scope(false, [&] { return parse_statements({"endwith"}, true); });
    return s;
  }

  stmt_ptr parse_print() {
    auto s = new_stmt(st::output, advance().line);
    auto tup = make(ex::tuple, s->line);
    // Each expression is printed in turn: represent as a concat of str() parts.
    while (cur().type != tok::block_end) {
      if (!tup->items.empty()) expect_op(",");
      tup->items.push_back(parse_expression(true));
    }
    tup->kind = ex::concat;
    s->e = finish(std::move(tup));
    return s;
  }

  stmt_ptr parse_loop_control(bool is_break) {
    const int line = advance().line;
    if (loop_depth_ == 0) fail(std::string("'") + (is_break ? "break" : "continue") + "' outside loop", line);
    return new_stmt(is_break ? st::break_ : st::continue_, line);
  }

  stmt_ptr parse_generation() {
    auto s = new_stmt(st::scope, advance().line);
    s->body = in_scope(true, [&] { return parse_statements({"endgeneration"}, true); });
    return s;
  }

  // ----- assignment targets -----
  target to_target(const expr& e) {
    target t;
    if (e.kind == ex::name) {
      t.kind = target::name;
      t.id = e.name;
      return t;
    }
    if (e.kind == ex::tuple) {
      t.kind = target::tuple;
      for (const auto& x : e.items) t.items.push_back(to_target(*x));
      return t;
    }
    static const std::pair<ex, const char*> names[] = {
        {ex::literal, "const"},   {ex::list, "list"}, {ex::dict, "dict"},     {ex::getattr, "getattr"},
        {ex::getitem, "getitem"}, {ex::call, "call"}, {ex::filter, "filter"}, {ex::test, "test"}};
    std::string what = "expr";
    for (const auto& [k, n] : names)
      if (k == e.kind) what = n;
    fail("can't assign to " + quoted(what), e.line);
  }

  target parse_assign_target(bool with_tuple, bool name_only, const std::vector<std::string>& extra_end,
                             bool with_namespace) {
    if (with_namespace && look().type == tok::op && look().text == ".") {
      target t;
      t.kind = target::ns_attr;
      t.id = expect_name().text;
      advance();
      t.attr = expect_name().text;
      return t;
    }
    if (name_only) {
      target t;
      t.id = expect_name().text;
      return t;
    }
    expr_ptr e = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
    return to_target(*e);
  }

  // ----- expressions -----
  bool is_tuple_end(const std::vector<std::string>& extra_end) const {
    const tok t = cur().type;
    if (t == tok::variable_end || t == tok::block_end || (t == tok::op && cur().text == ")")) return true;
    if (t == tok::name) return std::find(extra_end.begin(), extra_end.end(), cur().text) != extra_end.end();
    return false;
  }

  expr_ptr parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra_end,
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

  expr_ptr parse_expression(bool with_condexpr) {
    depth_guard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  expr_ptr parse_condexpr() {
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

  expr_ptr parse_or() {
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

  expr_ptr parse_and() {
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

  expr_ptr parse_not() {
    if (is_name("not")) {
      depth_guard guard(*this);
      auto n = make(ex::not_, advance().line);
      n->a = parse_not();
      return finish(std::move(n));
    }
    return parse_compare();
  }

  expr_ptr parse_compare() {
    int line = cur().line;
    expr_ptr first = parse_math1();
    expr_ptr cmp;
    while (true) {
      std::string op;
      if (cur().type == tok::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
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

  expr_ptr binop(const char* op, int line, expr_ptr a, expr_ptr b) {
    auto n = make(ex::binop, line);
    n->name = op;
    n->a = std::move(a);
    n->b = std::move(b);
    return finish(std::move(n));
  }

  expr_ptr parse_math1() {
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

  expr_ptr parse_concat() {
    const int line = cur().line;
    std::vector<expr_ptr> args;
    args.push_back(parse_math2());
    while (skip_op("~")) args.push_back(parse_math2());
    if (args.size() == 1) return std::move(args[0]);
    auto n = make(ex::concat, line);
    n->items = std::move(args);
    return finish(std::move(n));
  }

  expr_ptr parse_math2() {
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

  expr_ptr parse_pow() {
    int line = cur().line;
    expr_ptr left = parse_unary(true);
    while (skip_op("**")) {
      expr_ptr right = parse_unary(true);
      left = binop("**", line, std::move(left), std::move(right));
      line = cur().line;
    }
    return left;
  }

  expr_ptr parse_unary(bool with_filter) {
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

  expr_ptr parse_primary() {
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

  expr_ptr parse_list() {
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

  expr_ptr parse_dict() {
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

  expr_ptr parse_postfix(expr_ptr node) {
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

  expr_ptr parse_filter_expr(expr_ptr node) {
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

  expr_ptr parse_subscript(expr_ptr node) {
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

  expr_ptr parse_subscribed() {
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
  void parse_call_args(expr& n) {
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

  expr_ptr parse_call(expr_ptr node) {
    auto n = make(ex::call, cur().line);
    parse_call_args(*n);
    n->a = std::move(node);
    return finish(std::move(n));
  }

  expr_ptr parse_filter(expr_ptr node, bool start_inline) {
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

  expr_ptr parse_test(expr_ptr node) {
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

  std::vector<token> t_;
  std::size_t i_ = 0;
  bool soft_ = false;
  int loop_depth_ = 0;
  int nesting_ = 0;
  std::vector<std::vector<std::string>> end_stack_;
  std::vector<std::string> tag_stack_;
};

}  // namespace

template_ast parse_template(std::string_view source) { return parser(tokenize(source)).run(); }

}  // namespace spate::jinja
