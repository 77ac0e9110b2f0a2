// JSON Schema compiled to the byte-level grammar form (grammar_ir.h), for
// structured outputs: a generation constrained by the grammar is a JSON text
// that validates against the schema.
//
// What the grammar generates (a strict, always-valid subset of the schema's
// instances; documented choices):
//   - Objects: properties in schema order; required ones always present,
//     optional ones may be skipped (any subset, order kept). Absent or true
//     additionalProperties means NO extra properties (strict mode); a schema
//     there allows extra "key": value pairs after the known ones (their keys
//     differ from the known names as written; uniqueness among the extras is
//     not enforced). Required names not listed in properties become
//     properties of the additionalProperties schema (any value when
//     absent/true), after the listed ones; an error when it is false.
//     "type": "object" with neither properties nor required nor
//     additionalProperties false/schema: any object. unevaluatedProperties
//     may be true/false (no effect in strict mode).
//   - Whitespace: between tokens of objects and arrays, one optional " " or a
//     newline plus up to k_max_json_indent spaces/tabs; none around the whole
//     value, none inside enum/const values (written compactly). With a
//     compact builder (set_json_compact), none at all.
//   - Integers: -?(0|[1-9][0-9]*) with at most k_max_integer_digits digits;
//     "-0" is not generated. minimum/maximum/exclusive* (also draft-4
//     boolean exclusives) give exact digit-range grammars (bounds are
//     clamped to the 19-digit range; fractional bounds round inward).
//   - Numbers: JSON number syntax, at most k_max_integer_digits integer
//     digits, k_max_fraction_digits fraction digits, 3 exponent digits.
//     Bounds on numbers are exact decimals (a double bound is taken as its
//     shortest decimal spelling; at most k_max_fraction_digits fraction
//     digits): integer-part digit ranges plus a digit automaton for the
//     fraction at the boundary integers. A bounded number is written without
//     an exponent.
//   - multipleOf (integers and numbers; a number > 0 taken as its shortest
//     decimal a / 10^k, e.g. 0.01 = 1 / 10^2): exact, with the bounds too.
//     The value is written without exponent, at most k fraction digits
//     other than trailing 0s ("0.10" for 0.1; k_max_fraction_digits in all),
//     and its scaled integer x * 10^k, read digit by digit, must leave
//     remainder 0 mod a: a grammar rule per state of the minimized
//     remainder automaton x digit position, plus, where the digits still
//     equal a bound's (scaled by 10^k), the bound's next digit limits the
//     next one. An integer with multipleOf a / 10^k is a multiple of
//     a / gcd(a, 10^k) (2.5 -> 5). Bounded by k_max_multiple_of,
//     k_max_multiple_of_fraction_digits and k_max_multiple_of_states (below).
//   - Strings: JSON string syntax; minLength/maxLength count characters, an
//     escape sequence counting as one. format: date, time, date-time, uuid,
//     email (a subset: dot-atoms of <= 32, 15 and 15 characters (a local
//     part of <= 64) @ 1 to 4 labels of <= 32 . 2 to 12 letters);
//     duration (RFC 3339 appendix A exactly, as JSON Schema defines it:
//     P1Y2M3DT4H5M6S, PT36H, P3W; no fractions (PT0.5S), signs or other
//     component orders; at most k_max_duration_digits digits a component);
//     byte and base64 (RFC 4648 base64), base64url (its URL-safe alphabet):
//     groups of 4, '=' padding, canonical (unused bits 0), and they combine
//     with minLength/maxLength (group counts); binary (OpenAPI's octets,
//     pydantic's bytes) is any string, as without a format. pattern: compiled by
//     grammar/regex_compiler.h (Python re dialect) against the decoded
//     string, written JSON-escaped; it searches like ECMA-262 unless anchored
//     by a leading ^ / trailing $ (an anchor with a top-level '|' is refused).
//     Formats other than binary do not combine with pattern, nor with
//     min/maxLength except the base64 ones (error); pattern and
//     min/maxLength do not combine either.
//   - Arrays: prefixItems then items (draft 4: items as an array, then
//     additionalItems), minItems/maxItems; absent items: any values.
//     uniqueItems: true makes the array's rule distinct (grammar_ir.h); the
//     constraint refuses tokens that would complete an item equal to an
//     earlier one, compared as written without whitespace outside strings
//     (distinct_items.h). Scalars and enum values are written canonically,
//     so for them equal text means equal values.
//   - Types: "type" (a name or a list); without it, the types whose keywords
//     appear (properties -> object, ...), or any value. Keywords of other
//     types are ignored as JSON Schema says (minimum on a string; format on
//     a number, e.g. "int32").
//   - enum/const: any JSON values, filtered by "type" if given; other
//     validation keywords beside them, $ref or anyOf/oneOf are refused.
//   - oneOf is compiled like anyOf (exclusivity is not enforced).
//   - allOf: a single schema is that schema; several are merged when they are
//     all object schemas (properties and required united).
//   - $ref: "#" and "#/..." JSON pointers into the same document ($defs,
//     definitions, anything), with recursion; remote and anchor references
//     are an error. $id does not change the base.
//   - Annotations are ignored: title, description, $schema, $id, $anchor,
//     $comment, $vocabulary, examples, default, deprecated, readOnly,
//     writeOnly, contentMediaType, contentEncoding, contentSchema, and
//     OpenAPI's example and discriminator (the oneOf it annotates decides).
//   - Every other keyword is refused with an error naming it (not,
//     if/then/else, patternProperties, contains,
//     minProperties, ...), as are unknown formats.
//
// Errors: grammar_error whose message starts with the JSON pointer of the
// offending schema location ("(root)" for the root), e.g.
// "/properties/age/minimum: ...".
//
// Bounds: schema nesting (including $ref chains) <= k_max_nesting, at most
// k_max_schema_nodes subschemas compiled, k_max_optional_properties per
// object, k_max_any_of_branches per anyOf, repetition counts (maxItems,
// maxLength) <= k_max_repeat; the protocol layer bounds the schema text to
// k_max_schema_bytes. Compile time is linear in the schema (and the bounds).
//
// Thread-safety: pure functions; a builder is used by one thread.
#pragma once

