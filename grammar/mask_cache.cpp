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
  const size_t n = logits.size();
  if (!bits.empty()) {
    // Word by word: all refused -> one fill, all allowed -> nothing.
    for (size_t w = 0; w < bits.size(); ++w) {
      const size_t base = w * 64;
      if (base >= n) break;
      const uint64_t allowed = bits[w];
      if (allowed == ~uint64_t{0}) continue;
      const size_t end = std::min(base + 64, n);
      if (allowed == 0) {
        std::fill(logits.begin() + static_cast<std::ptrdiff_t>(base), logits.begin() + static_cast<std::ptrdiff_t>(end), k_neg_inf);
        continue;
      }
      for (size_t i = base; i < end; ++i) {
        if (((allowed >> (i - base)) & 1u) == 0) logits[i] = k_neg_inf;
      }
    }
    return;
  }
  // Few allowed: keep their values, fill everything, put them back.
  thread_local std::vector<float> kept;
  kept.clear();
  for (const int32_t id : ids) kept.push_back(static_cast<size_t>(id) < n ? logits[static_cast<size_t>(id)] : k_neg_inf);
  std::fill(logits.begin(), logits.end(), k_neg_inf);
  for (size_t k = 0; k < ids.size(); ++k) {
    if (static_cast<size_t>(ids[k]) < n) logits[static_cast<size_t>(ids[k])] = kept[k];
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
    : g_(std::move(g)), trie_(std::move(trie)) {
  index_repeats();
}

void mask_cache::index_repeats() {
  const int32_t t = k_short_token_bytes;
  const size_t n = g_->rules.size();
  canon_.resize(n);
  for (size_t r = 0; r < n; ++r) canon_[r] = static_cast<int32_t>(r);
  // Each chain is walked once from its longest unvisited member down to opt_T.
  std::vector<bool> done(n, false);
  std::vector<int32_t> path;
  for (size_t r = n; r-- > 0;) {
    if (done[r] || g_->rules[r].repeat_left <= t) continue;
    path.clear();
    int32_t at = static_cast<int32_t>(r);
    while (at >= 0 && g_->rules[static_cast<size_t>(at)].repeat_left > t && !done[static_cast<size_t>(at)]) {
      path.push_back(at);
      at = g_->rules[static_cast<size_t>(at)].repeat_next;
    }
    const int32_t stand_in = at < 0 ? -1 : done[static_cast<size_t>(at)] ? canon_[static_cast<size_t>(at)] : at;
    for (int32_t p : path) {
      done[static_cast<size_t>(p)] = true;
      if (stand_in >= 0) canon_[static_cast<size_t>(p)] = stand_in;
    }
    has_long_repeats_ = has_long_repeats_ || stand_in >= 0;
  }
}

std::vector<parse_stack> mask_cache::canonical(const std::vector<parse_stack>& stacks) const {
  std::vector<parse_stack> out = stacks;
  for (parse_stack& s : out) {
    for (grammar_pos& p : s) p.rule = canon_[static_cast<size_t>(p.rule)];
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int32_t mask_cache::intern(const std::vector<parse_stack>& stacks) {
  const auto [it, fresh] = ids_.try_emplace(stacks, static_cast<int32_t>(states_.size()));
  if (fresh) {
    states_.push_back({&it->first, nullptr, nullptr});
    next_.emplace_back();
  }
  return it->second;
}

int32_t mask_cache::step(int32_t from, uint8_t byte) {
  const std::array<int32_t, 256>* row = next_[static_cast<size_t>(from)].get();
  if (row == nullptr) row = fill_row(from);
  return (*row)[byte];
}

// All 256 transitions of a state at once. The state after a byte depends only
// on which of the state's stacks accept the byte (each accepting stack moves
// past its byte set the same way whatever the byte), so bytes are grouped by
// that signature and the matcher runs once per group: about ten runs inside a
// JSON string instead of 256.
const std::array<int32_t, 256>* mask_cache::fill_row(int32_t from) {
  auto row = std::make_unique<std::array<int32_t, 256>>();
  const std::vector<parse_stack> stacks = *states_[static_cast<size_t>(from)].stacks;  // intern() may rehash below
  std::vector<std::pair<std::vector<uint32_t>, int32_t>> groups;  // signature -> next state
  std::vector<uint32_t> sig;
  for (int b = 0; b < 256; ++b) {
    sig.clear();
    for (size_t i = 0; i < stacks.size(); ++i) {
      if (!stacks[i].empty() && top_set(stacks[i]).test(static_cast<size_t>(b))) sig.push_back(static_cast<uint32_t>(i));
    }
    if (sig.empty()) {
      (*row)[static_cast<size_t>(b)] = -1;
      continue;
    }
    const auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == sig; });
    if (it != groups.end()) {
      (*row)[static_cast<size_t>(b)] = it->second;
      continue;
    }
    matcher m(g_, stacks);
    const int32_t to = m.advance(static_cast<uint8_t>(b)) ? intern(m.stacks()) : -1;
    groups.emplace_back(sig, to);
    (*row)[static_cast<size_t>(b)] = to;
  }
  next_[static_cast<size_t>(from)] = std::move(row);
  return next_[static_cast<size_t>(from)].get();
}

const std::bitset<256>& mask_cache::top_set(const parse_stack& s) const {
  const grammar_pos& p = s.back();
  return g_->rules[static_cast<size_t>(p.rule)].alts[static_cast<size_t>(p.alt)][static_cast<size_t>(p.pos)].set;
}

void mask_cache::walk_into(const vocab_trie& trie, int32_t s, uint16_t max_depth, std::vector<uint64_t>& bits) {
  // step() inlined: the walk's hot path is one row lookup per trie node.
  trie.walk(
      s,
      [this](int32_t from, uint8_t byte) {
        const std::array<int32_t, 256>* row = next_[static_cast<size_t>(from)].get();
        if (row == nullptr) [[unlikely]] row = fill_row(from);
        return (*row)[byte];
      },
      [&bits](int32_t id) { bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }, max_depth);
}

std::shared_ptr<const token_mask> mask_cache::make_mask(std::vector<uint64_t> bits, int32_t s) {
  auto m = std::make_shared<token_mask>();
  const auto& stacks = *states_[static_cast<size_t>(s)].stacks;
  m->can_end = std::any_of(stacks.begin(), stacks.end(), [](const parse_stack& st) { return st.empty(); });
  size_t n_allowed = 0;
  for (const uint64_t w : bits) n_allowed += static_cast<size_t>(std::popcount(w));
  m->n_allowed = n_allowed;
  if (n_allowed * 32 > static_cast<size_t>(trie_->n_vocab())) {
    m->bits = std::move(bits);
  } else {
    m->ids.reserve(n_allowed);
    for (size_t w = 0; w < bits.size(); ++w) {
      for (uint64_t b = bits[w]; b != 0; b &= b - 1) m->ids.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(b))));
    }
  }
  stats_.mask_bytes += m->bytes();
  ++stats_.n_masks;
  return m;
}

