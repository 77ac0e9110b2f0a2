// JSON Schema keywords pydantic emits for common field types: multipleOf
// (int / float / Decimal multiple_of), format "duration" (timedelta), the
// base64 formats (Base64Bytes, val_json_bytes="base64") and "binary" (bytes).
// Per case the texts the matcher must accept and refuse; brute force checks
// multipleOf with bounds against exact integer arithmetic.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "json_schema_test_util.h"
#include "grammar/matcher.h"

namespace spate::grammar {
namespace {

using namespace testing_util;

// ---------------------------------------------------------------- accepted / refused texts

struct text_case {
  const char* name;
  const char* schema;
  std::vector<std::string> good, bad;
};

void PrintTo(const text_case& c, std::ostream* os) { *os << c.name; }

class SchemaKeywordTexts : public testing::TestWithParam<text_case> {};

TEST_P(SchemaKeywordTexts, AcceptsExactlyTheValidTexts) {
  const text_case& c = GetParam();
  const auto g = compile(c.schema);
  for (const auto& s : c.good) EXPECT_TRUE(accepts(g, s)) << c.schema << " should accept " << s;
  for (const auto& s : c.bad) EXPECT_FALSE(accepts(g, s)) << c.schema << " should refuse " << s;
}

// The largest multiple of m with 19 digits.
std::string top_multiple(uint64_t m) {
  const uint64_t top = 9999999999999999999ull;
  return std::to_string(top - top % m);
}

const text_case k_multiple_of_cases[] = {
    {"IntegerFive", R"({"type": "integer", "multipleOf": 5})",
     {"0", "5", "-5", "10", "1000000", "-995", "9999999999999999995", "-9999999999999999995"},
     {"1", "-1", "4", "-0", "05", "5.0", "1e1", "10000000000000000000", "99999999999999999995"}},
    {"IntegerSevenNegativeAndLarge", R"({"type": "integer", "multipleOf": 7})",
     {"0", "7", "-7", "-49", "700", "1001", "-1001", top_multiple(7), "-" + top_multiple(7)},
     {"1", "-8", "50", "-0", "1002", std::to_string(std::stoull(top_multiple(7)) - 7 + 1)}},
    {"IntegerOfFractionalMultiple", R"({"type": "integer", "multipleOf": 2.5})",  // integers: the multiples of 5
     {"0", "5", "-15", "25"}, {"2", "7", "2.5", "-2.5"}},
    {"IntegerNearTheStateLimit", R"({"type": "integer", "multipleOf": 11.87})",  // the multiples of 1187
     {"0", "1187", "-2374", "1187000000000000000"}, {"11.87", "1186", "1188"}},
    {"IntegerOfHundredth", R"({"type": "integer", "multipleOf": 0.01})", {"0", "1", "-7", "123"}, {"1.5", "-0"}},
    {"IntegerThousandWithBounds", R"({"type": "integer", "multipleOf": 1000, "minimum": -2500, "maximum": 3000})",
     {"-2000", "-1000", "0", "1000", "3000"}, {"-3000", "4000", "500", "2500"}},
    {"IntegerHundredThousandFewStates", R"({"type": "integer", "multipleOf": 100000})",
     {"0", "100000", "-300000", "9999999999999900000"}, {"10000", "100001", "-50000"}},
    {"NumberHundredth", R"({"type": "number", "multipleOf": 0.01})",
     {"0", "0.07", "19.99", "-0.01", "3", "3.5", "3.50", "3.500", "12.340000"}, {"0.001", "0.075", "19.999", "-0", "-0.00", "1e2", "1.", ".5"}},
    {"NumberTenthTrailingZeros", R"({"type": "number", "multipleOf": 0.1})",
     {"0.1", "0.10", "0.100", "0.3", "-0.7", "2", "2.0"}, {"0.11", "0.15", "0.01", "-0.05"}},
    {"NumberTwoAndAHalf", R"({"type": "number", "multipleOf": 2.5})",
     {"0", "2.5", "-2.5", "5", "5.0", "7.50", "-12.5", "100"}, {"1", "2.4", "2.55", "6", "-1.25", "2.5e1"}},
    {"NumberIntegerMultiple", R"({"type": "number", "multipleOf": 5})", {"5", "5.0", "-10.00", "0.0"}, {"5.5", "-0.0", "-0", "6"}},
    {"NumberFractionDigitBound", R"({"type": "number", "multipleOf": 0.5})",
     {"1.5", "1.50000000000000000000", "-0.5"}, {"1.500000000000000000000", "1.25"}},
    {"NumberSeventhsOfAHundredth", R"({"type": "number", "multipleOf": 0.07, "minimum": -1, "maximum": 1})",
     {"0", "0.07", "0.14", "0.98", "-0.98", "-0.07"}, {"1", "0.1", "1.05", "-1.05", "0.070001"}},
    {"NumberQuarterWithBounds", R"({"type": "number", "multipleOf": 0.25, "exclusiveMinimum": -1, "maximum": 1.3})",
     {"-0.75", "0", "0.25", "1.25", "1.250"}, {"-1", "-1.0", "1.5", "1.3", "0.3"}},
    {"NumberWithStrictZeroBound", R"({"type": "number", "multipleOf": 3, "exclusiveMaximum": 0})", {"-3", "-3.0", "-999"}, {"0", "0.0", "3", "-1"}},
    {"NumberWithDecimalBoundNotOnTheGrid", R"({"type": "number", "multipleOf": 0.5, "minimum": 0.3, "maximum": 2.2})",
     {"0.5", "1", "1.5", "2", "2.0"}, {"0", "2.5", "0.3", "2.2"}},
    {"NumberTypeInferred", R"({"multipleOf": 4})", {"4", "8.0", "-12"}, {"\"4\"", "2"}},
    {"InObject", R"({"type": "object", "properties": {"qty": {"type": "integer", "multipleOf": 12, "minimum": 0, "maximum": 100}}, "required": ["qty"]})",
     {"{\"qty\": 0}", "{\"qty\": 96}"}, {"{\"qty\": 100}", "{\"qty\": -12}", "{\"qty\": 13}"}},
};

INSTANTIATE_TEST_SUITE_P(MultipleOf, SchemaKeywordTexts, testing::ValuesIn(k_multiple_of_cases), [](const auto& i) { return std::string(i.param.name); });

// The JSON Schema test suite's cases for "duration" (draft 2020-12, RFC 3339 appendix A).
const text_case k_format_cases[] = {
    {"Duration", R"({"type": "string", "format": "duration"})",
     {"\"P4DT12H30M5S\"", "\"P4Y\"", "\"PT0S\"", "\"P0D\"", "\"P1M\"", "\"PT1M\"", "\"PT36H\"", "\"P1DT12H\"", "\"P2W\"",
      "\"P1Y2M3DT4H5M6S\"", "\"P1Y2M3D\"", "\"PT1H2M3S\"", "\"P1M2D\"", "\"PT1H30M\"", "\"P10Y10M10DT10H10M10S\"", "\"P1Y2M\"",
      "\"PT1H2M\"", "\"PT1M2S\"", "\"P01D\"", "\"P999999D\"", "\"P999999Y999999M999999DT999999H999999M999999S\"", "\"P3W\"", "\"P1D\""},
     {"\"PT1D\"", "\"4DT12H30M5S\"", "\"P\"", "\"P1YT\"", "\"PT\"", "\"P2D1Y\"", "\"P1D2H\"", "\"P2S\"", "\"P1Y2W\"", "\"P\xE0\xA7\xA8Y\"",
      "\"P1\"", "\"PT0.5S\"", "\"P1Y2M3DT4H5M6.5S\"", "\" P1D\"", "\"P1D \"", "\"\"", "\"P1Y2D\"", "\"PT1H2S\"", "\"-P1D\"", "\"P1D2T3H\"",
      "\"P1e2D\"", "\"P1D\\n\"", "\"P1WT1H\"", "\"P0Y1W\"", "\"PT0,5S\"", "\"P-1D\"", "\"P1234567D\"", "\"PT0000001S\"", "\"p1d\"", "P1D"}},
    {"Base64", R"({"type": "string", "format": "base64"})",
     {"\"\"", "\"aGk=\"", "\"aA==\"", "\"aGVsbG8gd29ybGQ=\"", "\"+/+/\"", "\"AAAA\"", "\"aGVsbG8h\"", "\"SGVsbG8sIFdvcmxkIQ==\""},
     {"\"aGk\"", "\"aA\"", "\"aB==\"", "\"aGl=\"", "\"a===\"", "\"====\"", "\"aGk=aGk=\"", "\"-_-_\"", "\"aG k=\"", "\"aGk=\\n\""}},
    {"Byte", R"({"type": "string", "format": "byte"})", {"\"aGk=\"", "\"+/8=\""}, {"\"aGk\"", "\"_w==\""}},
    {"Base64Url", R"({"type": "string", "format": "base64url"})", {"\"aGn_\"", "\"-_8=\"", "\"aA==\"", "\"\""}, {"\"aGn/\"", "\"+w==\"", "\"aGn\""}},
    {"Base64Lengths", R"({"type": "string", "format": "base64", "minLength": 5, "maxLength": 12})",
     {"\"aGVsbG8=\"", "\"aGVsbG8h\"", "\"aGVsbG8gd28=\"", "\"aGVsbG8gd29y\"", "\"aGVsbA==\""},
     {"\"aGk=\"", "\"aGVsbG8gd29ybA==\"", "\"\""}},
    {"Base64MaxLengthOnly", R"({"type": "string", "format": "byte", "maxLength": 7})", {"\"\"", "\"aGk=\"", "\"AAAA\""}, {"\"aGVsbG8h\""}},
    {"Binary", R"({"type": "string", "format": "binary"})", {"\"\"", "\"raw bytes \\u00ff\"", "\"h\xC3\xA9\""}, {"1", "\"a"}},
    {"BinaryWithLength", R"({"type": "string", "format": "binary", "maxLength": 3})", {"\"abc\"", "\"\""}, {"\"abcd\""}},
    {"PydanticModel", R"({"type": "object", "properties": {
        "wait": {"format": "duration", "type": "string"}, "blob": {"format": "binary", "type": "string"},
        "key": {"format": "base64url", "type": "string"}, "step": {"multipleOf": 5, "type": "integer"},
        "price": {"anyOf": [{"multipleOf": 0.01, "type": "number"}, {"type": "string", "pattern": "^[0-9]+$"}]}},
        "required": ["wait", "blob", "key", "step", "price"]})",
     {R"({"wait": "PT1H30M", "blob": "x", "key": "aGk=", "step": 15, "price": 9.99})", R"({"wait":"P3W","blob":"","key":"","step":-5,"price":"12"})"},
     {R"({"wait": "PT1.5H", "blob": "x", "key": "aGk=", "step": 15, "price": 9.99})", R"({"wait": "P1D", "blob": "x", "key": "aGk=", "step": 16, "price": 9.99})",
      R"({"wait": "P1D", "blob": "x", "key": "aGk=", "step": 15, "price": 9.999})", R"({"wait": "P1D", "blob": "x", "key": "aG+=", "step": 15, "price": 1})"}},
};

