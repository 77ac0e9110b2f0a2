#include "jinja/jinja_parser.h"

#include <algorithm>

#include "jinja/jinja_error.h"
#include "jinja/jinja_expr_parser.h"
#include "jinja/jinja_lexer.h"

namespace spate::jinja {
namespace {

using namespace parse_detail;

class parser : public expr_parser {
 public:
  explicit parser(std::vector<token> toks) : expr_parser(std::move(toks)) {}

  template_ast run() {
    template_ast a;
    a.body = subparse({});
    return a;
  }

 private:
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

  int loop_depth_ = 0;
  std::vector<std::vector<std::string>> end_stack_;
  std::vector<std::string> tag_stack_;
};

}  // namespace

template_ast parse_template(std::string_view source) { return parser(tokenize(source)).run(); }

}  // namespace spate::jinja
