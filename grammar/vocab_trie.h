// The vocabulary as a trie of the tokens' raw bytes, built once per
// tokenizer, and the token mask of a matcher state: the tokens whose every
// byte the grammar allows from there. The walk shares each prefix between the
// tokens that start with it and abandons a subtree at its first refused byte,
// so the cost follows the allowed part of the vocabulary, not its size.
//
//   node 0 (root) --'{'--> node 1 [tokens "{"] --'"'--> node 2 [tokens "{\""]
//                 --' '--> node 3 [tokens " "] --'{'--> node 4 [tokens " {"]
//
// Tokens with no bytes (control tokens) are never in the trie; end-of-
// generation tokens are allowed by the caller where matcher::can_end().
//
// Thread-safety: a built trie is immutable; allowed_tokens() may run on many
// threads at once with different matchers.
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
  // walked with push/pop and left in its state.
  void allowed_tokens(matcher& m, std::vector<uint8_t>& allowed) const;

  // The same walk driven by a caller's automaton instead of a matcher: from
  // state `start`, step(state, byte) returns the state after the byte, or a
  // negative value when the byte is refused (the subtree is skipped);
  // on_token(id) is called for every token whose bytes all stepped. Depth
  // first, iterative (no recursion on token length).
  template <class Step, class OnToken>
  void walk(int32_t start, Step&& step, OnToken&& on_token) const {
    std::vector<std::pair<int32_t, int32_t>> todo{{0, start}};  // (node, state)
    while (!todo.empty()) {
      const auto [at, state] = todo.back();
      todo.pop_back();
      for (const auto& [byte, child] : nodes_[static_cast<size_t>(at)].children) {
        const int32_t next = step(state, byte);
        if (next < 0) continue;
        const node& c = nodes_[static_cast<size_t>(child)];
        for (int32_t id : c.tokens) on_token(id);
        if (!c.children.empty()) todo.emplace_back(child, next);
      }
    }
  }

 private:
  struct node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // (byte, node), sorted by byte
    std::vector<int32_t> tokens;                        // tokens whose bytes end here
  };
  void walk(int32_t at, matcher& m, std::vector<uint8_t>& allowed) const;

  std::vector<node> nodes_;
  int32_t n_vocab_ = 0;
};

}  // namespace spate::grammar
