// GBNF, llama.cpp's grammar syntax, compiled to the byte-level grammar form
// (grammar_ir.h):
//
//   root   ::= object              # rules: name ::= alternatives, one per line
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   pair   ::= [a-z]+ ":" ws [0-9]+ | "x"{2,5}
//   ws     ::= [ \t\n]*
//
// Terminals: "literals" and [character classes] (ranges, ^ negation) with the
// escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH, and `.` (any
// character). Groups ( ... ), repetition * + ? {m} {m,} {m,n}, comments from
// # to the end of the line. A rule ends at a newline outside parentheses
// unless the line ends with `|`. The start rule is `root`.
//
// Limits (grammar_error beyond): k_max_grammar_source_bytes of source,
// k_max_nesting parentheses, repetition bounds up to k_max_repeat, k_max_rules
// rules after desugaring. Errors name the line and column.
//
// Thread-safety: pure function.
#pragma once

#include <string_view>

#include "grammar/grammar_ir.h"

namespace spate::grammar {

// Parses and validates (grammar_ir.h validate()). Throws grammar_error.
grammar parse_gbnf(std::string_view source);

}  // namespace spate::grammar
