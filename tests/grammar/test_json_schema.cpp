// JSON Schema compiled to grammars: per feature, JSON texts accepted and
// rejected by the matcher; errors carry the JSON pointer of the schema location.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
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

TEST(JsonSchema, AnyValueForTrueAndEmptySchema) {
  for (const char* schema : {"true", "{}", R"({"description": "anything"})"}) {
    expect_accepts(schema, {"1", "-2.5e+10", "\"x\"", "null", "true", "[1,[2,{}]]", "{\"a\": {\"b\": [null]}}", "{ }", "[ ]"},
                   {"", "tru", "01", "[1,]", "{\"a\"}", "'x'", " 1", "1 "});
  }
}

TEST(JsonSchema, PrimitiveTypesAndTypeArrays) {
  expect_accepts(R"({"type": "null"})", {"null"}, {"0", "\"null\""});
  expect_accepts(R"({"type": "boolean"})", {"true", "false"}, {"null", "1"});
  expect_accepts(R"({"type": ["string", "null"]})", {"\"a\"", "null"}, {"1", "true"});
  expect_accepts(R"({"type": "integer"})", {"0", "-1", "42", "9999999999999999999", "-9999999999999999999"},
                 {"-0", "01", "1.0", "1e3", "10000000000000000000", "+1", "-"});
  expect_accepts(R"({"type": "number"})", {"0", "-0.5", "3.14", "1e10", "2E-3", "-1.5e+300", "10"},
                 {"01", ".5", "1.", "1e", "--1", "1.5.2", "0x10", "NaN"});
}

TEST(JsonSchema, Strings) {
  expect_accepts(R"({"type": "string"})",
                 {"\"\"", "\"abc\"", "\"a\\\"b\"", "\"\\\\\"", "\"\\n\\t\\/\\u00e9\"", "\"h\xC3\xA9 \xF0\x9F\x98\x80\""},
                 {"abc", "\"a", "\"a\nb\"", std::string("\"a\x01\""), "\"\\x\"", "\"\\u00g0\"", "\"\xC3\""});
}

TEST(JsonSchema, StringLengthsCountCharactersAndEscapes) {
  expect_accepts(R"({"type": "string", "minLength": 2, "maxLength": 3})",
                 {"\"ab\"", "\"abc\"", "\"\\n\\t\"", "\"\\u0041bc\"", "\"\xC3\xA9\xC3\xA9\"", "\"\xF0\x9F\x98\x80\xF0\x9F\x98\x80\""},
                 {"\"a\"", "\"abcd\"", "\"\\n\"", "\"\xC3\xA9\"", "\"\\u0041bcd\""});
  expect_accepts(R"({"type": "string", "maxLength": 0})", {"\"\""}, {"\"a\""});
  expect_accepts(R"({"minLength": 1})", {"\"a\""}, {"\"\"", "1"});  // type inferred
  EXPECT_EQ(error_of(R"({"type": "string", "minLength": 3, "maxLength": 2})"), "/minLength: minLength is greater than maxLength");
  EXPECT_EQ(error_of(R"({"type": "string", "maxLength": -1})"), "/maxLength: must be a non-negative integer");
  EXPECT_EQ(error_of(R"({"type": "string", "maxLength": 100000})"), "/maxLength: above the limit of 10000");
}

TEST(JsonSchema, Formats) {
  expect_accepts(R"({"type": "string", "format": "date"})", {"\"2024-02-29\"", "\"1999-12-31\"", "\"0000-01-01\""},
                 {"\"2024-13-01\"", "\"2024-00-10\"", "\"2024-01-32\"", "\"2024-01-00\"", "\"24-01-01\"", "\"2024-1-01\""});
  expect_accepts(R"({"type": "string", "format": "time"})", {"\"23:59:59Z\"", "\"00:00:00.123+05:30\"", "\"12:30:60-08:00\"", "\"01:02:03z\""},
                 {"\"24:00:00Z\"", "\"12:60:00Z\"", "\"12:00:00\"", "\"12:00Z\"", "\"12:00:00.Z\"", "\"12:00:00+5:00\""});
  expect_accepts(R"({"type": "string", "format": "date-time"})", {"\"2024-05-06T07:08:09Z\"", "\"2024-05-06t07:08:09.5+01:00\""},
                 {"\"2024-05-06 07:08:09Z\"", "\"2024-05-06\"", "\"2024-05-06T07:08:09\""});
  expect_accepts(R"({"type": "string", "format": "uuid"})", {"\"123e4567-e89b-12d3-a456-426614174000\"", "\"ABCDEF01-2345-6789-ABCD-EF0123456789\""},
                 {"\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400\"", "\"g23e4567-e89b-12d3-a456-426614174000\""});
  expect_accepts(R"({"type": "string", "format": "email"})", {"\"a@b.co\"", "\"first.last+tag@mail.example.org\"", "\"x_y@a-b.io\""},
                 {"\"a@b\"", "\"@b.co\"", "\"a@.co\"", "\"a..b@c.co\"", "\"a@b.c\"", "\"a b@c.co\"", "\"a@-b.co\"", "\"a@b-.co\""});
  EXPECT_EQ(error_of(R"({"type": "string", "format": "ipv6"})"),
            "/format: unsupported format 'ipv6' (supported: date, time, date-time, duration, uuid, email, byte, base64, base64url, binary)");
  EXPECT_EQ(error_of(R"({"type": "string", "format": "date", "maxLength": 3})"),
            "/format: format combined with pattern, minLength or maxLength is not supported");
}