INSTANTIATE_TEST_SUITE_P(Formats, SchemaKeywordTexts, testing::ValuesIn(k_format_cases), [](const auto& i) { return std::string(i.param.name); });

// ---------------------------------------------------------------- errors

struct error_case {
  const char* name;
  const char* schema;
  const char* error;
};

void PrintTo(const error_case& c, std::ostream* os) { *os << c.name; }

class SchemaKeywordErrors : public testing::TestWithParam<error_case> {};

TEST_P(SchemaKeywordErrors, NamesThePointerAndTheReason) { EXPECT_EQ(error_of(GetParam().schema), GetParam().error); }

const error_case k_error_cases[] = {
    {"Zero", R"({"type": "integer", "multipleOf": 0})", "/multipleOf: must be greater than 0"},
    {"Negative", R"({"type": "number", "multipleOf": -0.5})", "/multipleOf: must be greater than 0"},
    {"NegativeInteger", R"({"properties": {"a": {"type": "integer", "multipleOf": -5}}})", "/properties/a/multipleOf: must be greater than 0"},
    {"NotANumber", R"({"type": "integer", "multipleOf": "5"})", "/multipleOf: must be a number"},
    {"TooManyFractionDigits", R"({"type": "number", "multipleOf": 1e-19})", "/multipleOf: a multipleOf with more than 18 fraction digits is not supported"},
    {"NumeratorTooLarge", R"({"type": "integer", "multipleOf": 100001})", "/multipleOf: multipleOf without its decimal point is above the limit of 100000"},
    {"NumeratorOfDecimalTooLarge", R"({"type": "number", "multipleOf": 1.00001})", "/multipleOf: multipleOf without its decimal point is above the limit of 100000"},
    {"HugeDouble", R"({"type": "number", "multipleOf": 1e300})", "/multipleOf: multipleOf without its decimal point is above the limit of 100000"},
    {"AutomatonTooLarge", R"({"$defs": {"n": {"type": "integer", "multipleOf": 9973}}, "$ref": "#/$defs/n"})",
     "/$defs/n/multipleOf: multipleOf needs a digit automaton of 189487 states (9973 remainder classes x 19 digit positions), above the limit of 25000"},
    // 1187 is prime: 1187 classes; x 19 integer positions fits, x 22 (two fraction digits) does not.
    {"NumberAutomatonTooLarge", R"({"type": "number", "multipleOf": 11.87})",
     "/multipleOf: multipleOf needs a digit automaton of 26114 states (1187 remainder classes x 22 digit positions), above the limit of 25000"},
    {"NoIntegerInRange", R"({"type": "integer", "multipleOf": 5, "minimum": 1, "maximum": 4})",
     "/multipleOf: no integer (of at most 19 digits) within the bounds is a multiple of it"},
    {"NoNumberInRange", R"({"type": "number", "multipleOf": 0.5, "exclusiveMinimum": 1, "exclusiveMaximum": 1.5})",
     "/multipleOf: no number (of at most 19 integer digits) within the bounds is a multiple of it"},
    {"WithEnum", R"({"enum": [5, 10], "multipleOf": 5})", "(root): 'multipleOf' alongside 'enum' is not supported"},
    {"Base64WithPattern", R"({"type": "string", "format": "base64", "pattern": "^a"})", "/format: format 'base64' combined with pattern is not supported"},
    {"Base64NoLength", R"({"type": "string", "format": "byte", "minLength": 5, "maxLength": 7})", "/format: no base64 string has 5 to 7 characters (a multiple of 4)"},
    {"DurationWithLength", R"({"type": "string", "format": "duration", "maxLength": 7})", "/format: format combined with pattern, minLength or maxLength is not supported"},
    {"FormatNotAString", R"({"type": "string", "format": 3})", "/format: must be a string"},
};