// The whole walk, or (with long repetition chains) the short tokens from the
// canonical state (cached there) plus the long ones from s itself.
std::shared_ptr<const token_mask> mask_cache::compute(int32_t s) {
  const size_t n_words = (static_cast<size_t>(trie_->n_vocab()) + 63) / 64;
  const vocab_trie* long_trie = trie_->long_tokens();
  if (!has_long_repeats_ || long_trie == nullptr) {
    std::vector<uint64_t> bits(n_words, 0);
    walk_into(*trie_, s, UINT16_MAX, bits);
    return make_mask(std::move(bits), s);
  }
  const std::vector<parse_stack> canon = canonical(*states_[static_cast<size_t>(s)].stacks);
  const int32_t c = intern(canon);
  std::shared_ptr<const std::vector<uint64_t>> short_bits = states_[static_cast<size_t>(c)].short_bits;
  if (!short_bits) {
    auto fresh = std::make_shared<std::vector<uint64_t>>(n_words, 0);
    walk_into(*trie_, c, k_short_token_bytes, *fresh);
    ++stats_.n_short_walks;
    stats_.mask_bytes += fresh->size() * 8;
    states_[static_cast<size_t>(c)].short_bits = fresh;
    short_bits = std::move(fresh);
  }
  std::vector<uint64_t> bits = *short_bits;
  walk_into(*long_trie, s, UINT16_MAX, bits);
  return make_mask(std::move(bits), s);
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