#include <boost/json/value.hpp>

#include "grammar/grammar_builder.h"
#include "grammar/grammar_ir.h"

namespace spate::grammar {

inline constexpr size_t k_max_schema_bytes = 1u << 20;  // schema JSON text (checked by the protocol layer)
inline constexpr size_t k_max_schema_nodes = 10000;     // subschemas compiled per call
inline constexpr int k_max_integer_digits = 19;
inline constexpr int k_max_fraction_digits = 20;
inline constexpr int k_max_json_indent = 20;
inline constexpr int k_max_ref_recursion = 5;  // nesting levels of a recursive $ref (see below)
// Optional properties of one object: each is a live parse at the start of the
// object and after every member, which must stay well under the matcher's
// k_max_stacks.
inline constexpr size_t k_max_optional_properties = 1000;
inline constexpr size_t k_max_any_of_branches = 1000;  // likewise, anyOf/oneOf branches
// multipleOf a / 10^k (a, k integers, e.g. 0.25 = 25 / 10^2): a <= k_max_multiple_of,
// k <= k_max_multiple_of_fraction_digits, and its digit automaton (the
// remainder classes mod a, minimized, times the digit positions: 19 integer
// digits, plus k + 1 fraction positions for numbers) at most
// k_max_multiple_of_states states, one grammar rule each. Every a <= 1000
// fits (numbers: with k <= 4), and so do multiples with few classes well
// beyond (100000: 6 classes; 0.0625 = 625 / 10^4: a few).
inline constexpr uint64_t k_max_multiple_of = 100000;
inline constexpr int k_max_multiple_of_fraction_digits = 18;
inline constexpr size_t k_max_multiple_of_states = 25000;
// Digits per component of format "duration": with 6, every duration written
// is a Python timedelta (pydantic parses P999999Y999999M999999DT999999H999999M999999S;
// P9999999Y exceeds its 999,999,999 days, PT9999999H its 32-bit seconds).
inline constexpr int k_max_duration_digits = 6;

// Appends rules matching the JSON texts that validate against `schema` and
// returns the symbols for one such value. Alternatives of the new rules that
// can never complete (recursion without a base case) are pruned, so the
// builder's grammar passes validate(); an unsatisfiable schema throws.
// Throws grammar_error (see above).
alternative add_json_schema(grammar_builder& b, const boost::json::value& schema);
// Any JSON object (response_format json_object): '{' ... '}' with any members/values.
alternative add_json_object(grammar_builder& b);
// A validated grammar whose root is the value. compact: no whitespace
// between tokens at all (grammar_builder::set_json_compact).
grammar compile_json_schema(const boost::json::value& schema, bool compact = false);
grammar compile_json_object(bool compact = false);

}  // namespace spate::grammar
