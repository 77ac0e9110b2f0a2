#include "jinja/jinja_render.h"

#include <cstdint>

#include "jinja/jinja_builtins.h"
#include "jinja/jinja_error.h"
#include "jinja/jinja_ops.h"
#include "jinja/jinja_parser.h"
#include "jinja/jinja_symbols.h"
#include "jinja/jinja_unicode.h"

namespace spate::jinja {
namespace {

enum class flow : std::uint8_t { normal, break_, continue_ };

// Thrown in fold mode when an expression is not a compile-time constant (Jinja2's Impossible).
struct impossible {};

using frame_ptr = std::shared_ptr<frame>;

class renderer {
 public:
  renderer(render_context& ctx, frame_ptr context_frame) : ctx_(ctx), context_(std::move(context_frame)) {
    char here;
    stack_base_ = reinterpret_cast<std::uintptr_t>(&here);
  }

  // Jinja2's nodes.Expr.as_const(): the value of `e` if it is a constant expression
  // (no variables, calls, context filters or unknown filters/tests), else nullopt.
  std::optional<value> const_value(const expr& e) {
    fold_mode_ = true;
    std::optional<value> v;
    try {
      v = eval(e, nullptr);
    } catch (...) {}
    fold_mode_ = false;
    return v;
  }

  void run(const template_ast& ast, std::string& out) {
    auto root = std::make_shared<frame>();
    root->parent = context_;
    bind_missing(*root, ast.missing);
    exec(ast.body, root, out);
  }

 private:
  // ----- limits -----
  void check_stack() {
    char here;
    const auto now = reinterpret_cast<std::uintptr_t>(&here);
    const std::uintptr_t used = stack_base_ > now ? stack_base_ - now : now - stack_base_;
    if (used > ctx_.limits().max_stack_bytes) throw limit_error("template recursion too deep");
  }

  void append(std::string& out, std::string_view text) {
    if (out.size() + text.size() > ctx_.limits().max_output_bytes)
      throw limit_error("template output exceeded the limit of " + std::to_string(ctx_.limits().max_output_bytes) +
                        " bytes");
    ctx_.charge(text.size());
    out.append(text);
  }

  // Locals that Jinja2's scope analysis starts as undefined (see jinja_symbols.h).
  static void bind_missing(frame& f, const std::vector<std::string>& names) {
    for (const auto& n : names) f.set(n, value::undefined_name(n));
  }

  // ----- names -----
  value lookup(const std::string& name, frame* f) {
    for (frame* p = f; p; p = p->parent.get())
      if (value* v = p->find_local(name)) return *v;
    value g = find_global(name);
    if (!g.is_undefined()) return g;
    return value::undefined_name(name);
  }

  void assign(const target& t, const value& v, frame& f) {
    switch (t.kind) {
      case target::name: f.set(t.id, v); return;
      case target::tuple: {
        std::vector<value> items = to_vector(v, ctx_);
        if (items.size() < t.items.size())
          throw runtime_error("not enough values to unpack (expected " + std::to_string(t.items.size()) + ", got " +
                              std::to_string(items.size()) + ")");
        if (items.size() > t.items.size())
          throw runtime_error("too many values to unpack (expected " + std::to_string(t.items.size()) + ")");
        for (std::size_t i = 0; i < items.size(); ++i) assign(t.items[i], items[i], f);
        return;
      }
      case target::ns_attr: {
        value ns = lookup(t.id, &f);
        if (!ns.is(kind::namespace_)) throw runtime_error("cannot assign attribute on non-namespace object");
        ns.as<ns_obj>().set(t.attr, v);
        return;
      }
    }
  }

  // ----- statements -----
  flow exec(const stmt_list& body, const frame_ptr& f, std::string& out) {
    for (const auto& s : body) {
      const flow r = exec_one(*s, f, out);
      if (r != flow::normal) return r;
    }
    return flow::normal;
  }

