// JSON Schema compiled to grammars: objects, arrays, combinators, $ref and
// recursion, refused keywords, bounds, and the productivity check (also for GBNF).
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <chrono>
#include <cstdint>
#include <vector>
#include <memory>
#include <string>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "json_schema_test_util.h"
#include "grammar/matcher.h"

namespace spate::grammar {
namespace {

using namespace testing_util;

std::string gbnf_error_of(const std::string& src) {
  try {
    parse_gbnf(src);
  } catch (const grammar_error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(JsonSchemaObjects, PropertiesInOrderRequiredAndOptional) {
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
                                 "required": ["b"]})";
  expect_accepts(schema, {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"b":"x","c":true})", R"({"a":1,"b":"x","c":false})",
                          "{ \"a\": 1, \"b\": \"x\" }", "{\n  \"a\": 1,\n  \"b\": \"x\"\n}"},
                 {"{}", R"({"a":1})", R"({"b":"x","a":1})", R"({"b":1})", R"({"b":"x",})", R"({"b":"x","d":1})", R"({"b":"x","b":"y"})",
                  R"({,"b":"x"})"});
  // All optional: any subset in order, including none.
  expect_accepts(R"({"properties": {"x": {"type": "null"}, "y": {"type": "null"}}})", {"{}", R"({"x":null})", R"({"y":null})", R"({"x":null,"y":null})"},
                 {R"({"y":null,"x":null})", R"({"z":null})", R"({,})"});
}

TEST(JsonSchemaObjects, AdditionalProperties) {
  // Absent or true: no extras (strict); "type": "object" alone: any object.
  expect_accepts(R"({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": true})", {R"({"a":1})", "{}"},
                 {R"({"a":1,"b":2})"});
  expect_accepts(R"({"type": "object"})", {"{}", R"({"x":[1,{"y":null}],"z":"w"})"}, {"[]", R"({"x"})"});
  expect_accepts(R"({"type": "object", "additionalProperties": false})", {"{}"}, {R"({"a":1})"});
  expect_accepts(R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": {"type": "string"}})",
                 {R"({"a":1})", R"({"a":1,"k":"v"})", R"({"a":1,"k":"v","m":"n"})"}, {R"({"a":1,"k":2})", R"({"k":"v","a":1})", R"({"k":"v"})"});
  expect_accepts(R"({"type": "object", "additionalProperties": {"type": "integer"}})", {"{}", R"({"x":1,"y":2})"}, {R"({"x":"1"})"});
  // Extra keys differ from the listed names (also those with the schema false).
  expect_accepts(R"({"properties": {"ab": {"type": "integer"}, "a\"c": {"type": "integer"}, "n\u00e9": false, "tab\t": {"type": "null"}},
                     "additionalProperties": {"type": "string"}})",
                 {R"({"ab":1,"a":"v"})", R"({"abc":"v"})", R"({"b":"v"})", R"({"":"v"})", R"({"a\"":"v","a\"cd":"v"})", R"({"n":"v","n\u00e9x":"v"})",
                  R"({"tab":"v","tab\n":"v"})", "{\"n\xC3\xA8\":\"v\"}"},
                 {R"({"ab":"v"})", R"({"ab":1,"ab":"v"})", R"({"a\"c":"v"})", "{\"n\xC3\xA9\":\"v\"}", R"({"tab\t":"v"})"});
  // Required names missing from properties become properties of additionalProperties' schema.
  expect_accepts(R"({"type": "object", "required": ["id"]})", {R"({"id":1})", R"({"id":{"x":[]}})"}, {"{}", R"({"id":1,"x":2})"});
  EXPECT_EQ(error_of(R"({"type": "object", "properties": {}, "required": ["id"], "additionalProperties": false})"),
            "/required: required property 'id' is not in properties and additionalProperties is false");
  // A property with the schema false is never written.
  expect_accepts(R"({"properties": {"a": false, "b": {"type": "integer"}}})", {R"({"b":1})", "{}"}, {R"({"a":1})"});
  EXPECT_EQ(error_of(R"({"properties": {"a": false}, "required": ["a"]})"), "/properties/a: required property 'a' has the schema false (unsatisfiable)");
}

