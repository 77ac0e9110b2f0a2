#include "protocol/tool_grammar.h"

#include <algorithm>
#include <array>

#include "grammar/grammar_builder.h"
#include "grammar/json_schema.h"

namespace spate::api {
namespace {

namespace json = boost::json;
using grammar::alternative;
using grammar::grammar_builder;
using grammar::ref;
using grammar::symbol;
using kind = output_constraint::kind;

// {"NAME_KEY": "f", "ARGS_KEY": <schema>}: a call without its prefix and suffix.
alternative call_body(grammar_builder& b, const tool_call_syntax& syn, const json::object& fn) {
  const std::string name(fn.at("name").as_string());
  const json::value* params = fn.if_contains("parameters");
  const json::value any_object = json::object{{"type", "object"}};
  std::string head = "{" + json::serialize(json::string(syn.name_key)) + ": " + json::serialize(json::string(name)) + ", " +
                     json::serialize(json::string(syn.args_key)) + ": ";
  try {
    return grammar_builder::literal(head) + grammar::add_json_schema(b, params && !params->is_null() ? *params : any_object) +
           grammar_builder::literal("}");
  } catch (const grammar::grammar_error& e) {
    throw grammar::grammar_error("parameters of function '" + name + "': " + e.what());
  }
}

// Everything after the first `skip` bytes of list_open + call_prefix: the
// first call's body, further calls, list_close. With parallel calls, the
// calls must differ (distinct_items.h): as the items of the list's JSON
// array (generic, mistral: the array is a distinct rule of its own, from its
// '[' to its ']'), or as top-level values (hermes, llama3). A call that
// repeats an earlier one ends the list (the parsers drop it, tool_calls.h).
int32_t list_rule(grammar_builder& b, const tool_call_syntax& syn, const json::object& s, size_t skip) {
  std::vector<alternative> bodies;
  for (const json::value& fn : s.at("functions").as_array()) bodies.push_back(call_body(b, syn, fn.as_object()));
  const alternative body = b.group(std::move(bodies));
  const bool parallel = s.at("parallel").as_bool();
  const std::string head = syn.list_open + syn.call_prefix;
  // list_open = outer + '[' (or no '[' at all); list_close = ']' + outer closer.
  const size_t bracket = syn.list_open.rfind('[');
  const size_t split = bracket == std::string::npos ? 0 : bracket;
  alternative calls = grammar_builder::literal(std::string_view(head).substr(std::max(skip, split))) + body +
                      grammar_builder::literal(syn.call_suffix);
  if (parallel) {
    const alternative call = grammar_builder::literal(syn.call_prefix) + body + grammar_builder::literal(syn.call_suffix);
    calls = calls + b.repeat(grammar_builder::literal(syn.list_sep) + call, 0, k_max_parallel_tool_calls - 1);
  }
  if (bracket == std::string::npos) {
    if (parallel) b.set_distinct_top_level();
    return b.add_helper({calls + grammar_builder::literal(syn.list_close)});
  }
  const int32_t array = b.add_helper({calls + grammar_builder::literal("]")});
  if (parallel) b.set_distinct(array, /*repeat_ends=*/true);
  const std::string_view before = skip < split ? std::string_view(head).substr(skip, split - skip) : std::string_view();
  return b.add_helper({grammar_builder::literal(before) + ref(array) + grammar_builder::literal(std::string_view(syn.list_close).substr(1))});
}

symbol byte_set(const std::bitset<256>& set) {
  symbol s;
  s.set = set;
  return s;
}

// Free text up to the first occurrence of trigger, which leads into `after`
// (the rest of the output): a KMP automaton over bytes, one rule per matched
// prefix length, every alternative a byte set followed by the next state in
// tail position (bounded matcher depth). Each state may also end the output.
int32_t text_until(grammar_builder& b, std::string_view trigger, int32_t after) {
  const size_t n = trigger.size();
  std::vector<size_t> fail(n, 0);
  for (size_t i = 1, k = 0; i < n; ++i) {
    while (k > 0 && trigger[i] != trigger[k]) k = fail[k - 1];
    if (trigger[i] == trigger[k]) ++k;
    fail[i] = k;
  }
  std::vector<std::array<size_t, 256>> next(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t c = 0; c < 256; ++c) {
      if (c == static_cast<uint8_t>(trigger[i])) next[i][c] = i + 1;
      else next[i][c] = i == 0 ? 0 : next[fail[i - 1]][c];
    }
  }
  std::vector<int32_t> states(n);
  for (size_t i = 0; i < n; ++i) states[i] = b.declare_rule(".text_until_" + std::to_string(i));
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::bitset<256>> to(n + 1);
    for (size_t c = 0; c < 256; ++c) to[next[i][c]].set(c);
    std::vector<alternative> alts{{}};
    for (size_t j = 0; j < n; ++j) {
      if (to[j].any()) alts.push_back({byte_set(to[j]), ref(states[j])});
    }
    if (to[n].any()) alts.push_back({byte_set(to[n]), ref(after)});
    b.set_alts(states[i], std::move(alts));
  }
  return states[0];
}