  flow exec_one(const stmt& s, const frame_ptr& f, std::string& out) {
    ctx_.line = s.line;
    ctx_.step();
    switch (s.kind) {
      case st::text: append(out, s.text); return flow::normal;
      case st::output: {
        const value v = eval(*s.e, f);
        if (v.is_string())
          append(out, v.str());
        else
          append(out, to_str(v, ctx_));
        return flow::normal;
      }
      case st::if_:
        for (const auto& [cond, body] : s.branches)
          if (truthy(eval(*cond, f))) return exec(body, f, out);
        return exec(s.else_, f, out);
      case st::for_: return exec_for(s, f, out);
      case st::set: assign(s.tgt, eval(*s.e, f), *f); return flow::normal;
      case st::set_block: return exec_set_block(s, f);
      case st::macro: f->set(s.macro->name, make_macro(s, f, s.macro->name)); return flow::normal;
      case st::call_block: {
        const value caller = make_macro(s, f, "");
        const value v = eval_call(*s.e, f, &caller);
        append(out, to_str(v, ctx_));
        return flow::normal;
      }
      case st::filter_block: return exec_filter_block(s, f, out);
      case st::with: return exec_with(s, f, out);
      case st::scope: {
        auto inner = child_frame(s, f);
        std::string buf;
        exec(s.body, inner, buf);
        append(out, buf);
        return flow::normal;
      }
      case st::break_: return flow::break_;
      case st::continue_: return flow::continue_;
    }
    return flow::normal;
  }

  // A new scope inside f for the body of s, with s's late-assigned locals bound undefined.
  static frame_ptr child_frame(const stmt& s, const frame_ptr& f) {
    auto inner = std::make_shared<frame>();
    inner->parent = f;
    bind_missing(*inner, s.missing);
    return inner;
  }

  // The macro of s (a {% macro %} named name, or a call block's caller when name is empty),
  // closing over f.
  value make_macro(const stmt& s, const frame_ptr& f, const std::string& name) {
    auto m = std::make_shared<macro_obj>();
    m->def = s.macro.get();
    m->name = name;
    m->closure = f;
    ctx_.track(f);
    return value::from_object(kind::macro, std::move(m));
  }

  // {% set x %}body{% endset %} (optionally | filters): the body rendered in its own scope.
  flow exec_set_block(const stmt& s, const frame_ptr& f) {
    std::string buf;
    auto inner = child_frame(s, f);
    const flow r = exec(s.body, inner, buf);
    if (r != flow::normal) return r;
    value v = value::string(std::move(buf));
    if (s.filter) v = eval_block_filter(*s.filter, inner, v);
    assign(s.tgt, v, *f);
    return flow::normal;
  }

  // {% filter f %}body{% endfilter %}: the body rendered in its own scope, then filtered.
  flow exec_filter_block(const stmt& s, const frame_ptr& f, std::string& out) {
    std::string buf;
    auto inner = child_frame(s, f);
    const flow r = exec(s.body, inner, buf);
    if (r != flow::normal) return r;
    const value v = eval_block_filter(*s.filter, inner, value::string(std::move(buf)));
    append(out, to_str(v, ctx_));
    return flow::normal;
  }

  // {% with a = x, ... %}: every value is evaluated in f before any is bound in the new scope.
  flow exec_with(const stmt& s, const frame_ptr& f, std::string& out) {
    std::vector<value> vals;
    for (const auto& [t, e] : s.bindings) vals.push_back(eval(*e, f));
    auto inner = child_frame(s, f);
    for (std::size_t i = 0; i < vals.size(); ++i) assign(s.bindings[i].first, vals[i], *inner);
    return exec(s.body, inner, out);
  }