TEST(JsonSchemaObjects, KeysWithEscapesAndNesting) {
  expect_accepts(R"({"properties": {"say \"hi\"": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}},
                     "required": ["say \"hi\""]})",
                 {R"({"say \"hi\"":{"n":5}})"}, {R"({"say \"hi\"":{}})", R"({"say "hi"":{"n":5}})"});
}

TEST(JsonSchemaArrays, ItemsAndCounts) {
  expect_accepts(R"({"type": "array", "items": {"type": "integer"}})", {"[]", "[1]", "[1,2,3]", "[ 1 , 2 ]", "[\n  1,\n  2\n]"},
                 {"[1,]", "[,1]", "[\"a\"]", "[1 2]", "["});
  expect_accepts(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})", {"[1,2]", "[1,2,3]"}, {"[]", "[1]", "[1,2,3,4]"});
  expect_accepts(R"({"type": "array", "maxItems": 0})", {"[]", "[ ]"}, {"[1]"});
  expect_accepts(R"({"type": "array"})", {"[]", "[1,\"a\",null,{}]"}, {"{}"});
  expect_accepts(R"({"type": "array", "uniqueItems": false, "maxItems": 2})", {"[1,1]"}, {"[1,1,1]"});
  // uniqueItems: the grammar is the array's; distinctness is checked at run time (test_distinct_items.cpp).
  expect_accepts(R"({"type": "array", "uniqueItems": true, "items": {"type": "integer"}})", {"[]", "[1,2]", "[1,1]"}, {"[1,]"});
  EXPECT_EQ(error_of(R"({"type": "array", "uniqueItems": 1})"), "/uniqueItems: must be a boolean");
  EXPECT_EQ(error_of(R"({"type": "array", "minItems": 3, "maxItems": 2})"), "/minItems: minItems is greater than maxItems");
  EXPECT_EQ(error_of(R"({"type": "array", "maxItems": 10001})"), "/maxItems: above the limit of 10000");
}

TEST(JsonSchemaArrays, PrefixItems) {
  const std::string tuple = R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})";
  expect_accepts(tuple, {"[]", "[\"a\"]", "[\"a\",1]"}, {"[1]", "[\"a\",\"b\"]", "[\"a\",1,2]"});
  expect_accepts(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": {"type": "boolean"}, "minItems": 2})",
                 {"[\"a\",1]", "[\"a\",1,true,false]"}, {"[\"a\"]", "[\"a\",1,2]"});
  expect_accepts(R"({"type": "array", "prefixItems": [{"const": 1}, {"const": 2}, {"const": 3}], "maxItems": 2})", {"[]", "[1]", "[1,2]"},
                 {"[1,2,3]"});
  // Draft-4 tuple form.
  expect_accepts(R"({"type": "array", "items": [{"type": "null"}], "additionalItems": {"type": "integer"}})", {"[null]", "[null,1,2]"}, {"[1]"});
  EXPECT_EQ(error_of(R"({"type": "array", "prefixItems": [{}], "items": false, "minItems": 2})"),
            "/minItems: minItems asks for more elements than the schema allows (unsatisfiable)");
}

TEST(JsonSchemaCombinators, AnyOfOneOfAllOf) {
  expect_accepts(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})", {"1", "\"a\""}, {"\"ab\"", "null"});
  expect_accepts(R"({"oneOf": [{"const": "a"}, {"const": "b"}], "discriminator": {"propertyName": "kind"}})", {"\"a\"", "\"b\""}, {"\"c\""});
  expect_accepts(R"({"allOf": [{"type": "integer", "minimum": 3}]})", {"3"}, {"2"});
  expect_accepts(R"({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                               {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})",
                 {R"({"a":1,"b":"x"})"}, {R"({"a":1})", R"({"b":"x"})"});
  expect_accepts(R"({"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
                     "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"name": {"type": "string"}}}]})",
                 {R"({"id":1})", R"({"id":1,"name":"n"})"}, {R"({"name":"n"})"});
  EXPECT_EQ(error_of(R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})"),
            "/allOf/0: allOf is supported only for object schemas ('type' is not an object keyword)");
  EXPECT_EQ(error_of(R"({"allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"a": {"type": "integer"}}}]})"),
            "/allOf/1/properties/a: property 'a' is defined differently by two allOf branches");
  EXPECT_EQ(error_of(R"({"anyOf": []})"), "/anyOf: must be a non-empty array of schemas");
  EXPECT_EQ(error_of(R"({"type": "string", "anyOf": [{}]})"), "(root): 'type' alongside 'anyOf' is not supported");
}

