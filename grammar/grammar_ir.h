// The grammar engine's common form: a context-free grammar over BYTES. Every
// input (GBNF today; JSON Schema, regex and choices compile to it) becomes a
// list of rules; a rule is a list of alternatives; an alternative is a
// sequence of symbols, each either a set of bytes or a reference to a rule.
// Unicode character classes are expanded to their UTF-8 byte sequences at
// compile time, so a matcher advances one byte at a time and token masks can
// be computed over the tokens' raw bytes.
//
// Plain data; thread-safe for concurrent const use.
#pragma once

#include <bitset>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace spate::grammar {

struct symbol {
  enum class kind : uint8_t { bytes, rule };
  kind type = kind::bytes;
  std::bitset<256> set;  // bytes: the bytes accepted here
  int32_t rule = -1;     // rule: index into grammar::rules
};

using alternative = std::vector<symbol>;

struct rule {
  std::string name;
  std::vector<alternative> alts;  // an empty alternative matches the empty string
  // Bounded repetition (grammar_builder::repeat): this rule is opt_k of the
  // chain opt_k ::= atom opt_{k-1} | "", with repeat_left = k atoms still
  // allowed and repeat_next = opt_{k-1} (-1 for opt_1). Every member has the
  // same alternatives but for the last reference, so for input shorter than k
  // atoms opt_k and opt_j (j, k >= that length) behave alike; the mask cache
  // uses this to share states. 0 / -1 for other rules.
  int32_t repeat_left = 0;
  int32_t repeat_next = -1;
  // The rule is a JSON array whose items must differ from each other
  // (uniqueItems, a list of tool calls) or a JSON object whose keys must
  // (any object): enforced at run time by distinct_items.h, which a
  // context-free grammar cannot say. Every alternative of a distinct rule
  // starts with its '[' or '{'.
  bool distinct = false;
  // With distinct (an array: a list of tool calls): an item that repeats an
  // earlier one is let through and ends the list (its ',' is refused),
  // instead of being refused (distinct_items.h).
  bool repeat_ends = false;
};

struct grammar {
  std::vector<rule> rules;
  int32_t root = -1;  // index of the start rule
  // The top-level JSON values of the output (hermes' and llama3's tool calls,
  // one after another) must differ from each other (distinct_items.h): a
  // value that repeats an earlier one is let through and ends the output (as
  // repeat_ends).
  bool distinct_top_level = false;
};

// A grammar that cannot be compiled: message says what and where
// ("line 3, column 7: ...").
struct grammar_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Compile-work bounds, documented in docs/api.md, "Limits".
inline constexpr size_t k_max_grammar_source_bytes = 1u << 20;  // GBNF text
inline constexpr size_t k_max_rules = 65536;                     // after desugaring
inline constexpr int k_max_nesting = 100;                        // parentheses
inline constexpr int64_t k_max_repeat = 10000;                   // {m,n} bounds

// Checks references, the root, and rejects left recursion (a rule that can
// reach itself without consuming a byte), which a top-down matcher cannot
// run. Also rejects unproductive rules reachable from the root: a rule that
// cannot derive any finite byte string (e.g. `x ::= "a" x` without a base
// case). For the root that means the grammar matches nothing; for another
// rule it is a dead end a generation could enter and never finish, so it is
// an error too (GBNF). Front ends that can produce such branches legitimately
// (JSON Schema: an anyOf branch recursing without a base case) prune them
// first (prune_unproductive, or set_alts on the builder's rules as
// add_json_schema does). Throws grammar_error naming the rule.
void validate(const grammar& g);

// Per rule: can it derive some finite byte string? A byte symbol with an
// empty set derives nothing. References must be valid.
std::vector<bool> productive_rules(const grammar& g);
// Removes every alternative that contains an unproductive symbol (the
// language is unchanged); unproductive rules are left without alternatives.
void prune_unproductive(grammar& g);

// The byte sequences of the code points in [lo, hi] (surrogates excluded):
// each entry is one sequence of byte ranges, e.g. {[0xC2,0xDF],[0x80,0xBF]}.
// Together they match exactly the UTF-8 encodings of the range.
struct byte_range {
  uint8_t lo = 0, hi = 0;
};
std::vector<std::vector<byte_range>> utf8_sequences(uint32_t lo, uint32_t hi);

}  // namespace spate::grammar
