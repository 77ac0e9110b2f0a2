// Building a byte-level grammar (grammar_ir.h) piece by piece: the shared
// toolkit of every front end (GBNF, regular expressions, JSON Schema, choice
// lists). It owns the grammar under construction and enforces the compile
// bounds (k_max_rules rules, k_max_symbols symbols in all alternatives), so a
// front end cannot build an unbounded grammar by accident.
//
//   grammar_builder b;
//   int32_t digits = b.add_repeat(b.code_points({{'0', '9'}}), 1, -1);   // [0-9]+
//   int32_t root = b.add_rule("root", {b.literal("n=") + ref(digits)});
//   grammar g = b.finish(root);                                          // validated
//
// Thread-safety: a builder is used by one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar_ir.h"

namespace spate::grammar {

inline constexpr size_t k_max_symbols = 1u << 22;  // all alternatives together, after desugaring
inline constexpr uint32_t k_max_code_point = 0x10FFFF;

struct cp_range {
  uint32_t lo = 0, hi = 0;  // inclusive code point range
};

// The code points NOT in rs, within [0, k_max_code_point].
std::vector<cp_range> complement(std::vector<cp_range> rs);

symbol bytes_symbol(uint8_t lo, uint8_t hi);  // one byte in [lo, hi]
symbol ref(int32_t rule);                     // a reference to a rule

// a + b: the concatenation of two sequences.
alternative operator+(alternative a, const alternative& b);
alternative operator+(alternative a, const symbol& s);

class grammar_builder {
 public:
  // where() prefixes every error message (e.g. "line 3, column 7: "); may be empty.
  explicit grammar_builder(std::function<std::string()> where = {}) : where_(std::move(where)) {}

  // A named rule with the given alternatives. Names starting with '.' are
  // helpers (never shown to users). Throws grammar_error beyond the bounds.
  int32_t add_rule(std::string name, std::vector<alternative> alts);
  // A rule to be filled in later with set_alts (forward references, recursion).
  int32_t declare_rule(std::string name);
  void set_alts(int32_t rule, std::vector<alternative> alts);
  // A helper rule ".<n>" with the given alternatives.
  int32_t add_helper(std::vector<alternative> alts);

  // The bytes of s, one symbol per byte.
  static alternative literal(std::string_view s);
  // One code point out of ranges (which must not be empty), as symbols to append:
  // byte sets where that is exact, else a reference to a helper rule with one
  // alternative per UTF-8 byte-sequence shape.
  alternative code_points(const std::vector<cp_range>& ranges);
  // atom repeated between lo and hi times (hi < 0: unbounded), as symbols to
  // append: lo copies, then a right-recursive star or hi - lo nested optionals.
  // lo, hi <= k_max_repeat.
  alternative repeat(const alternative& atom, int64_t lo, int64_t hi);
  // A rule matching one of the alternatives (a group).
  alternative group(std::vector<alternative> alts);
  // Marks rule as a JSON array of distinct items (grammar_ir.h rule::distinct);
  // repeat_ends: a repeated item ends the list instead (rule::repeat_ends).
  void set_distinct(int32_t rule, bool repeat_ends = false) {
    g_.rules.at(static_cast<size_t>(rule)).distinct = true;
    g_.rules.at(static_cast<size_t>(rule)).repeat_ends = repeat_ends;
  }
  void set_distinct_top_level() { g_.distinct_top_level = true; }
  // JSON whitespace (json_schema.h): bounded (the default) or none at all.
  void set_json_compact(bool compact) { json_compact_ = compact; }
  bool json_compact() const { return json_compact_; }
  // Copies every rule of g (a finished grammar) into this one, references
  // renumbered, and returns the index of its root. Counts against the bounds.
  int32_t embed(const grammar& g);

  const grammar& peek() const { return g_; }
  size_t n_rules() const { return g_.rules.size(); }
  // Sets the root, validates (grammar_ir.h validate()), and hands the grammar over.
  grammar finish(int32_t root);

  [[noreturn]] void fail(const std::string& what) const;

 private:
  void count_symbols(const std::vector<alternative>& alts);

  std::function<std::string()> where_;
  grammar g_;
  size_t n_symbols_ = 0;
  bool json_compact_ = false;
};

}  // namespace spate::grammar