// llama3_json's plain answer: empty, or a first byte that cannot start a call.
alternative llama3_text(grammar_builder& b) {
  std::bitset<256> first;
  first.set();
  for (const char c : {'{', ' ', '\t', '\n', '\r'}) first.reset(static_cast<uint8_t>(c));
  std::bitset<256> any;
  any.set();
  const alternative rest = b.repeat({byte_set(any)}, 0, -1);
  return b.group({alternative{byte_set(first)} + rest, {}});
}

}  // namespace

json::value answer_spec(const output_constraint& c) {
  json::object o{{"kind", static_cast<int>(c.type)}, {"param", c.param}};
  switch (c.type) {
    case kind::json_schema: o["schema"] = c.schema; break;
    case kind::regex:
    case kind::grammar: o["text"] = c.text; break;
    case kind::choice: {
      json::array a;
      for (const auto& s : c.choices) a.emplace_back(s);
      o["choices"] = std::move(a);
      break;
    }
    default: break;
  }
  return o;
}

output_constraint answer_of(const json::value& spec) {
  const json::object& o = spec.as_object();
  output_constraint c;
  c.type = static_cast<kind>(o.at("kind").as_int64());
  c.param = std::string(o.at("param").as_string());
  if (const auto* s = o.if_contains("schema")) c.schema = *s;
  if (const auto* t = o.if_contains("text")) c.text = std::string(t->as_string());
  if (const auto* a = o.if_contains("choices")) {
    for (const auto& v : a->as_array()) c.choices.emplace_back(v.as_string());
  }
  return c;
}

bool wraps_answer(const output_constraint& c) { return c.type == kind::json_schema || c.type == kind::json_object; }

json::value tool_grammar_spec(const tool_request& t, tool_call_format f, const output_constraint& answer) {
  json::array functions;
  for (const json::value& tool : t.tools) {
    const json::object& fn = tool.at("function").as_object();
    if (t.mode == tool_request::choice::named && fn.at("name").as_string() != t.name) continue;
    json::object o{{"name", fn.at("name")}};
    if (const json::value* p = fn.if_contains("parameters"); p && !p->is_null()) o["parameters"] = *p;
    functions.push_back(std::move(o));
  }
  const bool automatic = t.mode == tool_request::choice::automatic;
  const bool with_answer = automatic && !answer.none();
  const bool generic = f == tool_call_format::generic;
  const bool parallel = t.parallel && t.mode != tool_request::choice::named;
  return json::object{{"format", tool_call_format_name(f)},
                      {"functions", std::move(functions)},
                      {"parallel", parallel},
                      {"response", automatic && generic && !with_answer},
                      {"free_text", automatic && !generic && !with_answer},
                      {"answer", with_answer ? answer_spec(answer) : json::value(nullptr)}};
}

grammar::grammar build_tool_grammar(const json::value& spec, const grammar::grammar* answer, bool compact_json) {
  const json::object& s = spec.as_object();
  const tool_call_format f = *tool_call_format_from_name(s.at("format").as_string());
  const tool_call_syntax syn = syntax_of(f);
  grammar_builder b;
  b.set_json_compact(compact_json);
  std::vector<alternative> root;
  if (s.at("free_text").as_bool() && syn.text_before_calls) {
    const std::string_view trigger = f == tool_call_format::hermes ? "<tool_call>" : "[TOOL_CALLS]";
    const int32_t rest = list_rule(b, syn, s, trigger.size());
    root.push_back({ref(text_until(b, trigger, rest))});
    return b.finish(b.add_rule("root", std::move(root)));
  }
  root.push_back({ref(list_rule(b, syn, s, 0))});
  if (answer != nullptr) {
    const alternative a{ref(b.embed(*answer))};
    const bool wrap = f == tool_call_format::generic && wraps_answer(answer_of(s.at("answer")));
    root.push_back(wrap ? grammar_builder::literal("{\"response\": ") + a + grammar_builder::literal("}") : a);
  } else if (s.at("response").as_bool()) {
    root.push_back(grammar_builder::literal("{\"response\": ") + grammar::add_json_schema(b, json::object{{"type", "string"}}) +
                   grammar_builder::literal("}"));
  } else if (s.at("free_text").as_bool()) {
    root.push_back(llama3_text(b));  // llama3_json: the formats with markers returned above
  }
  return b.finish(b.add_rule("root", std::move(root)));
}

}  // namespace spate::api