  flow exec_for(const stmt& s, const frame_ptr& f, std::string& out) {
    value iterable = eval(*s.e, f);
    if (s.cond) {
      // for x in seq if cond: a generator filtering seq, evaluated lazily like Jinja's.
      struct st_t {
        std::unique_ptr<value_iter> it;
      };
      auto state = std::make_shared<st_t>();
      state->it = std::make_unique<value_iter>(iterable, ctx_);
      ctx_.track(f);
      const stmt* sp = &s;
      frame_ptr parent = f;
      auto g = std::make_shared<gen_obj>();
      g->pull = [this, state, sp, parent](value& out_item) {
        value x;
        while (state->it->next(x)) {
          auto tmp = std::make_shared<frame>();
          tmp->parent = parent;
          assign(sp->tgt, x, *tmp);
          if (truthy(eval(*sp->cond, tmp))) {
            out_item = x;
            return true;
          }
        }
        return false;
      };
      iterable = value::from_object(kind::generator, std::move(g));
    }
    auto loop = std::make_shared<loop_obj>();
    loop->it = std::make_unique<value_iter>(iterable, ctx_);
    const value loop_value = value::from_object(kind::loop, loop);
    // Like Jinja2, the else block runs unless one iteration ran to its end (an iteration
    // left by break or continue does not count).
    bool completed = false;
    value item;
    while (loop->next(item)) {
      ctx_.step();
      auto inner = std::make_shared<frame>();
      inner->parent = f;
      bind_missing(*inner, s.missing);
      assign(s.tgt, item, *inner);
      inner->set("loop", loop_value);
      const flow r = exec(s.body, inner, out);
      if (r == flow::break_) break;
      if (r == flow::normal) completed = true;
    }
    if (!completed && !s.else_.empty()) {
      auto inner = std::make_shared<frame>();
      inner->parent = f;
      bind_missing(*inner, s.else_missing);
      return exec(s.else_, inner, out);
    }
    return flow::normal;
  }

  // ----- calls -----
  value invoke_macro(const value& mv, call_args& args) {
    const auto& m = mv.as<macro_obj>();
    const macro_def& d = *m.def;
    const std::string display = d.name.empty() ? "caller" : d.name;
    if (ctx_.call_depth >= ctx_.limits().max_call_depth)
      throw limit_error("template recursion too deep (more than " + std::to_string(ctx_.limits().max_call_depth) +
                        " nested macro calls)");
    const std::size_t n = d.params.size();
    std::vector<std::optional<value>> bound(n);
    const std::size_t off = std::min(args.args.size(), n);
    for (std::size_t i = 0; i < off; ++i) bound[i] = args.args[i];
    auto& kw = args.kwargs;
    auto take_kw = [&](const std::string& name) -> std::optional<value> {
      for (auto it = kw.begin(); it != kw.end(); ++it)
        if (it->first == name) {
          value v = std::move(it->second);
          kw.erase(it);
          return v;
        }
      return std::nullopt;
    };
    bool found_caller = false;
    if (off != n) {
      for (std::size_t i = off; i < n; ++i) {
        bound[i] = take_kw(d.params[i]);
        if (d.params[i] == "caller") found_caller = true;
      }
    } else {
      for (const auto& p : d.params) found_caller = found_caller || p == "caller";
    }
    auto fr = std::make_shared<frame>();
    fr->parent = m.closure;
    bind_missing(*fr, d.missing);
    if (d.uses_caller && !found_caller) {
      auto c = take_kw("caller");
      fr->set("caller", c ? *c : value::undefined_hint("No caller defined"));
    }
    if (d.catch_kwargs) {
      auto dict = std::make_shared<dict_obj>();
      for (auto& [k, v] : kw) dict->set(value::string(k), v);
      fr->set("kwargs", value::dict(std::move(dict)));
    } else if (!kw.empty()) {
      for (const auto& [k, v] : kw)
        if (k == "caller")
          throw runtime_error(
              "macro " + py_str_repr(display) +
              " was invoked with two values for the special caller argument. This is most likely a bug.");
      throw runtime_error("macro " + py_str_repr(display) + " takes no keyword argument " + py_str_repr(kw[0].first));
    }
    if (d.catch_varargs) {
      std::vector<value> rest;
      for (std::size_t i = n; i < args.args.size(); ++i) rest.push_back(args.args[i]);
      fr->set("varargs", value::tuple(std::move(rest)));
    } else if (args.args.size() > n) {
      throw runtime_error("macro " + py_str_repr(display) + " takes not more than " + std::to_string(n) +
                          " argument(s)");
    }
    for (std::size_t i = 0; i < n; ++i)
      if (bound[i]) fr->set(d.params[i], *bound[i]);
    const std::size_t first_default = n - d.defaults.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (bound[i]) continue;
      if (i >= first_default)
        fr->set(d.params[i], eval(*d.defaults[i - first_default], fr));
      else
        fr->set(d.params[i], value::undefined_hint("parameter " + py_str_repr(d.params[i]) + " was not provided"));
    }
    ++ctx_.call_depth;
    std::string buf;
    try {
      exec(d.body, fr, buf);
    } catch (...) {
      --ctx_.call_depth;
      throw;
    }
    --ctx_.call_depth;
    return value::string(std::move(buf));
  }

