// Regular expressions compiled to the byte-level grammar form (grammar_ir.h):
// the front end of vLLM's `regex` structured output and of JSON Schema's
// `pattern` keyword. The grammar accepts exactly the strings the pattern
// FULL-matches (Python re.fullmatch semantics).
//
// Dialect: Python's `re`.
//   literals (UTF-8), `.` (any code point except '\n'), escapes \n \t \r \f \v \a
//   \0 and octal (\0oo, \ooo), \xHH \uHHHH \UHHHHHHHH, an escaped non-alphanumeric
//   character is itself (\. \* \\ \( \[ \{ \- \/ ...);
//   \d \w \s with ASCII semantics ([0-9], [A-Za-z0-9_], [ \t\n\r\f\v]); \D \W \S
//   are their complements over all code points;
//   classes [...]: ranges, [^...] (complement over all code points, '\n'
//   included), escapes inside (\b there is backspace), ']' first is literal,
//   '-' first or last is literal;
//   groups ( ), (?: ), (?P<name> ), (?<name> ), comments (?#...);
//   alternation |; quantifiers * + ? {m} {m,} {,n} {m,n} {,} and their lazy
//   forms (same language); a '{' that does not start a valid quantifier is a
//   literal.
//   A leading '^' and a trailing '$' are accepted and ignored.
// Rejected (grammar_error "regex position N: what", N a 0-based byte offset
// into the pattern): backreferences, lookaround, inline flags, atomic groups,
// conditionals, possessive quantifiers, \b \B \A \Z and anchors elsewhere,
// \N{...} and \p{...}, nothing to repeat, multiple repeat, unbalanced
// parentheses, bad ranges and escapes, invalid UTF-8, a literal surrogate, a
// class that matches no code point (e.g. [^\s\S]).
//
// Limits (grammar_error beyond): k_max_regex_bytes of pattern, groups nested
// k_max_nesting deep, repetition bounds up to k_max_repeat; the builder bounds
// rules and symbols (those errors are prefixed with the regex position too).
//
// The grammar is a structural translation (no DFA): a pattern that can split
// a string in many ways (e.g. nested unbounded repeats like (.*.*)+) keeps
// many parses alive in the matcher and may reach its k_max_stacks bound.
//
// Thread-safety: pure functions (add_regex mutates only the builder given).
#pragma once

#include <cstddef>
#include <string_view>

#include "grammar/grammar_builder.h"
#include "grammar/grammar_ir.h"

namespace spate::grammar {

inline constexpr size_t k_max_regex_bytes = 64u << 10;  // pattern length

// How matched characters are written in the output.
//  raw:         as themselves (UTF-8) -- vLLM's `regex` structured output.
//  json_string: as they appear INSIDE a JSON string literal (JSON Schema
//               `pattern`): the regex is matched against the decoded string,
//               and the grammar accepts its JSON-escaped spelling: '"' as \" ,
//               '\\' as \\\\ , a control character U+0000..U+001F as its short
//               escape where JSON has one (\b \f \n \r \t) or as \u00XX (hex
//               digits in either case), '/' raw or as \/ . Everything else is
//               raw UTF-8.
enum class regex_text { raw, json_string };

// Appends the rules for `pattern` to b and returns the symbols matching
// exactly the strings the pattern full-matches, spelled as `mode` says. The
// symbols never make b's grammar left-recursive. Throws grammar_error
// ("regex position N: what") for invalid or unsupported syntax and bounds.
alternative add_regex(grammar_builder& b, std::string_view pattern, regex_text mode = regex_text::raw);

// A whole grammar whose root full-matches pattern (raw mode); validated.
grammar compile_regex(std::string_view pattern);

}  // namespace spate::grammar
