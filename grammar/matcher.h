// A byte-level matcher over a compiled grammar (grammar_ir.h): a top-down
// pushdown recognizer that keeps every parse alive at once, as a set of
// stacks of grammar positions. After each byte, every stack's top is a byte
// set (the bytes that may come next on that parse), or the stack is empty
// (that parse is complete).
//
//   stack (bottom .. top):  [root alt0 @1] [value alt2 @0] [string alt0 @3]
//   position = rule, alternative, index of the next symbol in it
//
// A reference that is the last symbol of its alternative replaces its parent
// instead of growing the stack (tail position), so right-recursive
// repetition (x* desugared to  star ::= x star | "") runs in bounded depth.
//
// Bounds: at most k_max_stacks live parses and k_max_stack_depth positions
// per stack; a byte that would exceed them is refused like a byte the grammar
// does not allow (advance returns false), so a pathological grammar cannot
// stall the caller.
//
// Thread-safety: a matcher is a value used by one thread at a time; the
// grammar it points at is shared and immutable.
#pragma once

#include <bitset>
#include <compare>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/grammar_ir.h"

namespace spate::grammar {

inline constexpr size_t k_max_stacks = 4096;
inline constexpr size_t k_max_stack_depth = 1024;

struct grammar_pos {
  int32_t rule = 0, alt = 0, pos = 0;
  auto operator<=>(const grammar_pos&) const = default;
};
using parse_stack = std::vector<grammar_pos>;

class matcher {
 public:
  // Starts before the first byte of g's root rule. g must be validate()d.
  explicit matcher(std::shared_ptr<const grammar> g);
  // Resumes at a state taken from another matcher's stacks() on the same grammar.
  matcher(std::shared_ptr<const grammar> g, std::vector<parse_stack> stacks);

  // Consumes one byte; false (and the state unchanged) when no live parse
  // allows it.
  bool advance(uint8_t byte);
  // Consumes the bytes in order; all or nothing.
  bool advance(std::string_view bytes);

  // Like advance(byte), but remembers the state before it so that pop()
  // returns to it: a depth-first walk over a vocabulary trie tries a byte,
  // descends, and pops back. Pushes and pops nest.
  bool push(uint8_t byte);
  void pop();

  // True when the bytes so far form a complete sentence of the grammar.
  bool can_end() const;
  // The bytes some live parse allows next.
  std::bitset<256> allowed_bytes() const;
  // True when nothing can follow and the input is complete: the grammar has
  // finished (an end-of-generation token is then the only choice).
  bool finished() const { return can_end() && allowed_bytes().none(); }

  size_t n_stacks() const { return stacks_.size(); }
  // The live parses, sorted and unique: the whole state (equal stacks, equal futures).
  const std::vector<parse_stack>& stacks() const { return stacks_; }
  const std::shared_ptr<const grammar>& rules() const { return g_; }

 private:
  // Moves s forward to positions before a byte set (or to empty), appending
  // the results to out. false when a bound was hit.
  bool expand(parse_stack s, std::vector<parse_stack>& out) const;
  const symbol& symbol_at(const grammar_pos& p) const;
  bool at_end_of_alt(const grammar_pos& p) const;

  std::shared_ptr<const grammar> g_;
  std::vector<parse_stack> stacks_;  // sorted, unique
  std::vector<std::vector<parse_stack>> saved_;  // states before each push()
};

}  // namespace spate::grammar
