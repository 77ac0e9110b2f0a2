// Global functions of the template environment: Jinja2's defaults (range with the sandbox's
// MAX_RANGE, dict, namespace, joiner, cycler, lipsum) and transformers' raise_exception and
// strftime_now. Declared in jinja_builtins.h.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <locale.h>

#include "jinja/jinja_args.h"
#include "jinja/jinja_builtins.h"
#include "jinja/jinja_context.h"
#include "jinja/jinja_error.h"

namespace spate::jinja {
namespace {

value g_range(render_context& ctx, const value&, call_args& a) {
  no_kwargs(a, "range");
  if (a.args.empty()) throw runtime_error("range expected at least 1 argument, got 0");
  if (a.args.size() > 3)
    throw runtime_error("range expected at most 3 arguments, got " + std::to_string(a.args.size()));
  auto r = std::make_shared<range_obj>();
  r->start = 0;
  r->step = 1;
  if (a.args.size() == 1) {
    r->stop = int_arg(a.args[0]);
  } else {
    r->start = int_arg(a.args[0]);
    r->stop = int_arg(a.args[1]);
    if (a.args.size() == 3) r->step = int_arg(a.args[2]);
  }
  if (r->step == 0) throw runtime_error("range() arg 3 must not be zero");
  if (r->size() > 100000)
    throw runtime_error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  return value::from_object(kind::range, std::move(r));
}

// dict(*args, **kwargs) entries.
std::vector<std::pair<value, value>> dict_entries(render_context& ctx, call_args& a, const char* name) {
  if (a.args.size() > 1)
    throw runtime_error(std::string(name) + " expected at most 1 argument, got " + std::to_string(a.args.size()));
  std::vector<std::pair<value, value>> out;
  if (!a.args.empty()) {
    const value& src = a.args[0];
    if (src.is(kind::dict)) {
      for (const auto& kv : src.dict_ref().items) out.push_back(kv);
    } else {
      value_iter it(src, ctx);
      value x;
      std::size_t i = 0;
      while (it.next(x)) {
        std::vector<value> pair = to_vector(x, ctx);
        if (pair.size() != 2)
          throw runtime_error("dictionary update sequence element #" + std::to_string(i) + " has length " +
                              std::to_string(pair.size()) + "; 2 is required");
        out.emplace_back(pair[0], pair[1]);
        ++i;
      }
    }
  }
  for (auto& [k, v] : a.kwargs) out.emplace_back(value::string(k), v);
  return out;
}

value g_dict(render_context& ctx, const value&, call_args& a) {
  auto d = std::make_shared<dict_obj>();
  for (auto& [k, v] : dict_entries(ctx, a, "dict")) {
    if (!is_hashable(k)) throw runtime_error("unhashable type: " + py_str_repr(type_name(k)));
    d->set(k, v);
  }
  ctx.charge(d->items.size() * 2 * sizeof(value));
  return value::dict(std::move(d));
}

value g_namespace(render_context& ctx, const value&, call_args& a) {
  auto ns = std::make_shared<ns_obj>();
  for (auto& [k, v] : dict_entries(ctx, a, "Namespace")) {
    if (!k.is_string()) throw runtime_error("namespace() keys must be strings");
    ns->set(k.str(), v);
  }
  ctx.track(ns);
  return value::from_object(kind::namespace_, std::move(ns));
}

value g_raise_exception(render_context& ctx, const value&, call_args& a) {
  bound_args b("raise_exception", a, {"message"});
  if (!b.has(0)) throw runtime_error("raise_exception() missing 1 required positional argument: 'message'");
  throw raised_error(to_str(b.get(0), ctx));
}

value g_strftime_now(render_context& ctx, const value&, call_args& a) {
  bound_args b("strftime_now", a, {"format"});
  if (!b.has(0)) throw runtime_error("strftime_now() missing 1 required positional argument: 'format'");
  const std::string& fmt = str_arg(b.get(0), "strftime() argument 1");
  std::int64_t secs;
  std::int64_t micros = 0;
  if (ctx.now_unix_s() >= 0) {
    secs = ctx.now_unix_s();
  } else {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
    secs = us / 1000000;
    micros = us % 1000000;
  }
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  localtime_r(&t, &tm);
  tm.tm_isdst = -1;
  // datetime.strftime handles %f, %z and %Z (naive datetime: empty) itself.
  std::string f;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '%' && i + 1 < fmt.size()) {
      const char c = fmt[i + 1];
      if (c == 'f') {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%06lld", static_cast<long long>(micros));
        f += buf;
        ++i;
        continue;
      }
      if (c == 'z' || c == 'Z') {
        ++i;
        continue;
      }
      f += fmt[i];
      f += c;
      ++i;
      continue;
    }
    f += fmt[i];
  }
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(0));
  std::string out;
  for (std::size_t cap = 256; cap <= 65536 + 64 * f.size(); cap *= 4) {
    out.assign(cap, '\0');
    const std::size_t n = strftime_l(out.data(), cap, f.c_str(), &tm, c_locale);
    if (n > 0 || f.empty()) {
      out.resize(n);
      ctx.check_string(out.size());
      ctx.charge(out.size());
      return value::string(std::move(out));
    }
  }
  return value::string("");
}

