#include "jinja/jinja_symbols.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace spate::jinja {
namespace {

// How a scope's local starts (jinja2.idtracking's VAR_LOAD_*).
enum class load_kind : std::uint8_t { param, resolve, alias, undefined };

// The symbol table of one scope (jinja2.idtracking.Symbols).
struct symbols {
  const symbols* parent = nullptr;
  std::map<std::string, load_kind> refs;
  std::set<std::string> stores;

  bool find_ref(const std::string& name) const {
    for (const symbols* s = this; s; s = s->parent)
      if (s->refs.count(name)) return true;
    return false;
  }
  void store(const std::string& name) {
    stores.insert(name);
    if (refs.count(name)) return;
    refs[name] = parent && parent->find_ref(name) ? load_kind::alias : load_kind::undefined;
  }
  void param(const std::string& name) {
    stores.insert(name);
    refs[name] = load_kind::param;
  }
  void load(const std::string& name) {
    if (!find_ref(name)) refs[name] = load_kind::resolve;
  }
  // Merges the if / elif / else branch tables: a name assigned in only some branches is
  // inherited (alias or resolve) instead of starting undefined.
  void branch_update(const std::vector<symbols>& branches) {
    std::map<std::string, std::size_t> counts;
    for (const auto& b : branches)
      for (const auto& t : b.stores)
        if (!stores.count(t)) ++counts[t];
    for (const auto& b : branches) {
      for (const auto& [k, v] : b.refs) refs[k] = v;
      stores.insert(b.stores.begin(), b.stores.end());
    }
    for (const auto& [name, n] : counts) {
      if (n == branches.size()) continue;
      refs[name] = parent && parent->find_ref(name) ? load_kind::alias : load_kind::resolve;
    }
  }
  std::vector<std::string> missing() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : refs)
      if (v == load_kind::undefined) out.push_back(k);
    return out;
  }
};

// jinja2.idtracking.FrameSymbolVisitor: what one scope's own statements read and assign.
void visit_expr(const expr* e, symbols& s) {
  if (!e) return;
  if (e->kind == ex::name) s.load(e->name);
  visit_expr(e->a.get(), s);
  visit_expr(e->b.get(), s);
  visit_expr(e->c.get(), s);
  for (const auto& x : e->items) visit_expr(x.get(), s);
  for (const auto& [k, x] : e->kwargs) visit_expr(x.get(), s);
}

void visit_target(const target& t, symbols& s, bool as_param) {
  switch (t.kind) {
    case target::name:
      if (as_param)
        s.param(t.id);
      else
        s.store(t.id);
      return;
    case target::tuple:
      for (const auto& x : t.items) visit_target(x, s, as_param);
      return;
    case target::ns_attr: s.load(t.id); return;
  }
}

void visit_stmts(const stmt_list& body, symbols& s);

void visit_if(const stmt& node, symbols& s) {
  visit_expr(node.branches[0].first.get(), s);
  symbols body = s;
  visit_stmts(node.branches[0].second, body);
  // The elif clauses are nested If nodes visited in one copy, each with its own merge.
  symbols elifs = s;
  for (std::size_t i = 1; i < node.branches.size(); ++i) {
    visit_expr(node.branches[i].first.get(), elifs);
    symbols b = elifs;
    visit_stmts(node.branches[i].second, b);
    elifs.branch_update({b, elifs, elifs});
  }
  symbols otherwise = s;
  visit_stmts(node.else_, otherwise);
  s.branch_update({body, elifs, otherwise});
}

void visit_stmt(const stmt& node, symbols& s) {
  switch (node.kind) {
    case st::output: visit_expr(node.e.get(), s); return;
    case st::if_: visit_if(node, s); return;
    case st::for_: visit_expr(node.e.get(), s); return;  // the rest is the loop's own scope
    case st::set:
      visit_expr(node.e.get(), s);
      visit_target(node.tgt, s, false);
      return;
    case st::set_block: visit_target(node.tgt, s, false); return;
    case st::macro: s.store(node.macro->name); return;
    case st::call_block: visit_expr(node.e.get(), s); return;
    case st::filter_block: visit_expr(node.filter.get(), s); return;
    case st::with:
      for (const auto& [t, x] : node.bindings) visit_expr(x.get(), s);
      return;
    default: return;
  }
}

void visit_stmts(const stmt_list& body, symbols& s) {
  for (const auto& node : body) visit_stmt(*node, s);
}

void analyze_nested(stmt_list& body, const symbols& scope);

void analyze_macro(macro_def& m, const symbols& parent) {
  symbols s;
  s.parent = &parent;
  for (const auto& p : m.params) s.param(p);
  if (m.uses_caller) s.param("caller");
  if (m.catch_kwargs) s.param("kwargs");
  if (m.catch_varargs) s.param("varargs");
  for (const auto& d : m.defaults) visit_expr(d.get(), s);
  visit_stmts(m.body, s);
  m.missing = s.missing();
  analyze_nested(m.body, s);
}

// Analyzes the scopes opened inside `body` (whose own scope is `scope`).
void analyze_nested(stmt_list& body, const symbols& scope) {
  for (auto& node : body) {
    switch (node->kind) {
      case st::if_:
        for (auto& [c, b] : node->branches) analyze_nested(b, scope);
        analyze_nested(node->else_, scope);
        break;
      case st::for_: {
        symbols s;
        s.parent = &scope;
        visit_target(node->tgt, s, true);
        visit_stmts(node->body, s);
        node->missing = s.missing();
        analyze_nested(node->body, s);
        symbols e;
        e.parent = &scope;
        visit_stmts(node->else_, e);
        node->else_missing = e.missing();
        analyze_nested(node->else_, e);
        break;
      }
      case st::macro:
      case st::call_block: analyze_macro(*node->macro, scope); break;
      case st::with: {
        symbols s;
        s.parent = &scope;
        for (const auto& [t, x] : node->bindings) visit_target(t, s, true);
        visit_stmts(node->body, s);
        node->missing = s.missing();
        analyze_nested(node->body, s);
        break;
      }
      case st::filter_block:
      case st::set_block:
      case st::scope: {
        symbols s;
        s.parent = &scope;
        visit_stmts(node->body, s);
        if (node->kind == st::filter_block) visit_expr(node->filter.get(), s);
        node->missing = s.missing();
        analyze_nested(node->body, s);
        break;
      }
      default: break;
    }
  }
}

}  // namespace

void analyze_scopes(template_ast& ast) {
  symbols root;
  visit_stmts(ast.body, root);
  ast.missing = root.missing();
  analyze_nested(ast.body, root);
}

}  // namespace spate::jinja
