#include "grammar/vocab_trie.h"

#include <algorithm>

namespace spate::grammar {

vocab_trie::vocab_trie(const std::vector<std::string>& pieces) : n_vocab_(static_cast<int32_t>(pieces.size())) {
  nodes_.emplace_back();
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (pieces[id].empty()) continue;
    int32_t at = 0;
    for (const char c : pieces[id]) {
      const auto b = static_cast<uint8_t>(c);
      auto& kids = nodes_[static_cast<size_t>(at)].children;
      const auto it = std::lower_bound(kids.begin(), kids.end(), b, [](const auto& kid, uint8_t x) { return kid.first < x; });
      if (it != kids.end() && it->first == b) {
        at = it->second;
        continue;
      }
      const auto next = static_cast<int32_t>(nodes_.size());
      kids.insert(it, {b, next});  // before nodes_ grows, which would invalidate kids
      nodes_.emplace_back();
      at = next;
    }
    nodes_[static_cast<size_t>(at)].tokens.push_back(static_cast<int32_t>(id));
  }
}

void vocab_trie::allowed_tokens(matcher& m, std::vector<uint8_t>& allowed) const {
  allowed.assign(static_cast<size_t>(n_vocab_), 0);
  walk(0, m, allowed);
}

void vocab_trie::walk(int32_t at, matcher& m, std::vector<uint8_t>& allowed) const {
  const node& n = nodes_[static_cast<size_t>(at)];
  if (at != 0) {
    for (int32_t id : n.tokens) allowed[static_cast<size_t>(id)] = 1;
  }
  const std::bitset<256> next = m.allowed_bytes();
  for (const auto& [byte, child] : n.children) {
    if (!next.test(byte) || !m.push(byte)) continue;
    walk(child, m, allowed);
    m.pop();
  }
}

}  // namespace spate::grammar
