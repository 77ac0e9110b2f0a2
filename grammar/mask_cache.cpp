#include "grammar/mask_cache.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace spate::grammar {

bool token_mask::allows(int32_t id) const {
  if (!bits.empty()) return (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u;
  return std::binary_search(ids.begin(), ids.end(), id);
}

void token_mask::apply(std::span<float> logits) const {
  constexpr float k_neg_inf = -std::numeric_limits<float>::infinity();
  if (!bits.empty()) {
    for (size_t w = 0; w < bits.size(); ++w) {
      uint64_t refused = ~bits[w];
      const size_t base = w * 64;
      while (refused != 0) {
        const size_t i = base + static_cast<size_t>(std::countr_zero(refused));
        if (i >= logits.size()) break;
        logits[i] = k_neg_inf;
        refused &= refused - 1;
      }
    }
    return;
  }
  size_t next = 0;  // index into ids
  for (size_t i = 0; i < logits.size(); ++i) {
    if (next < ids.size() && static_cast<size_t>(ids[next]) == i) {
      ++next;
    } else {
      logits[i] = k_neg_inf;
    }
  }
}

size_t mask_cache::stacks_hash::operator()(const std::vector<parse_stack>& v) const {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  auto mix = [&h](uint64_t x) { h = (h ^ x) * 0x100000001B3ull + (h >> 29); };
  for (const parse_stack& s : v) {
    mix(s.size());
    for (const grammar_pos& p : s) {
      mix((static_cast<uint64_t>(static_cast<uint32_t>(p.rule)) << 32) ^
          (static_cast<uint64_t>(static_cast<uint32_t>(p.alt)) << 16) ^ static_cast<uint32_t>(p.pos));
    }
  }
  return static_cast<size_t>(h);
}

mask_cache::mask_cache(std::shared_ptr<const grammar> g, std::shared_ptr<const vocab_trie> trie)
    : g_(std::move(g)), trie_(std::move(trie)) {}

int32_t mask_cache::intern(const std::vector<parse_stack>& stacks) {
  const auto [it, fresh] = ids_.try_emplace(stacks, static_cast<int32_t>(states_.size()));
  if (fresh) states_.push_back({&it->first, nullptr});
  return it->second;
}

int32_t mask_cache::step(int32_t from, uint8_t byte) {
  const uint64_t key = (static_cast<uint64_t>(from) << 8) | byte;
  const auto it = next_.find(key);
  if (it != next_.end()) return it->second;
  matcher m(g_, *states_[static_cast<size_t>(from)].stacks);
  const int32_t to = m.advance(byte) ? intern(m.stacks()) : -1;
  next_.emplace(key, to);
  return to;
}

std::shared_ptr<const token_mask> mask_cache::compute(int32_t s) {
  scratch_.clear();
  trie_->walk(
      s, [this](int32_t from, uint8_t byte) { return step(from, byte); },
      [this](int32_t id) { scratch_.push_back(id); });
  auto m = std::make_shared<token_mask>();
  const auto& stacks = *states_[static_cast<size_t>(s)].stacks;
  m->can_end = std::any_of(stacks.begin(), stacks.end(), [](const parse_stack& st) { return st.empty(); });
  m->n_allowed = scratch_.size();
  const auto n_vocab = static_cast<size_t>(trie_->n_vocab());
  if (scratch_.size() * 32 > n_vocab) {
    m->bits.assign((n_vocab + 63) / 64, 0);
    for (int32_t id : scratch_) m->bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  } else {
    std::sort(scratch_.begin(), scratch_.end());
    m->ids = scratch_;
  }
  stats_.mask_bytes += m->bytes();
  ++stats_.n_masks;
  return m;
}

void mask_cache::reset_if_full() {
  if (states_.size() <= k_max_cached_states && stats_.mask_bytes <= k_max_mask_bytes) return;
  ids_.clear();
  states_.clear();
  next_.clear();
  stats_.mask_bytes = 0;
  stats_.n_masks = 0;
  ++stats_.n_resets;
}

std::shared_ptr<const token_mask> mask_cache::mask(const matcher& m) {
  std::lock_guard lock(mu_);
  reset_if_full();
  const int32_t s = intern(m.stacks());
  auto& slot = states_[static_cast<size_t>(s)].mask;
  if (slot) {
    ++stats_.n_hits;
    return slot;
  }
  ++stats_.n_misses;
  auto fresh = compute(s);
  states_[static_cast<size_t>(s)].mask = fresh;  // states_ may have grown during compute
  return fresh;
}

mask_cache::counters mask_cache::stats() const {
  std::lock_guard lock(mu_);
  counters c = stats_;
  c.n_states = states_.size();
  return c;
}

}  // namespace spate::grammar