INSTANTIATE_TEST_SUITE_P(Keywords, SchemaKeywordErrors, testing::ValuesIn(k_error_cases), [](const auto& i) { return std::string(i.param.name); });

// ---------------------------------------------------------------- brute force

// A multipleOf schema and its arithmetic: values in thousandths (v / 1000),
// num / 10^k the multiple, bounds in thousandths.
struct arithmetic_case {
  const char* schema;
  bool integer;
  int64_t num;
  int k;
  int64_t lo, hi;  // thousandths; INT64_MIN / INT64_MAX: none
  bool lo_strict, hi_strict;
  int64_t span;  // the grid: -span..span (numbers in steps of 0.001)
};

void PrintTo(const arithmetic_case& c, std::ostream* os) { *os << c.schema; }

class MultipleOfArithmetic : public testing::TestWithParam<arithmetic_case> {};

constexpr int64_t k_none_lo = INT64_MIN, k_none_hi = INT64_MAX;

// Every text of a grid (integers, or numbers with up to 3 fraction digits in
// their shortest and padded spellings) is accepted exactly when its value is
// a multiple within the bounds.
TEST_P(MultipleOfArithmetic, AgreesWithExactArithmetic) {
  const arithmetic_case& c = GetParam();
  const auto g = compile(c.schema);
  int64_t pow_k = 1;
  for (int i = 0; i < c.k; ++i) pow_k *= 10;
  const int64_t span = c.span, step = c.integer ? 1000 : 1;
  int n_accepted = 0;
  for (int64_t v = -span * 1000; v <= span * 1000; v += step) {
    std::vector<std::string> texts;
    const int64_t whole = (v < 0 ? -v : v) / 1000, frac = (v < 0 ? -v : v) % 1000;
    const std::string sign = v < 0 ? "-" : "";
    char buf[64];
    if (frac == 0) texts.push_back(sign + std::to_string(whole));
    if (!c.integer) {
      std::snprintf(buf, sizeof buf, "%s%lld.%03lld", sign.c_str(), static_cast<long long>(whole), static_cast<long long>(frac));
      texts.push_back(buf);  // padded
      std::string shortest = buf;
      while (shortest.back() == '0') shortest.pop_back();
      if (shortest.back() != '.') texts.push_back(shortest);
    }
    // v / 1000 is a multiple of num / 10^k  <=>  1000 num divides v 10^k.
    const bool multiple = (v * pow_k) % (1000 * c.num) == 0;
    const bool above = c.lo == k_none_lo || (c.lo_strict ? v > c.lo : v >= c.lo);
    const bool below = c.hi == k_none_hi || (c.hi_strict ? v < c.hi : v <= c.hi);
    for (const std::string& t : texts) {
      const bool want = multiple && above && below;
      EXPECT_EQ(accepts(g, t), want) << c.schema << " " << t;
      n_accepted += want ? 1 : 0;
    }
  }
  EXPECT_GT(n_accepted, 3);
}

