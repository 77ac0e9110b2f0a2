#include "protocol/tool_grammar.h"

#include "grammar/grammar_builder.h"
#include "grammar/json_schema.h"

namespace spate::api {
namespace {

namespace json = boost::json;
using grammar::alternative;
using grammar::grammar_builder;

// {"NAME_KEY": "f", "ARGS_KEY": <schema>}, wrapped in the call's prefix and suffix.
alternative call_of(grammar_builder& b, const tool_call_syntax& syn, const json::object& fn) {
  const std::string name(fn.at("name").as_string());
  const json::value* params = fn.if_contains("parameters");
  const json::value any_object = json::object{{"type", "object"}};
  std::string head = syn.call_prefix + "{" + json::serialize(json::string(syn.name_key)) + ": " +
                     json::serialize(json::string(name)) + ", " + json::serialize(json::string(syn.args_key)) + ": ";
  try {
    return grammar_builder::literal(head) + grammar::add_json_schema(b, params && !params->is_null() ? *params : any_object) +
           grammar_builder::literal("}" + syn.call_suffix);
  } catch (const grammar::grammar_error& e) {
    throw grammar::grammar_error("parameters of function '" + name + "': " + e.what());
  }
}

}  // namespace

json::value tool_grammar_spec(const tool_request& t, tool_call_format f) {
  json::array functions;
  for (const json::value& tool : t.tools) {
    const json::object& fn = tool.at("function").as_object();
    if (t.mode == tool_request::choice::named && fn.at("name").as_string() != t.name) continue;
    json::object o{{"name", fn.at("name")}};
    if (const json::value* p = fn.if_contains("parameters"); p && !p->is_null()) o["parameters"] = *p;
    functions.push_back(std::move(o));
  }
  const bool response = t.mode == tool_request::choice::automatic;
  const bool parallel = t.parallel && t.mode != tool_request::choice::named;
  return json::object{{"format", tool_call_format_name(f)}, {"functions", std::move(functions)},
                      {"parallel", parallel}, {"response", response}};
}

grammar::grammar build_tool_grammar(const json::value& spec) {
  const json::object& s = spec.as_object();
  const tool_call_syntax syn = syntax_of(*tool_call_format_from_name(s.at("format").as_string()));
  grammar_builder b;
  std::vector<alternative> calls;
  for (const json::value& fn : s.at("functions").as_array()) calls.push_back(call_of(b, syn, fn.as_object()));
  const alternative call = b.group(std::move(calls));
  alternative list = grammar_builder::literal(syn.list_open) + call;
  if (s.at("parallel").as_bool()) {
    list = list + b.repeat(grammar_builder::literal(syn.list_sep) + call, 0, k_max_parallel_tool_calls - 1);
  }
  list = list + grammar_builder::literal(syn.list_close);
  std::vector<alternative> root{std::move(list)};
  if (s.at("response").as_bool()) {
    root.push_back(grammar_builder::literal("{\"response\": ") + grammar::add_json_schema(b, json::object{{"type", "string"}}) +
                   grammar_builder::literal("}"));
  }
  return b.finish(b.add_rule("root", std::move(root)));
}

}  // namespace spate::api
