// Distinct items, at run time: what a context-free grammar cannot say, that
// the items of a list differ from each other (JSON Schema's uniqueItems; no
// two identical tool calls in one answer). A distinct_items follows a
// constrained generation byte by byte next to its matcher, parses the JSON
// values in the text, and names the tokens that would complete an item equal
// to an earlier item of the same list, so that the caller masks them out.
//
//   ["a", "b", "a   <- the next token may not start with '"' : ["a", "b", "a"
//
// Which lists:
//   - a JSON array whose grammar rule is marked distinct (grammar_ir.h): at
//     its '[', some live parse is past the '[' of one more distinct rule than
//     there are distinct arrays and objects open (with several parses, any
//     one decides: a stricter output is still valid);
//   - likewise the keys of a JSON object whose rule is marked distinct (any
//     object: response_format json_object, additionalProperties), so that
//     no key comes twice;
//   - with grammar::distinct_top_level, the top-level JSON objects and arrays
//     of the output, one after another (hermes' and llama3's tool calls).
//
// Lists of tool calls (an array rule with repeat_ends, and the top level)
// are not steered away from a repeat: a model that repeats a call wants no
// other call, and steering it writes an invented one (Paris -> Paris_M2).
// A repeat there is let through and ends the list: after it, an array's ','
// is refused (its ']' comes next), and at the top level must_end() holds, so
// that once the grammar may end, only the end is allowed. The parsers drop
// the repeated call (tool_calls.h). Other distinct lists (uniqueItems, an
// object's keys) refuse repeats as follows.
// A repeat is refused where it is decided: at the last byte where the
// grammar allowed a way on that repeats nothing. {"city": "Paris"} is
// refused at the quote that ends "Paris", since "}" is forced after it; with
// an enum of two units both already used with "Paris", at that same quote,
// since after it every unit repeats. The choices are those the grammar gave
// as the earlier items were written (matcher::allowed_bytes at each byte), so
// the grammar never leaves a repeat as the only way on unless one token both
// reached and passed the decision. A number or literal is decided by the
// byte after it. After an item of an array, when every next item would
// repeat one (an enum used up), the ',' is refused, so the array closes.
//
// Items are compared as written without the whitespace outside strings
// (JSON's insignificant whitespace): {"city" : "Paris"} repeats
// {"city": "Paris"}. The grammars write scalars and keys without choice, so
// equal values are equal text, except strings that differ only in escapes
// ("\u0041" and "A"), which count as different.
//
// Text outside JSON values (free text, a tool call's markers) is skipped: at
// the top level only '{' and '[' start a value, and a byte that cannot
// continue a value drops the values open (no item). The check is per token:
// a token that completes a duplicate item is refused; a token that completes
// one item and then writes a whole duplicate item after it is not seen (no
// tokenizer here has such tokens for realistic items).
//
// Bounds: nesting k_max_depth (deeper values are not checked), at most
// k_max_items items remembered per list (later ones are not compared), the
// generated text kept once, with a 4-byte id of the set of choices at each
// byte (the sets interned: a grammar has few).
//
// Thread-safety: one thread at a time, like the matcher it follows.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"

namespace spate::grammar {

class vocab_trie;

// A pattern of blocked tokens: their bytes spell rest, with any whitespace
// where it is outside a string (in_string[i]: rest[i] is inside one), then,
// when needs_delim, a byte that ends a number or literal.
struct distinct_items_pattern {
  std::string_view rest;
  std::vector<bool> in_string;
  bool needs_delim = false;
};

class distinct_items {
 public:
  static constexpr size_t k_max_depth = 64;
  static constexpr size_t k_max_items = 1024;

  explicit distinct_items(bool distinct_top_level) : top_distinct_(distinct_top_level) {
    stack_[0].repeat_ends = distinct_top_level;
  }

  // Consumes one byte of output; m is the matcher right after that byte.
  void advance(uint8_t byte, const matcher& m);

  // Appends to out the ids of the tokens (pieces[id]: their bytes) that would
  // complete an item equal to an earlier item of its list from here.
  void blocked_tokens(const vocab_trie& trie, const std::vector<std::string>& pieces, std::vector<int32_t>& out) const;

  // Whether some list has items to compare against (blocked_tokens can block).
  bool active() const;

  // A top-level value repeated an earlier one (tool calls): the output must
  // end as soon as its grammar allows.
  bool must_end() const { return stack_.size() == 1 && stack_[0].repeated; }

 private:
  enum class ctx : uint8_t { top, array, object };
  struct item {
    uint32_t begin = 0, end = 0;  // [begin, end) in text_
  };
  struct frame {
    ctx kind = ctx::top;
    bool distinct = false;
    bool expect_item = true;          // arrays, top: an item may start here (after '[' or ',')
    int64_t item_start = -1;          // offset of the item (object: key) being written, -1 between them
    std::vector<item> items;
    bool expect_key = false;          // objects: the next string is a key
    bool repeat_ends = false;         // a repeat ends the list (tool calls) rather than being refused
    bool repeated = false;            // repeat_ends: an item repeated an earlier one
  };
  using pattern = distinct_items_pattern;

  void step(uint8_t byte, const matcher& m);
  void push(uint8_t byte);  // appends to text_
  static pattern pattern_of(std::string_view item, size_t from, size_t to, bool needs_delim);
  std::bitset<256> options_now() const;  // the bytes that would choose something next
  std::bitset<256> first_options(const frame& f) const;
  void value_start();
  void value_end(size_t end);  // the value ended before text_[end]
  void key_end();              // an object's key string just closed
  void open(ctx kind, const matcher& m);
  void close();
  void reset();
  size_t distinct_open() const;
  void patterns_of(const frame& f, std::vector<pattern>& out) const;

  bool top_distinct_;
  std::string text_;  // the output without whitespace outside strings, from the first value on
  std::vector<frame> stack_{frame{}};  // stack_[0]: the top level
  bool in_string_ = false, escape_ = false, in_scalar_ = false, key_string_ = false;
  std::bitset<256> next_allowed_ = std::bitset<256>().set();  // the matcher's bytes after the last one
  std::bitset<256> options_;               // the choices for the byte being consumed
  std::vector<uint32_t> opts_;             // per byte of text_: the choices it was made among (in option_sets_)
  std::vector<std::bitset<256>> option_sets_;
  std::unordered_map<std::bitset<256>, uint32_t> option_ids_;
};

}  // namespace spate::grammar