const arithmetic_case k_arithmetic_cases[] = {
    {R"({"type": "integer", "multipleOf": 7})", true, 7, 0, k_none_lo, k_none_hi, false, false, 3000},
    {R"({"type": "integer", "multipleOf": 7, "minimum": -50, "maximum": 123})", true, 7, 0, -50000, 123000, false, false, 3000},
    {R"({"type": "integer", "multipleOf": 12, "exclusiveMinimum": -96, "exclusiveMaximum": 1200})", true, 12, 0, -96000, 1200000, true, true, 3000},
    {R"({"type": "integer", "multipleOf": 2.5, "minimum": -40.5})", true, 5, 0, -40000, k_none_hi, false, false, 3000},
    {R"({"type": "integer", "multipleOf": 64, "minimum": 100, "maximum": 2000})", true, 64, 0, 100000, 2000000, false, false, 3000},
    {R"({"type": "integer", "multipleOf": 1000, "maximum": 2500})", true, 1000, 0, k_none_lo, 2500000, false, false, 3000},
    {R"({"type": "number", "multipleOf": 0.25, "minimum": -3.5, "maximum": 7.3})", false, 25, 2, -3500, 7300, false, false, 8},
    {R"({"type": "number", "multipleOf": 2.5})", false, 25, 1, k_none_lo, k_none_hi, false, false, 12},
    {R"({"type": "number", "multipleOf": 0.01, "exclusiveMinimum": 0, "maximum": 1.5})", false, 1, 2, 0, 1500, true, false, 2},
    {R"({"type": "number", "multipleOf": 0.3, "minimum": -2.05, "exclusiveMaximum": 4.2})", false, 3, 1, -2050, 4200, false, true, 5},
    {R"({"type": "number", "multipleOf": 7, "minimum": -30, "maximum": 30})", false, 7, 0, -30000, 30000, false, false, 31},
    {R"({"type": "number", "multipleOf": 0.125})", false, 125, 3, k_none_lo, k_none_hi, false, false, 3},
    {R"({"type": "number", "multipleOf": 5, "exclusiveMinimum": -10.5, "exclusiveMaximum": 10})", false, 5, 0, -10500, 10000, true, true, 11},
    {R"({"type": "number", "multipleOf": 0.006, "minimum": -0.5, "maximum": 1.0001})", false, 6, 3, -500, 1000, false, false, 2},
};

