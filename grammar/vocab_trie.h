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
//   byte_[i], depth_[i], subtree_end_[i], token_begin_[i]   (walk's view)
//
// Tokens with no bytes (control tokens) are never in the trie; end-of-
// generation tokens are allowed by the caller where matcher::can_end().
//
// Thread-safety: a built trie is immutable; allowed_tokens() and walk() may
// run on many threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/matcher.h"

namespace spate::grammar {

class vocab_trie {
 public:
  // pieces[id]: the raw bytes of token id ("" for tokens that never match).
  explicit vocab_trie(const std::vector<std::string>& pieces);

  int32_t n_vocab() const { return n_vocab_; }
  size_t n_nodes() const { return nodes_.size(); }

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
  template <class Step, class OnToken>
  void walk(int32_t start, Step&& step, OnToken&& on_token) const {
    std::vector<int32_t> state_at(static_cast<size_t>(max_depth_) + 1);
    state_at[0] = start;
    const uint32_t n = static_cast<uint32_t>(depth_.size());
    for (uint32_t i = 1; i < n;) {
      const uint16_t d = depth_[i];
      const int32_t next = step(state_at[d - 1], byte_[i]);
      if (next < 0) {
        i = subtree_end_[i];
        continue;
      }
      state_at[d] = next;
      for (uint32_t j = token_begin_[i]; j < token_begin_[i + 1]; ++j) on_token(token_ids_[j]);
      ++i;
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
  // The same nodes for walk(), by preorder index: the byte leading to the
  // node, its depth (root 0), one past its subtree, and where its tokens
  // start in token_ids_ (token_begin_ has one extra entry at the end).
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> subtree_end_;
  std::vector<uint32_t> token_begin_;
  uint16_t max_depth_ = 0;
  int32_t n_vocab_ = 0;
};

}  // namespace spate::grammar