  value call_value(const value& fn, call_args& args) {
    ctx_.step();
    switch (fn.type()) {
      case kind::undefined: raise_undefined(fn);
      case kind::macro: return invoke_macro(fn, args);
      case kind::builtin: return call_builtin(ctx_, fn, args);
      case kind::loop: throw runtime_error("The loop must have the 'recursive' marker to be called recursively.");
      default: throw runtime_error(py_str_repr(type_name(fn)) + " object is not callable");
    }
  }

  void eval_args(const expr& e, const frame_ptr& f, call_args& out) {
    for (const auto& a : e.items) out.args.push_back(eval(*a, f));
    for (const auto& [k, v] : e.kwargs) out.kwargs.emplace_back(k, eval(*v, f));
    if (e.b) {
      const value dyn = eval(*e.b, f);
      for (auto& x : to_vector(dyn, ctx_)) out.args.push_back(std::move(x));
    }
    if (e.c) {
      const value dyn = eval(*e.c, f);
      if (!dyn.is(kind::dict)) throw runtime_error("argument after ** must be a mapping, not " + type_name(dyn));
      for (const auto& [k, v] : dyn.dict_ref().items) {
        if (!k.is_string()) throw runtime_error("keywords must be strings");
        for (const auto& [name, x] : out.kwargs)
          if (name == k.str()) throw runtime_error("got multiple values for keyword argument " + py_str_repr(name));
        out.kwargs.emplace_back(k.str(), v);
      }
    }
  }

  value eval_call(const expr& e, const frame_ptr& f, const value* caller) {
    const value fn = eval(*e.a, f);
    call_args args;
    eval_args(e, f, args);
    if (caller) args.kwargs.emplace_back("caller", *caller);
    ctx_.line = e.line;
    return call_value(fn, args);
  }

  value eval_block_filter(const expr& chain, const frame_ptr& f, const value& input) {
    const value* saved = block_input_;
    block_input_ = &input;
    try {
      value v = eval(chain, f);
      block_input_ = saved;
      return v;
    } catch (...) {
      block_input_ = saved;
      throw;
    }
  }

  // ----- expressions -----
  // The value of e in frame f. In fold mode (f is null) throws impossible for anything that
  // is not a compile-time constant.
  value eval(const expr& e, const frame_ptr& f) {
    check_stack();
    ctx_.line = e.line;
    switch (e.kind) {
      case ex::literal: return e.constant;
      case ex::name:
        if (fold_mode_) throw impossible{};
        return lookup(e.name, f.get());
      case ex::list:
      case ex::tuple: return eval_sequence(e, f);
      case ex::dict: return eval_dict(e, f);
      case ex::getattr: return get_attr(ctx_, eval(*e.a, f), e.name);
      case ex::getitem: return eval_subscript(e, f);
      case ex::slice: throw runtime_error("slice outside of a subscript");
      case ex::call:
        if (fold_mode_) throw impossible{};
        return eval_call(e, f, nullptr);
      case ex::filter: return eval_filter(e, f);
      case ex::test: return eval_test(e, f);
      case ex::neg: return negate(ctx_, eval(*e.a, f));
      case ex::pos: return unary_plus(ctx_, eval(*e.a, f));
      case ex::not_: return value::boolean(!truthy(eval(*e.a, f)));
      case ex::binop: {
        const value a = eval(*e.a, f);
        const value b = eval(*e.b, f);
        ctx_.line = e.line;
        return binary_op(ctx_, e.name, a, b);
      }
      case ex::concat: return eval_concat(e, f);
      case ex::compare: return eval_compare(e, f);
      case ex::and_: {
        value l = eval(*e.a, f);
        if (!truthy(l)) return l;
        return eval(*e.b, f);
      }
      case ex::or_: {
        value l = eval(*e.a, f);
        if (truthy(l)) return l;
        return eval(*e.b, f);
      }
      case ex::cond:
        if (truthy(eval(*e.b, f))) return eval(*e.a, f);
        if (e.c) return eval(*e.c, f);
        if (fold_mode_) throw impossible{};
        return value::undefined_hint("the inline if-expression on line " + std::to_string(e.line) +
                                     " evaluated to false and no else section was defined.");
    }
    return value();
  }

