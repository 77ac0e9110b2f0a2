// The vocabulary as a trie of the tokens' raw bytes, built once per
// tokenizer, and the token mask of a matcher state: the tokens whose every
// byte the grammar allows from there. The walk shares each prefix between the
// tokens that start with it and abandons a subtree at its first refused byte,
// so the cost follows the allowed part of the vocabulary, not its size.
//
//   node 0 (root) --'{'--> node 1 [tokens "{"] --'"'--> node 2 [tokens "{\""]
//                 --' '--> node 3 [tokens " "] --'{'--> node 4 [tokens " {"]
//
// Layout: flat arrays in depth-first preorder (a node's subtree is the
// contiguous range [i, subtree_end_[i])), so walk() is one forward pass that
// jumps over refused subtrees:
//
//   nodes_[i]    = {child_begin, child_end, token_begin, token_end}
//   edges_[k]    = {byte, child node}   for k in [child_begin, child_end), by byte
//   token_ids_[j]                        for j in [token_begin, token_end)
//   walk_nodes_[i] = {subtree_end, token_begin, depth, byte}  (walk's view)
//
// Tokens with no bytes (control tokens) are never in the trie; end-of-
// generation tokens are allowed by the caller where matcher::can_end().
//
// Thread-safety: a built trie is immutable; allowed_tokens() and walk() may
// run on many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/matcher.h"

namespace spate::grammar {

inline constexpr uint16_t k_short_token_bytes = 16;

class vocab_trie {
 public:
  // pieces[id]: the raw bytes of token id ("" for tokens that never match).
  explicit vocab_trie(const std::vector<std::string>& pieces);

  int32_t n_vocab() const { return n_vocab_; }
  size_t n_nodes() const { return nodes_.size(); }
  // The longest token, in bytes.
  int32_t max_token_bytes() const { return max_depth_; }
  // The tokens longer than k_short_token_bytes, as a trie of their own (null
  // when there are none), so that a walk can cover the short tokens with
  // max_depth and the few long ones separately (see mask_cache).
  const vocab_trie* long_tokens() const { return long_tokens_.get(); }

  // Sets allowed[id] = 1 for every token whose bytes m accepts from its
  // current state, 0 for the others (allowed is resized to n_vocab). m is
  // walked with push/pop and left in its state. (The reference walk; the
  // mask cache uses walk() with memoized transitions.)
  void allowed_tokens(matcher& m, std::vector<uint8_t>& allowed) const;

  // The same walk driven by a caller's automaton instead of a matcher: from
  // state `start`, step(state, byte) returns the state after the byte, or a
  // negative value when the byte is refused (the subtree is skipped);
  // on_token(id) is called for every token whose bytes all stepped. One
  // forward pass over the nodes in preorder, keeping the state per depth.
  //
  // max_depth: tokens of at most that many bytes only (the walk does not go
  // deeper).
  template <class Step, class OnToken>
  void walk(int32_t start, Step&& step, OnToken&& on_token, uint16_t max_depth = UINT16_MAX) const {
    std::vector<int32_t> state_at(static_cast<size_t>(max_depth_) + 1);
    state_at[0] = start;
    const uint32_t n = static_cast<uint32_t>(walk_nodes_.size()) - 1;  // the last entry only ends the token range
    for (uint32_t i = 1; i < n;) {
      const walk_node& w = walk_nodes_[i];
      const int32_t next = step(state_at[w.depth - 1u], w.byte);
      if (next < 0) {
        i = w.subtree_end;
        continue;
      }
      state_at[w.depth] = next;
      for (uint32_t j = w.token_begin, e = walk_nodes_[i + 1].token_begin; j < e; ++j) on_token(token_ids_[j]);
      i = w.depth < max_depth ? i + 1 : w.subtree_end;
    }
  }

 private:
  struct node {
    uint32_t child_begin = 0, child_end = 0;  // range of edges_
    uint32_t token_begin = 0, token_end = 0;  // range of token_ids_
  };
  struct edge {
    uint8_t byte = 0;
    int32_t child = 0;
  };
  void walk_matcher(int32_t at, matcher& m, std::vector<uint8_t>& allowed) const;
  void index_preorder();  // fills walk()'s arrays from nodes_ and edges_

  std::vector<node> nodes_;
  std::vector<edge> edges_;
  std::vector<int32_t> token_ids_;
  // The same nodes for walk(), by preorder index, packed (12 bytes): one past
  // its subtree, where its tokens start in token_ids_, its depth (root 0) and
  // the byte leading to it. One extra entry at the end ends the last range.
  struct walk_node {
    uint32_t subtree_end = 0;
    uint32_t token_begin = 0;
    uint16_t depth = 0;
    uint8_t byte = 0;
  };
  std::vector<walk_node> walk_nodes_;
  uint16_t max_depth_ = 0;
  int32_t n_vocab_ = 0;
  std::shared_ptr<const vocab_trie> long_tokens_;
};

}  // namespace spate::grammar