TEST(JsonSchema, PatternsSearchUnlessAnchored) {
  expect_accepts(R"({"type": "string", "pattern": "^[a-z]+-[0-9]{2}$"})", {"\"ab-12\"", "\"x-00\""}, {"\"ab-1\"", "\"Ab-12\"", "\" ab-12\"", "\"ab-123\""});
  // Unanchored: the match may be anywhere in the string (ECMA-262 search).
  expect_accepts(R"({"type": "string", "pattern": "[0-9]{3}"})", {"\"123\"", "\"ab 456 cd\"", "\"\\n789\""}, {"\"12\"", "\"1a2\""});
  expect_accepts(R"({"type": "string", "pattern": "^id:"})", {"\"id:\"", "\"id:x y\""}, {"\"xid:\""});
  expect_accepts(R"({"type": "string", "pattern": "end\\$"})", {"\"the end$\"", "\"end$ more\""}, {"\"end\""});
  // The JSON spelling: a quote inside the string is written escaped.
  expect_accepts(R"({"type": "string", "pattern": "^a\"b$"})", {"\"a\\\"b\""}, {"\"a\"b\""});
  expect_accepts(R"({"type": "string", "pattern": "^$"})", {"\"\""}, {"\"a\""});
  expect_accepts(R"({"type": "string", "pattern": "^(?:yes|no)$"})", {"\"yes\"", "\"no\""}, {"\"yesno\""});
  EXPECT_EQ(error_of(R"({"type": "string", "pattern": "^yes|no$"})"),
            "/pattern: an anchor with a top-level '|' is not supported; group the alternatives, e.g. ^(?:a|b)$");
  EXPECT_EQ(error_of(R"j({"type": "string", "pattern": "a(?=b)"})j").rfind("/pattern: regex position 1: ", 0), 0u);
  EXPECT_EQ(error_of(R"({"type": "string", "pattern": "^a$", "maxLength": 3})"), "/pattern: pattern combined with minLength or maxLength is not supported");
}

TEST(JsonSchema, IntegerRanges) {
  expect_accepts(R"({"type": "integer", "minimum": 0, "maximum": 100})", {"0", "1", "9", "10", "99", "100"}, {"-1", "101", "-0", "1000", "00"});
  expect_accepts(R"({"type": "integer", "minimum": -15, "maximum": -3})", {"-15", "-10", "-9", "-3"}, {"-16", "-2", "0", "3", "-20"});
  expect_accepts(R"({"type": "integer", "minimum": -7, "maximum": 12})", {"-7", "-1", "0", "9", "12"}, {"-8", "13", "-0", "20"});
  expect_accepts(R"({"type": "integer", "exclusiveMinimum": 5, "exclusiveMaximum": 20})", {"6", "19"}, {"5", "20", "0"});
  expect_accepts(R"({"type": "integer", "minimum": 1.5, "maximum": 3.9})", {"2", "3"}, {"1", "4"});
  expect_accepts(R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true})", {"6"}, {"5"});  // draft 4
  expect_accepts(R"({"type": "integer", "minimum": 123, "maximum": 4567})", {"123", "129", "130", "999", "1000", "4499", "4560", "4567"},
                 {"122", "4568", "4570", "5000", "12", "99"});
  expect_accepts(R"({"type": "integer", "minimum": 1000})", {"1000", "9999999999999999999"}, {"999", "0", "-5", "10000000000000000000"});
  expect_accepts(R"({"type": "integer", "maximum": -1000})", {"-1000", "-9999999999999999999"}, {"-999", "0", "5"});
  expect_accepts(R"({"type": "integer", "minimum": 0, "maximum": 0})", {"0"}, {"-0", "1", "-1"});
  expect_accepts(R"({"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807})",
                 {"-9223372036854775808", "9223372036854775807", "0"}, {"-9223372036854775809", "9223372036854775808"});
}