value bound_method(const char* name, builtin_fn fn, const value& self) {
  auto b = std::make_shared<builtin_obj>();
  b->name = name;
  b->fn = fn;
  b->self = self;
  b->is_method = true;
  return value::from_object(kind::builtin, std::move(b));
}

// jinja2.utils.Joiner: "" on the first call, the separator afterwards. State lives in a
// namespace object bound as the method's self.
value joiner_call(render_context&, const value& self, call_args& a) {
  bound_args b("joiner", a, {});
  auto& st = self.as<ns_obj>();
  value* used = st.find("used");
  if (!truthy(*used)) {
    *used = value::boolean(true);
    return value::string("");
  }
  return *st.find("sep");
}

value g_joiner(render_context& ctx, const value&, call_args& a) {
  bound_args b("joiner", a, {"sep"});
  auto st = std::make_shared<ns_obj>();
  st->set("sep", b.get_or(0, value::string(", ")));
  st->set("used", value::boolean(false));
  ctx.track(st);
  return bound_method("joiner", joiner_call, value::from_object(kind::namespace_, std::move(st)));
}

// jinja2.utils.Cycler, as a namespace with current / next() / reset().
value cycler_step(render_context&, const value& self, call_args& a, bool advance) {
  bound_args b(advance ? "next" : "reset", a, {});
  auto& st = self.as<ns_obj>();
  const auto& items = st.find("items")->seq().items;
  value* pos = st.find("pos");
  if (!advance) {
    *pos = value::integer(0);
    *st.find("current") = items[0];
    return value::none();
  }
  const value rv = items[static_cast<std::size_t>(pos->as_int())];
  *pos = value::integer((pos->as_int() + 1) % static_cast<std::int64_t>(items.size()));
  *st.find("current") = items[static_cast<std::size_t>(pos->as_int())];
  return rv;
}
value cycler_next(render_context& ctx, const value& self, call_args& a) { return cycler_step(ctx, self, a, true); }
value cycler_reset(render_context& ctx, const value& self, call_args& a) { return cycler_step(ctx, self, a, false); }

value g_cycler(render_context& ctx, const value&, call_args& a) {
  no_kwargs(a, "Cycler");
  if (a.args.empty()) throw runtime_error("at least one item has to be provided");
  auto st = std::make_shared<ns_obj>();
  ctx.track(st);
  const value self = value::from_object(kind::namespace_, st);
  st->set("items", value::tuple(a.args));
  st->set("pos", value::integer(0));
  st->set("current", a.args[0]);
  st->set("next", bound_method("next", cycler_next, self));
  st->set("reset", bound_method("reset", cycler_reset, self));
  return self;
}

value g_lipsum(render_context&, const value&, call_args&) {
  throw runtime_error("lipsum() is not supported (it produces random text)");
}

struct global_entry {
  const char* name;
  builtin_fn fn;
};

constexpr global_entry k_globals[] = {
    {"range", g_range},
    {"dict", g_dict},
    {"namespace", g_namespace},
    {"joiner", g_joiner},
    {"cycler", g_cycler},
    {"lipsum", g_lipsum},
    {"raise_exception", g_raise_exception},
    {"strftime_now", g_strftime_now},
};

}  // namespace

value find_global(std::string_view name) {
  for (const auto& g : k_globals) {
    if (name != g.name) continue;
    auto b = std::make_shared<builtin_obj>();
    b->name = g.name;
    b->fn = g.fn;
    return value::from_object(kind::builtin, std::move(b));
  }
  return value();
}

value call_builtin(render_context& ctx, const value& fn, call_args& args) {
  const auto& b = fn.as<builtin_obj>();
  return b.fn(ctx, b.self, args);
}

}  // namespace spate::jinja