INSTANTIATE_TEST_SUITE_P(Grid, MultipleOfArithmetic, testing::ValuesIn(k_arithmetic_cases));

// Random multiples, bounds (inclusive or exclusive, some absent, some far
// from 0) and values, in units of 10^-4: each value, in its shortest and a
// padded spelling, is accepted exactly when arithmetic says so.
TEST(MultipleOfRandom, AgreesWithExactArithmetic) {
  std::mt19937_64 rng(20250915);
  const auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const auto text = [](int64_t v, int fraction_digits) {  // v / 10^4 with the given fraction digits (v must fit)
    const int64_t mag = v < 0 ? -v : v;
    std::string t = (v < 0 ? "-" : "") + std::to_string(mag / 10000);
    if (fraction_digits > 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "%04lld", static_cast<long long>(mag % 10000));
      t += "." + std::string(buf).substr(0, static_cast<size_t>(fraction_digits));
    }
    return t;
  };
  const auto decimal = [](int64_t v) {  // shortest spelling of v / 10^4
    std::string t = (v < 0 ? "-" : "") + std::to_string((v < 0 ? -v : v) / 10000);
    int64_t f = (v < 0 ? -v : v) % 10000;
    if (f == 0) return t;
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04lld", static_cast<long long>(f));
    std::string fs = buf;
    while (fs.back() == '0') fs.pop_back();
    return t + "." + fs;
  };
  int64_t n_checked[2] = {0, 0};  // refused, accepted
  for (int round = 0; round < 150; ++round) {
    const bool integer = round % 3 == 0;
    const int k = integer ? 0 : static_cast<int>(pick(0, 3));
    const int64_t num = pick(1, round % 5 == 0 ? 400 : 40);
    int64_t unit = num;  // the multiple in 10^-4
    for (int i = k; i < 4; ++i) unit *= 10;
    const int64_t far = round % 4 == 0 ? 100000000000000 : 0;  // 10^10 in value
    const int64_t center = pick(-1, 1) * far + pick(-200000, 200000);
    const auto bound = [&](int64_t v) { return integer ? v / 10000 * 10000 : v / 10 * 10; };  // up to 3 fraction digits
    const bool has_lo = pick(0, 3) > 0, has_hi = pick(0, 3) > 0;
    const int64_t lo = bound(center - pick(0, 300000)), hi = bound(center + pick(0, 300000));
    const bool lo_strict = pick(0, 1) == 1, hi_strict = pick(0, 1) == 1;
    std::string schema = std::string(R"({"type": ")") + (integer ? "integer" : "number") + R"(", "multipleOf": )" +
                         (k == 0 ? std::to_string(num) : decimal(num * (k == 1 ? 1000 : k == 2 ? 100 : 10)));
    if (has_lo) schema += std::string(", \"") + (lo_strict ? "exclusiveMinimum" : "minimum") + "\": " + decimal(lo);
    if (has_hi) schema += std::string(", \"") + (hi_strict ? "exclusiveMaximum" : "maximum") + "\": " + decimal(hi);
    schema += "}";
    const auto want = [&](int64_t v) {
      return v % unit == 0 && (!has_lo || (lo_strict ? v > lo : v >= lo)) && (!has_hi || (hi_strict ? v < hi : v <= hi));
    };
    if (has_lo && has_hi) {  // an unsatisfiable schema is an error (tested above)
      const int64_t lo_eff = lo_strict ? lo + 1 : lo, hi_eff = hi_strict ? hi - 1 : hi;
      const int64_t first = lo_eff >= 0 ? (lo_eff + unit - 1) / unit * unit : -((-lo_eff) / unit * unit);
      if (first > hi_eff) continue;
    }
    const auto g = compile(schema);
    for (int i = 0; i < 300; ++i) {
      // Near a bound or the center, on the multiples' grid or off it.
      const int64_t base = i % 3 == 0 ? lo : i % 3 == 1 ? hi : center;
      int64_t v = base / unit * unit + pick(-3, 3) * unit + (i % 2 == 0 ? 0 : pick(-20, 20));
      if (integer) v = v / 10000 * 10000;
      std::vector<std::string> texts{decimal(v)};
      if (!integer) texts.push_back(text(v, 4));
      for (const std::string& t : texts) {
        EXPECT_EQ(accepts(g, t), want(v)) << schema << " " << t;
        ++n_checked[want(v) ? 1 : 0];
      }
    }
  }
  EXPECT_GT(n_checked[0], 10000);  // both outcomes well covered
  EXPECT_GT(n_checked[1], 10000);
}

}  // namespace
}  // namespace spate::grammar