TEST(JsonSchema, IntegerRangeErrors) {
  EXPECT_EQ(error_of(R"({"type": "integer", "minimum": 5, "maximum": 4})"), "/minimum: no integer satisfies the bounds (with at most 19 digits)");
  EXPECT_EQ(error_of(R"({"type": "integer", "minimum": "1"})"), "/minimum: must be a number");
  EXPECT_EQ(error_of(R"({"type": "integer", "minimum": 18446744073709551615})"), "/minimum: no integer satisfies the bounds (with at most 19 digits)");
  EXPECT_EQ(error_of(R"({"type": "integer", "maximum": -1e30})"), "/maximum: no integer satisfies the bounds (with at most 19 digits)");
  EXPECT_EQ(error_of(R"({"type": "integer", "exclusiveMinimum": 4, "exclusiveMaximum": 5})"),
            "/exclusiveMinimum: no integer satisfies the bounds (with at most 19 digits)");
}

TEST(JsonSchema, NumberBoundsWithFractions) {
  expect_accepts(R"({"type": "number", "minimum": 0, "maximum": 10})", {"0", "0.5", "9.999", "10", "10.0", "10.000", "3"},
                 {"-0.5", "-1", "10.01", "10.5", "11", "1e1"});
  expect_accepts(R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})", {"0.5", "0.001", "0.999"}, {"0", "0.0", "1", "1.0", "1.5"});
  expect_accepts(R"({"type": "number", "minimum": -2, "maximum": -1})", {"-2", "-2.0", "-1.5", "-1", "-1.000"}, {"-2.5", "-0.5", "-2.01", "0"});
  expect_accepts(R"({"type": "number", "minimum": -1, "exclusiveMaximum": 1})", {"-1", "-0.5", "0", "0.99"}, {"-1.01", "1", "1.0"});
  expect_accepts(R"({"type": "number", "minimum": 2.0})", {"2", "2.5", "1000000"}, {"1.99", "-3"});
  expect_accepts(R"({"type": "number", "minimum": 0, "exclusiveMinimum": 0})", {"0.1"}, {"0", "0.0"});
  expect_accepts(R"({"type": "number", "maximum": -3})", {"-3", "-3.0", "-3.5", "-1000"}, {"-2.99", "0", "5"});
  EXPECT_EQ(error_of(R"({"type": "number", "minimum": 2, "exclusiveMaximum": 2})"), "/minimum: no number satisfies the bounds (with at most 19 integer digits)");
  EXPECT_EQ(error_of(R"({"type": "number", "maximum": "1"})"), "/maximum: must be a number");
}

TEST(JsonSchema, NumberDecimalBounds) {
  expect_accepts(R"({"type": "number", "minimum": 1.5, "maximum": 2.25})",
                 {"1.5", "1.50", "1.6", "1.99999", "2", "2.0", "2.2", "2.25", "2.250", "2.1", "2.24999"},
                 {"1", "1.4", "1.49999", "2.26", "2.251", "3", "-1.5", "0.5"});
  expect_accepts(R"({"type": "number", "exclusiveMinimum": 0.1, "exclusiveMaximum": 0.3})", {"0.2", "0.11", "0.2999", "0.10001"},
                 {"0.1", "0.10", "0.3", "0.30", "0", "0.05"});
  expect_accepts(R"({"type": "number", "minimum": -1.25, "maximum": -0.5})", {"-1.25", "-1", "-1.0", "-0.75", "-0.5", "-0.50"},
                 {"-1.26", "-1.3", "-0.49", "-0.4", "0", "-2"});
  expect_accepts(R"({"type": "number", "minimum": -0.5, "maximum": 0.5})", {"-0.5", "-0.25", "0", "0.0", "0.5", "0.49"},
                 {"-0.51", "-1", "0.51", "1", "-0", "-0.0"});
  expect_accepts(R"({"type": "number", "minimum": 99.99})", {"99.99", "100", "123456.7"}, {"99.98", "99", "-100"});
  expect_accepts(R"({"type": "number", "exclusiveMaximum": 1e-5})", {"0.000009", "0", "-7.5"}, {"0.00001", "0.00002", "1"});
  EXPECT_EQ(error_of(R"({"type": "number", "minimum": 1e-30})"), "/minimum: a bound with more than 20 fraction digits is not supported");
  EXPECT_EQ(error_of(R"({"type": "number", "minimum": 2.5, "maximum": 2.4})"), "/minimum: no number satisfies the bounds (with at most 19 integer digits)");
}