  // [a, b] or (a, b): the items evaluated left to right.
  value eval_sequence(const expr& e, const frame_ptr& f) {
    std::vector<value> items;
    items.reserve(e.items.size());
    for (const auto& x : e.items) items.push_back(eval(*x, f));
    ctx_.charge(items.size() * sizeof(value));
    return e.kind == ex::list ? value::list(std::move(items)) : value::tuple(std::move(items));
  }

  // {k: v, ...}: keys and values alternate in e.items; a later duplicate key wins.
  value eval_dict(const expr& e, const frame_ptr& f) {
    auto d = std::make_shared<dict_obj>();
    for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
      value k = eval(*e.items[i], f);
      value v = eval(*e.items[i + 1], f);
      if (!is_hashable(k)) throw runtime_error("unhashable type: " + py_str_repr(type_name(k)));
      d->set(std::move(k), std::move(v));
    }
    ctx_.charge(d->items.size() * 2 * sizeof(value));
    return value::dict(std::move(d));
  }

  // obj[key] or obj[start:stop:step] (missing slice parts are none).
  value eval_subscript(const expr& e, const frame_ptr& f) {
    const value obj = eval(*e.a, f);
    if (e.b->kind == ex::slice) {
      slice_spec s;
      s.start = e.b->a ? eval(*e.b->a, f) : value::none();
      s.stop = e.b->b ? eval(*e.b->b, f) : value::none();
      s.step = e.b->c ? eval(*e.b->c, f) : value::none();
      return get_slice(ctx_, obj, s, fold_mode_);
    }
    return get_item(ctx_, obj, eval(*e.b, f));
  }

  // input|name(args): the input is e.a, or the body of a {% filter %} block. Unknown filters
  // fail only when applied. Not folded: unknown filters and those that call back into the
  // template (map, select, reject, selectattr, rejectattr).
  value eval_filter(const expr& e, const frame_ptr& f) {
    if (fold_mode_ && (!e.filter || !e.a || e.name == "map" || e.name == "select" || e.name == "reject" ||
                       e.name == "selectattr" || e.name == "rejectattr"))
      throw impossible{};
    value input = e.a ? eval(*e.a, f) : (block_input_ ? *block_input_ : value());
    call_args args;
    eval_args(e, f, args);
    ctx_.line = e.line;
    if (!e.filter) throw runtime_error("No filter named " + py_str_repr(e.name) + " found.");
    ctx_.step();
    return e.filter(ctx_, input, args);
  }

  // input is name(args); unknown tests fail only when applied.
  value eval_test(const expr& e, const frame_ptr& f) {
    if (fold_mode_ && !e.test) throw impossible{};
    const value input = eval(*e.a, f);
    call_args args;
    eval_args(e, f, args);
    ctx_.line = e.line;
    if (!e.test) throw runtime_error("No test named " + py_str_repr(e.name) + " found.");
    ctx_.step();
    return value::boolean(e.test(ctx_, input, args));
  }

  // a ~ b ~ ...: the str() of each operand, concatenated.
  value eval_concat(const expr& e, const frame_ptr& f) {
    std::string out;
    for (const auto& x : e.items) {
      const value v = eval(*x, f);
      if (v.is_string())
        out += v.str();
      else
        out += to_str(v, ctx_);
      ctx_.check_string(out.size());
    }
    ctx_.charge(out.size());
    return value::string(std::move(out));
  }

