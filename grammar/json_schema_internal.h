// Shared pieces of the JSON Schema compiler (json_schema*.cpp); not a public
// interface. Thread-safety: used by one thread, like the builder.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar_builder.h"

namespace spate::grammar::json_detail {

// "(root)" for the empty pointer, else the pointer itself.
std::string pointer_text(const std::string& ptr);
// ptr + "/" + key with '~' and '/' escaped.
std::string pointer_child(const std::string& ptr, std::string_view key);
// Throws grammar_error "<pointer>: <what>".
[[noreturn]] void schema_fail(const std::string& ptr, const std::string& what);

// The generic JSON rules, made once per builder (found again by name on a
// second call): whitespace, a string, a number, any value/object/array.
struct json_rules {
  explicit json_rules(grammar_builder& b);
  int32_t ws = -1;           // bounded optional whitespace
  int32_t string_char = -1;  // one character inside quotes (a code point or an escape)
  int32_t string = -1;       // "..."
  int32_t number = -1;
  int32_t integer = -1;
  int32_t value = -1;  // any JSON value
  int32_t object = -1;
  int32_t array = -1;
};

// Non-negative integer written in decimal without leading zeros, as
// alternatives of byte sets: the numerals of [lo, hi] (lo <= hi).
std::vector<alternative> digit_range(uint64_t lo, uint64_t hi);

// Compact canonical JSON text of v (enum/const): no whitespace, shortest
// round-trip doubles, minimal string escapes. Errors (too deep) at ptr.
std::string json_literal(const boost::json::value& v, const std::string& ptr);
// Exactly one of texts (not empty), as a radix tree over their bytes: the
// alternatives alive at any point are the branches at one node, so a
// matcher's live parses stay few even for thousands of enum values.
alternative literal_choice(grammar_builder& b, std::vector<std::string> texts);
// True when v is an instance of the JSON Schema type name t.
bool has_type(const boost::json::value& v, std::string_view t);

// A schema keyword's integer value (non-negative, at most max), else an error at ptr.
int64_t count_keyword(const boost::json::object& s, std::string_view key, const std::string& ptr, int64_t max);

// The bytes between a string's quotes for any string whose spelling is none
// of `spellings` (canonical JSON spellings without quotes, as json_literal
// writes them). A string equal to one only through other escapes is not caught.
alternative string_except(grammar_builder& b, const json_rules& r, const std::vector<std::string>& spellings);

// multipleOf (json_schema_multiple_of.cpp) -------------------------------

using wide = __int128;

// A multipleOf value: a / 10^k with a >= 1 (k = 0 for an integer value).
struct multiple_of {
  uint64_t a = 1;
  int k = 0;
  std::string ptr;  // the keyword's pointer, for errors
};
// Reads a multipleOf value (a number > 0, at most k_max_multiple_of without
// its decimal point, at most k_max_multiple_of_fraction_digits fraction
// digits; a double is taken as its shortest decimal spelling). Errors at ptr.
multiple_of read_multiple_of(const boost::json::value& v, const std::string& ptr);
// The integers that are multiples of m: the multiples of a / gcd(a, 10^k), k = 0.
multiple_of integer_multiple(multiple_of m);

// One sign of a multipleOf schema: the magnitudes whose scaled value
// N = magnitude * 10^k lies in [lo, hi] (inclusive, lo >= 0), written after `sign`.
struct magnitude_range {
  const char* sign = "";
  wide lo = 0, hi = -1;
};
// The numbers of the given ranges that are multiples of m, as alternatives:
// magnitudes with at most k_max_integer_digits integer digits, no leading
// zeros, no exponent; with `fraction`, also "." and 1..k_max_fraction_digits
// digits, those after the k-th all 0 (integers: m.k must be 0). Empty when
// no such number exists. Refuses (at m.ptr) automata beyond k_max_multiple_of_states.
std::vector<alternative> multiple_of_numbers(grammar_builder& b, const multiple_of& m, bool fraction, const std::vector<magnitude_range>& sides);

// type "string" / "integer" / "number" with their keywords (json_schema_strings.cpp,
// json_schema_numbers.cpp). s is the schema object, ptr its pointer.
alternative string_schema(grammar_builder& b, const json_rules& r, const boost::json::object& s, const std::string& ptr);
alternative integer_schema(grammar_builder& b, const json_rules& r, const boost::json::object& s, const std::string& ptr);
alternative number_schema(grammar_builder& b, const json_rules& r, const boost::json::object& s, const std::string& ptr);

}  // namespace spate::grammar::json_detail