// Brute force: every number in a grid is accepted exactly when it satisfies the bounds.
TEST(JsonSchema, BoundsAgreeWithArithmetic) {
  struct bounds_case {
    const char* schema;
    double lo, hi;
    bool lo_strict, hi_strict;
  };
  const bounds_case cases[] = {
      {R"({"type": "number", "minimum": -1.25, "exclusiveMaximum": 0.5})", -1.25, 0.5, false, true},
      {R"({"type": "number", "exclusiveMinimum": -2, "maximum": -0.125})", -2, -0.125, true, false},
      {R"({"type": "number", "minimum": 0.05, "maximum": 1.2})", 0.05, 1.2, false, false},
      {R"({"type": "integer", "minimum": -120, "exclusiveMaximum": 87})", -120, 87, false, true},
      {R"({"type": "integer", "exclusiveMinimum": 9, "maximum": 1000})", 9, 1000, true, false},
  };
  for (const auto& c : cases) {
    const auto g = compile(c.schema);
    const bool integer = std::string(c.schema).find("integer") != std::string::npos;
    for (int i = -2500; i <= 2500; ++i) {
      std::vector<std::string> texts;
      if (integer) {
        texts.push_back(std::to_string(i / 2));
      } else {
        const int whole = std::abs(i) / 1000, frac = std::abs(i) % 1000;
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%d.%03d", i < 0 ? "-" : "", whole, frac);
        texts.push_back(buf);
        if (frac == 0) texts.push_back(std::to_string(i / 1000));
      }
      for (const std::string& t : texts) {
        const double v = std::strtod(t.c_str(), nullptr);
        const bool want = (c.lo_strict ? v > c.lo : v >= c.lo) && (c.hi_strict ? v < c.hi : v <= c.hi) && t != "-0" && t.rfind("-0.000", 0) != 0;
        EXPECT_EQ(accepts(g, t), want) << c.schema << " " << t;
      }
    }
  }
}

TEST(JsonSchema, EnumAndConstUseCanonicalSerializations) {
  expect_accepts(R"({"enum": ["red", "green", 3, null, true, {"a": [1, 2.5]}, "quote\"d"]})",
                 {"\"red\"", "\"green\"", "3", "null", "true", "{\"a\":[1,2.5]}", "\"quote\\\"d\""}, {"\"blue\"", "4", "false", "{\"a\": [1, 2.5]}"});
  expect_accepts(R"({"enum": [2.5, 1e300, -0.125, 18446744073709551615]})", {"2.5", "1e+300", "-0.125", "18446744073709551615"}, {"2.50", "1E300"});
  // Thousands of values (more than the matcher's live-parse bound) share prefixes in a radix tree.
  std::string many = R"({"enum": [)";
  for (int i = 0; i < 6000; ++i) many += (i ? ",\"v" : "\"v") + std::to_string(i) + "\"";
  many += "]}";
  expect_accepts(many, {"\"v0\"", "\"v5999\"", "\"v123\"", "\"v12\""}, {"\"v6000\"", "\"v\"", "\"v01\""});
  expect_accepts(R"({"enum": ["a", "ab", "abc", "b", "a"]})", {"\"a\"", "\"ab\"", "\"abc\"", "\"b\""}, {"\"abcd\"", "\"\"", "\"ac\""});
  expect_accepts(R"({"const": "fixed"})", {"\"fixed\""}, {"\"fixed2\"", "\"\""});
  expect_accepts(R"({"type": "string", "enum": ["a", 1]})", {"\"a\""}, {"1"});
  expect_accepts(R"({"const": "tab\there"})", {"\"tab\\there\""}, {"\"tab\there\""});
  EXPECT_EQ(error_of(R"({"enum": []})"), "/enum: an empty enum matches nothing (unsatisfiable)");
  EXPECT_EQ(error_of(R"({"type": "integer", "enum": ["a"]})"), "/enum: no value here is of the schema's type (unsatisfiable)");
  EXPECT_EQ(error_of(R"({"enum": [1], "minimum": 3})"), "(root): 'minimum' alongside 'enum' is not supported");
}

TEST(JsonSchema, CompactHasNoWhitespaceBetweenTokens) {
  const auto g = std::make_shared<const grammar>(compile_json_schema(
      boost::json::parse(R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}, "required": ["a"]})"), true));
  EXPECT_TRUE(accepts(g, R"({"a":[1,2]})"));
  for (const char* spaced : {R"({ "a":[1,2]})", R"({"a": [1,2]})", R"({"a":[1, 2]})", "{\"a\":[1,2]\n}"}) EXPECT_FALSE(accepts(g, spaced)) << spaced;
  const auto obj = std::make_shared<const grammar>(compile_json_object(true));
  EXPECT_TRUE(accepts(obj, R"({"k":"a b","n":{"m":[]}})"));  // spaces inside strings stay
  EXPECT_FALSE(accepts(obj, R"({"k": 1})"));
}

}  // namespace
}  // namespace spate::grammar