TEST(JsonSchemaRefs, DefsDefinitionsAndRoot) {
  expect_accepts(R"({"$defs": {"n": {"type": "integer", "minimum": 0}}, "type": "array", "items": {"$ref": "#/$defs/n"}})", {"[0,5]"}, {"[-1]"});
  expect_accepts(R"({"definitions": {"a/b": {"const": 1}, "c~d": {"const": 2}},
                     "prefixItems": [{"$ref": "#/definitions/a~1b"}, {"$ref": "#/definitions/c~0d"}]})",
                 {"[1,2]"}, {"[2,1]"});
  EXPECT_EQ(error_of(R"({"$ref": "#/$defs/missing"})"), "/$ref: cannot resolve '#/$defs/missing'");
  EXPECT_EQ(error_of(R"({"$ref": "https://example.com/s.json"})"),
            "/$ref: only references within the schema ('#...') are supported, not 'https://example.com/s.json'");
  EXPECT_EQ(error_of(R"({"$defs": {"x": {"type": "integer"}}, "$ref": "#/$defs/x", "minimum": 1})"), "(root): 'minimum' alongside '$ref' is not supported");
  EXPECT_EQ(error_of(R"({"$defs": {"x": {"type": "strin"}}, "$ref": "#/$defs/x"})"), "/$defs/x/type: unknown type \"strin\"");
}

TEST(JsonSchemaRefs, RecursionTreeAndLinkedList) {
  const auto tree = compile(R"({"type": "object", "properties": {"value": {"type": "integer"},
                                 "children": {"type": "array", "items": {"$ref": "#"}}}, "required": ["value"]})");
  EXPECT_TRUE(accepts(tree, R"({"value":1})"));
  EXPECT_TRUE(accepts(tree, R"({"value":1,"children":[{"value":2},{"value":3,"children":[{"value":4,"children":[]}]}]})"));
  EXPECT_FALSE(accepts(tree, R"({"value":1,"children":[{}]})"));
  EXPECT_FALSE(accepts(tree, R"({"value":1,"children":[{"value":"x"}]})"));
  const auto list = compile(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                 "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}},
                                 "$ref": "#/$defs/node"})");
  EXPECT_TRUE(accepts(list, R"({"v":1,"next":null})"));
  EXPECT_TRUE(accepts(list, R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"));
  EXPECT_FALSE(accepts(list, R"({"v":1,"next":{"v":2}})"));
}

// Recursion is unrolled to k_max_ref_recursion levels: a list of that many
// nodes is accepted, one more is not (the recursive branch is gone at the
// bottom, null is the only choice left).
TEST(JsonSchemaRefs, RecursionDepthIsBounded) {
  const auto list = compile(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                 "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}},
                                 "$ref": "#/$defs/node"})");
  const auto nested = [](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += R"({"v":1,"next":)";
    s += "null";
    s.append(static_cast<size_t>(n), '}');
    return s;
  };
  EXPECT_TRUE(accepts(list, nested(k_max_ref_recursion)));
  EXPECT_FALSE(accepts(list, nested(k_max_ref_recursion + 1)));
  matcher m(list);
  std::string deepest = nested(k_max_ref_recursion);
  ASSERT_TRUE(m.advance(deepest.substr(0, deepest.find("null"))));
  EXPECT_FALSE(m.allowed_bytes().test('{'));  // at the bottom: null only
  EXPECT_TRUE(m.allowed_bytes().test('n'));
}

TEST(JsonSchemaProductive, RecursionWithoutBaseCase) {
  // The root can never finish: an error.
  EXPECT_EQ(error_of(R"({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]})"),
            "(root): the schema is unsatisfiable: no finite JSON value matches it (a recursion without a base case?)");
  // A dead anyOf branch is pruned; the rest still works and a generation cannot enter the dead end.
  const auto g = compile(R"({"$defs": {"loop": {"type": "array", "items": {"$ref": "#/$defs/loop"}, "minItems": 1}},
                              "anyOf": [{"type": "integer"}, {"$ref": "#/$defs/loop"}]})");
  EXPECT_TRUE(accepts(g, "12"));
  matcher m(g);
  EXPECT_FALSE(m.advance("["));
  // Cycles of references that consume nothing match nothing.
  EXPECT_EQ(error_of(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})"),
            "(root): the schema is unsatisfiable: no finite JSON value matches it (a recursion without a base case?)");
}

TEST(JsonSchemaProductive, Gbnf) {
  EXPECT_EQ(gbnf_error_of("root ::= \"a\" root"), "the root rule 'root' cannot match any finite input (a recursion without a base case?)");
  EXPECT_EQ(gbnf_error_of("root ::= \"a\" | x\nx ::= \"b\" x"),
            "rule 'x' can never complete (a recursion without a base case?): a generation entering it could not finish");
  EXPECT_EQ(gbnf_error_of("root ::= \"a\" root | \"b\""), "<no error>");
  // prune_unproductive keeps the language and removes the dead end.
  grammar g = parse_gbnf("root ::= \"a\" | \"c\"\nx ::= \"b\" x");  // x unreachable: allowed
  EXPECT_EQ(productive_rules(g), (std::vector<bool>{true, false}));
  prune_unproductive(g);
  EXPECT_TRUE(g.rules[1].alts.empty());
  EXPECT_EQ(g.rules[0].alts.size(), 2u);
}

TEST(JsonSchemaProductive, LinearOnLongChains) {
  // Rules defined top-down: a round-robin fixed point would take one pass per rule.
  std::string src = "root ::= r0\n";
  const int n = 30000;
  for (int i = 0; i < n; ++i) src += "r" + std::to_string(i) + " ::= \"a\" r" + std::to_string(i + 1) + "\n";
  src += "r" + std::to_string(n) + " ::= \"b\"\n";
  const auto t0 = std::chrono::steady_clock::now();
  const grammar g = parse_gbnf(src);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_EQ(g.rules.size(), static_cast<size_t>(n + 2));
}

TEST(JsonSchemaErrors, UnsupportedKeywordsAreRefusedWithPointers) {
  for (const char* kw : {"not", "if", "then", "else", "patternProperties", "contains", "minProperties", "maxProperties",
                         "dependentRequired", "dependentSchemas", "propertyNames", "minContains", "unevaluatedItems", "$dynamicRef",
                         "nullable", "frobnicate"}) {
    const std::string schema = std::string(R"({"properties": {"x": {")") + kw + R"(": {}}}})";
    EXPECT_EQ(error_of(schema), std::string("/properties/x: unsupported JSON Schema keyword '") + kw + "'") << kw;
  }
  EXPECT_EQ(error_of(R"({"not": {}})"), "(root): unsupported JSON Schema keyword 'not'");
  EXPECT_EQ(error_of(R"({"items": {"properties": {"a~b/c": {"if": {}}}}})"), "/items/properties/a~0b~1c: unsupported JSON Schema keyword 'if'");
  EXPECT_EQ(error_of(R"({"unevaluatedProperties": {}})"), "/unevaluatedProperties: only true or false is supported");
}

TEST(JsonSchemaErrors, BadSchemas) {
  EXPECT_EQ(error_of("false"), "(root): the schema is false: no value matches it (unsatisfiable)");
  EXPECT_EQ(error_of(R"({"properties": {"a": false}, "required": ["a"]})"), "/properties/a: required property 'a' has the schema false (unsatisfiable)");
  EXPECT_EQ(error_of(R"({"items": 3})"), "/items: a schema must be an object or a boolean");
  EXPECT_EQ(error_of(R"({"type": []})"), "/type: an empty type list matches nothing (unsatisfiable)");
  EXPECT_EQ(error_of(R"({"properties": []})"), "/properties: must be an object of schemas");
  EXPECT_EQ(error_of(R"({"required": "a"})"), "/required: must be an array of strings");
}

TEST(JsonSchemaBounds, DepthNodesAndCompileTime) {
  std::string deep = "{}";
  for (int i = 0; i < 150; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_NE(error_of(deep).find("schemas nested deeper than 100"), std::string::npos);
  std::string wide = R"({"properties": {)", names;
  for (int i = 0; i < 10001; ++i) {
    wide += (i ? "," : "") + std::string("\"p") + std::to_string(i) + "\": {\"type\": \"integer\"}";
    names += (i ? "," : "") + std::string("\"p") + std::to_string(i) + "\"";
  }
  wide += "}, \"required\": [" + names + "]}";
  EXPECT_NE(error_of(wide).find("more than 10000 subschemas"), std::string::npos);
  std::string optional = R"({"properties": {)";
  for (int i = 0; i < 1001; ++i) optional += (i ? "," : "") + std::string("\"p") + std::to_string(i) + "\": {}";
  EXPECT_EQ(error_of(optional + "}}"), "(root): more than 1000 optional properties in one object");
  EXPECT_EQ(error_of(optional + R"(}, "required": ["p0"]})"), "<no error>");
  std::string branches = R"({"anyOf": [)";
  for (int i = 0; i < 1001; ++i) branches += (i ? "," : "") + std::string("{\"const\": ") + std::to_string(i) + "}";
  EXPECT_EQ(error_of(branches + "]}"), "/anyOf: more than 1000 branches");
  // A typical schema compiles quickly.
  const auto schema = boost::json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 100}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "email": {"type": "string", "format": "email"}, "born": {"type": "string", "format": "date"},
      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
      "address": {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "string", "minLength": 5, "maxLength": 5}}}},
      "required": ["name", "age"]})");
  const auto t0 = std::chrono::steady_clock::now();
  const grammar g = compile_json_schema(schema);
  const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms, 50.0);
  EXPECT_TRUE(accepts(std::make_shared<const grammar>(g), R"({"name":"Ann","age":30,"tags":["a"],"address":{"zip":"12345"}})"));
}

