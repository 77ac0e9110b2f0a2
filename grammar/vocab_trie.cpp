#include "grammar/vocab_trie.h"

#include <algorithm>
#include <map>
#include <memory>

namespace spate::grammar {
namespace {

// The trie while it is built: children by byte.
struct build_node {
  std::map<uint8_t, std::unique_ptr<build_node>> children;
  std::vector<int32_t> tokens;
};

}  // namespace

vocab_trie::vocab_trie(const std::vector<std::string>& pieces) : n_vocab_(static_cast<int32_t>(pieces.size())) {
  build_node root;
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (pieces[id].empty()) continue;
    build_node* at = &root;
    for (const char c : pieces[id]) {
      auto& kid = at->children[static_cast<uint8_t>(c)];
      if (!kid) kid = std::make_unique<build_node>();
      at = kid.get();
    }
    at->tokens.push_back(static_cast<int32_t>(id));
  }
  // Flatten in depth-first preorder: number a node, reserve its edges, then
  // its children's subtrees in byte order.
  std::vector<std::pair<const build_node*, int32_t>> todo{{&root, -1}};  // (node, edge slot to fill)
  while (!todo.empty()) {
    const auto [b, slot] = todo.back();
    todo.pop_back();
    const auto id = static_cast<int32_t>(nodes_.size());
    if (slot >= 0) edges_[static_cast<size_t>(slot)].child = id;
    node n;
    n.token_begin = static_cast<uint32_t>(token_ids_.size());
    token_ids_.insert(token_ids_.end(), b->tokens.begin(), b->tokens.end());
    n.token_end = static_cast<uint32_t>(token_ids_.size());
    n.child_begin = static_cast<uint32_t>(edges_.size());
    for (const auto& [byte, kid] : b->children) edges_.push_back({byte, -1});
    n.child_end = static_cast<uint32_t>(edges_.size());
    nodes_.push_back(n);
    // Pushed in reverse so the lowest byte's subtree is numbered next.
    uint32_t k = n.child_end;
    for (auto it = b->children.rbegin(); it != b->children.rend(); ++it) todo.emplace_back(it->second.get(), static_cast<int32_t>(--k));
  }
  index_preorder();
  // The long tokens' own trie; not for a trie that holds long tokens only
  // (which is what this makes).
  std::vector<std::string> long_pieces(pieces.size());
  size_t n_long = 0, n_any = 0;
  for (size_t id = 0; id < pieces.size(); ++id) {
    n_any += !pieces[id].empty();
    if (pieces[id].size() > k_short_token_bytes) {
      long_pieces[id] = pieces[id];
      ++n_long;
    }
  }
  if (n_long > 0 && n_long < n_any) long_tokens_ = std::make_shared<const vocab_trie>(long_pieces);
}

void vocab_trie::index_preorder() {
  const size_t n = nodes_.size();
  walk_nodes_.assign(n + 1, walk_node{});
  for (size_t i = 0; i < n; ++i) {
    walk_nodes_[i].token_begin = nodes_[i].token_begin;
    for (uint32_t k = nodes_[i].child_begin; k < nodes_[i].child_end; ++k) {
      walk_node& c = walk_nodes_[static_cast<size_t>(edges_[k].child)];
      c.byte = edges_[k].byte;
      c.depth = static_cast<uint16_t>(walk_nodes_[i].depth + 1);
      max_depth_ = std::max(max_depth_, c.depth);
    }
  }
  walk_nodes_[n].token_begin = static_cast<uint32_t>(token_ids_.size());
  // Children come after their parent in preorder: fill subtrees from the back.
  for (size_t i = n; i-- > 0;) {
    const node& nd = nodes_[i];
    walk_nodes_[i].subtree_end = nd.child_begin == nd.child_end
                                     ? static_cast<uint32_t>(i + 1)
                                     : walk_nodes_[static_cast<size_t>(edges_[nd.child_end - 1].child)].subtree_end;
  }
}

void vocab_trie::allowed_tokens(matcher& m, std::vector<uint8_t>& allowed) const {
  allowed.assign(static_cast<size_t>(n_vocab_), 0);
  walk_matcher(0, m, allowed);
}

void vocab_trie::walk_matcher(int32_t at, matcher& m, std::vector<uint8_t>& allowed) const {
  const node& n = nodes_[static_cast<size_t>(at)];
  if (at != 0) {
    for (uint32_t j = n.token_begin; j < n.token_end; ++j) allowed[static_cast<size_t>(token_ids_[j])] = 1;
  }
  const std::bitset<256> next = m.allowed_bytes();
  for (uint32_t k = n.child_begin; k < n.child_end; ++k) {
    const edge e = edges_[k];
    if (!next.test(e.byte) || !m.push(e.byte)) continue;
    walk_matcher(e.child, m, allowed);
    m.pop();
  }
}

}  // namespace spate::grammar