  // a < b <= c ...: chained comparisons, stopping at the first false one (later operands
  // are not evaluated).
  value eval_compare(const expr& e, const frame_ptr& f) {
    value left = eval(*e.items[0], f);
    for (std::size_t i = 0; i < e.ops.size(); ++i) {
      value right = eval(*e.items[i + 1], f);
      ctx_.line = e.line;
      if (!compare_op(ctx_, e.ops[i], left, right)) return value::boolean(false);
      left = std::move(right);
    }
    return value::boolean(true);
  }

  render_context& ctx_;
  frame_ptr context_;
  std::uintptr_t stack_base_ = 0;
  const value* block_input_ = nullptr;
  bool fold_mode_ = false;
};

// jinja2.compiler.has_safe_repr: values the optimizer may turn into constants.
bool has_safe_repr(const value& v) {
  switch (v.type()) {
    case kind::none:
    case kind::boolean:
    case kind::integer:
    case kind::floating:
    case kind::string:
    case kind::range: return true;
    case kind::list:
    case kind::tuple:
      for (const auto& x : v.seq().items)
        if (!has_safe_repr(x)) return false;
      return true;
    case kind::dict:
      for (const auto& [k, x] : v.dict_ref().items)
        if (!has_safe_repr(k) || !has_safe_repr(x)) return false;
      return true;
    default: return false;
  }
}

// Constant folding as Jinja2 does it, because it changes semantics in corner cases (a folded
// slice goes through the sandbox's lenient getitem): bottom-up, every expression whose
// as_const() succeeds with a value of safe repr becomes a literal; then each {{ }} whose
// expression is constant becomes text (str() of any value).
class folder {
 public:
  folder() : ctx_(limits_, 0), r_(ctx_, std::make_shared<frame>()) {}

  void fold(stmt_list& body) {
    for (auto& s : body) fold(*s);
  }

 private:
  void fold(stmt& s) {
    fold(s.e);
    fold(s.cond);
    fold(s.filter);
    for (auto& [c, b] : s.branches) {
      fold(c);
      fold(b);
    }
    fold(s.body);
    fold(s.else_);
    for (auto& [t, x] : s.bindings) fold(x);
    if (s.macro) {
      for (auto& d : s.macro->defaults) fold(d);
      fold(s.macro->body);
    }
    if (s.kind == st::output && s.e) {
      if (auto v = r_.const_value(*s.e)) {
        try {
          s.text = to_str(*v, ctx_);
          s.kind = st::text;
          s.e.reset();
        } catch (...) {}
      }
    }
  }

  void fold(expr_ptr& e) {
    if (!e) return;
    fold(e->a);
    fold(e->b);
    fold(e->c);
    for (auto& x : e->items) fold(x);
    for (auto& [k, x] : e->kwargs) fold(x);
    if (e->kind == ex::literal || e->kind == ex::slice) return;
    if (auto v = r_.const_value(*e); v && has_safe_repr(*v)) {
      auto lit = std::make_unique<expr>();
      lit->kind = ex::literal;
      lit->line = e->line;
      lit->constant = std::move(*v);
      e = std::move(lit);
    }
  }

  render_limits limits_;
  render_context ctx_;
  renderer r_;
};

}  // namespace

compiled_template::compiled_template(std::string_view source) {
  if (source.size() > k_max_source_bytes)
    throw syntax_error("template source is larger than " + std::to_string(k_max_source_bytes) + " bytes", 1);
  ast_ = parse_template(unicode::sanitize_utf8(source));
  analyze_scopes(ast_);
  folder().fold(ast_.body);
}

std::string compiled_template::render(render_context& ctx, std::vector<std::pair<std::string, value>> vars) const {
  auto context = std::make_shared<frame>();
  context->vars = std::move(vars);
  renderer r(ctx, context);
  std::string out;
  try {
    r.run(ast_, out);
  } catch (runtime_error& e) {
    if (e.line == 0) e.line = ctx.line;
    throw;
  }
  return out;
}

}  // namespace spate::jinja