TEST(JsonSchemaWhitespace, BoundedBetweenTokens) {
  const auto g = compile(R"({"type": "array", "items": {"type": "integer"}})");
  EXPECT_TRUE(accepts(g, "[\n" + std::string(20, ' ') + "1]"));
  EXPECT_FALSE(accepts(g, "[\n" + std::string(21, ' ') + "1]"));
  EXPECT_FALSE(accepts(g, "[  1]"));
  EXPECT_FALSE(accepts(g, "[\n\n1]"));
  EXPECT_FALSE(accepts(g, "[\t1]"));
}

TEST(JsonSchemaCompose, SeveralSchemasInOneBuilder) {
  // Two tools' argument schemas as alternatives of one grammar; the dead branch is pruned in the builder.
  grammar_builder b;
  const alternative a = add_json_schema(b, boost::json::parse(R"({"properties": {"city": {"type": "string"}}, "required": ["city"]})"));
  const alternative c = add_json_schema(b, boost::json::parse(R"({"$defs": {"loop": {"type": "array", "items": {"$ref": "#/$defs/loop"}, "minItems": 1}},
      "anyOf": [{"type": "integer", "minimum": 1, "maximum": 3}, {"$ref": "#/$defs/loop"}]})"));
  const int32_t root = b.add_rule("root", {grammar_builder::literal("a=") + a, grammar_builder::literal("c=") + c});
  const auto g = std::make_shared<const grammar>(b.finish(root));
  EXPECT_TRUE(accepts(g, R"(a={"city":"Oslo"})"));
  EXPECT_TRUE(accepts(g, "c=2"));
  EXPECT_FALSE(accepts(g, "c=4"));
  EXPECT_FALSE(accepts(g, "c=["));
  grammar_builder dead;
  EXPECT_THROW(add_json_schema(dead, boost::json::parse(R"({"type": "array", "items": {"$ref": "#"}, "minItems": 1})")), grammar_error);
}

TEST(JsonSchemaCompose, PydanticStyleSchema) {
  const auto g = compile(R"({"$defs": {"Color": {"enum": ["red", "green"], "title": "Color", "type": "string"},
      "Item": {"properties": {"name": {"title": "Name", "type": "string"}, "price": {"type": "number", "minimum": 0},
                              "tags": {"anyOf": [{"items": {"type": "string"}, "type": "array"}, {"type": "null"}], "default": null}},
               "required": ["name", "price"], "title": "Item", "type": "object"}},
      "properties": {"items": {"items": {"$ref": "#/$defs/Item"}, "title": "Items", "type": "array"},
                     "color": {"$ref": "#/$defs/Color", "description": "the color"},
                     "count": {"type": "integer", "format": "int32"}},
      "required": ["items", "color"], "title": "Order", "type": "object", "$schema": "https://json-schema.org/draft/2020-12/schema"})");
  EXPECT_TRUE(accepts(g, R"({"items":[{"name":"a","price":1.5,"tags":null},{"name":"b","price":0,"tags":["x"]}],"color":"red","count":3})"));
  EXPECT_TRUE(accepts(g, "{\n  \"items\": [],\n  \"color\": \"green\"\n}"));
  EXPECT_FALSE(accepts(g, R"({"items":[{"name":"a","price":-1}],"color":"red"})"));
  EXPECT_FALSE(accepts(g, R"({"items":[],"color":"blue"})"));
}

// Random generations under a schema: every completed output is JSON that satisfies it.
TEST(JsonSchemaCompose, RandomWalksProduceValidInstances) {
  const auto g = compile(R"({"type": "object", "properties": {
      "n": {"type": "integer", "minimum": -20, "maximum": 300}, "c": {"enum": ["x", "yz", 7]},
      "f": {"type": "number", "exclusiveMinimum": 0.5, "maximum": 2}, "b": {"type": ["boolean", "null"]},
      "a": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 1, "maxItems": 3}},
      "required": ["n", "a"], "additionalProperties": false})");
  uint64_t state = 12345;
  const auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull, state >> 33; };
  for (int walk = 0; walk < 300; ++walk) {
    matcher m(g);
    std::string out;
    while (!(m.can_end() && (next() % 8 == 0 || m.allowed_bytes().none()))) {
      const auto allowed = m.allowed_bytes();
      ASSERT_TRUE(allowed.any()) << out;  // never a dead end
      std::vector<uint8_t> choices;
      for (int c = 0; c < 256; ++c) {
        if (allowed[static_cast<size_t>(c)]) choices.push_back(static_cast<uint8_t>(c));
      }
      const uint8_t c = choices[next() % choices.size()];
      ASSERT_TRUE(m.advance(c));
      out += static_cast<char>(c);
      ASSERT_LT(out.size(), 2000u);
    }
    const auto v = boost::json::parse(out).as_object();
    const int64_t n = v.at("n").to_number<int64_t>();
    EXPECT_TRUE(n >= -20 && n <= 300) << out;
    const auto& a = v.at("a").as_array();
    EXPECT_TRUE(a.size() >= 1 && a.size() <= 3) << out;
    for (const auto& x : a) EXPECT_TRUE(x.to_number<int64_t>() >= 0 && x.to_number<int64_t>() <= 9) << out;
    if (const auto* f = v.if_contains("f")) {
      EXPECT_TRUE(f->to_number<double>() > 0.5 && f->to_number<double>() <= 2) << out;
    }
    if (const auto* c = v.if_contains("c")) {
      EXPECT_TRUE(*c == "x" || *c == "yz" || *c == 7) << out;
    }
    if (const auto* b = v.if_contains("b")) {
      EXPECT_TRUE(b->is_bool() || b->is_null()) << out;
    }
  }
}

TEST(JsonObject, AnyObject) {
  const auto g = std::make_shared<const grammar>(compile_json_object());
  for (const char* s : {"{}", R"({"a":1})", "{ \"a\": [1, {\"b\": null}], \"c\": \"d\" }"}) EXPECT_TRUE(accepts(g, s)) << s;
  for (const char* s : {"[]", "1", "{", R"({"a"})", R"({"a":1,})"}) EXPECT_FALSE(accepts(g, s)) << s;
  grammar_builder b;
  const alternative obj = add_json_object(b);
  const alternative again = add_json_object(b);  // shared rules are reused
  EXPECT_EQ(obj[0].rule, again[0].rule);
}

}  // namespace
}  // namespace spate::grammar
