// Token masks per matcher state, cached: the cost per generated token is a
// hash of the state and a table lookup once a state was seen.
//
// States are interned: a matcher state (its sorted set of parse stacks) gets
// a small integer id, and byte transitions between ids are memoized. A mask
// is computed once per state by walking the vocabulary trie with those
// memoized transitions (vocab_trie::walk), so a walk costs about one table
// lookup per trie node even where most of the vocabulary is allowed (inside
// a JSON string), and later walks reuse every transition already taken.
// Because repetition runs in tail position, the state inside a loop (a
// string's characters, a number's digits) is the same after each step, so a
// generation meets few distinct states and hits the cache for the rest.
//
//   state id --byte--> state id      (transitions, memoized on first use)
//   state id -> token_mask           (on first mask() of that state)
//
// Bounded repetition ({m,n}, maxLength, maxItems) would make every position
// its own state (opt_k, opt_{k-1}, ...). But a token of at most T bytes
// consumes at most T repeated atoms (each takes a byte or more), so for such
// tokens opt_k behaves as opt_T whenever k > T. With T = k_short_token_bytes
// (16), the mask of a state in a grammar with such chains is the union of
//   - the short tokens (<= T bytes), walked from the state with every opt_k,
//     k > T, replaced by opt_T: one walk shared by all positions of a bounded
//     string more than T atoms from its end, cached per replaced state;
//   - the few long tokens, walked over their own trie from the state itself.
// Exact, and the costly part of the walk is shared.
//
// Masks store allowed ids (sparse) where few tokens pass, and a bitset over
// the vocabulary (dense) otherwise.
//
// Bounds: at most k_max_cached_states interned states (each with up to 1 KiB
// of transitions) and k_max_mask_bytes of masks per cache; beyond either the cache is emptied at the start of the
// next mask() call (masks already handed out stay valid: they are shared).
//
// Thread-safety: mask() may be called from many threads; an internal mutex
// serializes them. The grammar and trie are shared and immutable.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/vocab_trie.h"

namespace spate::grammar {

inline constexpr size_t k_max_cached_states = 1u << 14;
inline constexpr size_t k_max_mask_bytes = 16u << 20;

struct token_mask {
  std::vector<uint64_t> bits;  // dense: one bit per token id (empty when sparse)
  std::vector<int32_t> ids;    // sparse: allowed ids, ascending (when bits is empty)
  bool can_end = false;        // the input so far is a complete sentence
  size_t n_allowed = 0;        // tokens allowed (end-of-generation not counted)

  bool allows(int32_t id) const;
  // Sets every logit whose token is not allowed to -infinity. logits.size()
  // is the vocabulary size; the caller handles end-of-generation tokens.
  void apply(std::span<float> logits) const;
  size_t bytes() const { return bits.size() * 8 + ids.size() * 4; }
};

class mask_cache {
 public:
  mask_cache(std::shared_ptr<const grammar> g, std::shared_ptr<const vocab_trie> trie);

  // The mask of m's current state (m must run on this cache's grammar).
  std::shared_ptr<const token_mask> mask(const matcher& m);

  struct counters {
    size_t n_states = 0, n_masks = 0, mask_bytes = 0, n_hits = 0, n_misses = 0, n_resets = 0;
    size_t n_short_walks = 0;  // misses that walked the short tokens (the rest reused a canonical state's)
  };
  counters stats() const;

 private:
  struct stacks_hash {
    size_t operator()(const std::vector<parse_stack>& v) const;
  };
  struct state {
    const std::vector<parse_stack>* stacks = nullptr;  // the key in ids_ (node-based: stable)
    std::shared_ptr<const token_mask> mask;            // the whole mask
    std::shared_ptr<const std::vector<uint64_t>> short_bits;  // canonical states: short tokens allowed
  };

  int32_t intern(const std::vector<parse_stack>& stacks);
  // stacks with every bounded-repetition rule opt_k, k > T, replaced by opt_T.
  std::vector<parse_stack> canonical(const std::vector<parse_stack>& stacks) const;
  void index_repeats();  // fills canon_
  int32_t step(int32_t from, uint8_t byte);  // -1: refused
  const std::array<int32_t, 256>* fill_row(int32_t from);  // computes and returns from's row
  const std::bitset<256>& top_set(const parse_stack& s) const;  // the byte set at s's top
  std::shared_ptr<const token_mask> compute(int32_t s);
  // Sets the bits of the tokens of `trie` (up to max_depth bytes) allowed from s.
  void walk_into(const vocab_trie& trie, int32_t s, uint16_t max_depth, std::vector<uint64_t>& bits);
  std::shared_ptr<const token_mask> make_mask(std::vector<uint64_t> bits, int32_t s);
  void reset_if_full();

  std::shared_ptr<const grammar> g_;
  std::shared_ptr<const vocab_trie> trie_;
  std::vector<int32_t> canon_;  // rule -> the rule standing for it in interned states
  bool has_long_repeats_ = false;
  mutable std::mutex mu_;
  std::unordered_map<std::vector<parse_stack>, int32_t, stacks_hash> ids_;
  std::vector<state> states_;
  // Per state, its byte transitions once it was stepped from: the next state
  // or -1 (refused). 1 KiB per stepped-from state.
  std::vector<std::unique_ptr<std::array<int32_t, 256>>> next_;
  counters stats_;
};

}  // namespace spate::grammar
