#include "engine/kv_block_manager.h"

#include <algorithm>
#include <stdexcept>

namespace spate {

kv_block_manager::kv_block_manager(int32_t n_blocks, int32_t block_size, bool enable_prefix_caching)
    : pool_(n_blocks), block_size_(block_size), prefix_caching_(enable_prefix_caching) {
  if (block_size < 1) throw std::invalid_argument("kv_block_manager: block_size must be >= 1");
}

prefix_key kv_block_manager::find_prefix(std::span<const int32_t> tokens, uint64_t salt) {
  const auto n_tokens = static_cast<int32_t>(tokens.size());
  match_.clear();
  prefix_key key = root_prefix_key(salt);
  if (prefix_caching_ && n_tokens > 0) {
    // Never match the block holding the last token: it must be computed.
    const int32_t max_blocks = (n_tokens - 1) / block_size_;
    for (int32_t b = 0; b < max_blocks; ++b) {
      auto blk = tokens.subspan(static_cast<size_t>(b) * block_size_, static_cast<size_t>(block_size_));
      const prefix_key k = next_prefix_key(key, blk);
      auto id = pool_.lookup(k.lo, key.lo, blk);
      if (!id) break;
      match_.push_back(*id);
      key = k;
    }
  }
  return key;
}

int32_t kv_block_manager::probe(std::span<const int32_t> tokens, uint64_t salt) {
  find_prefix(tokens, salt);
  return static_cast<int32_t>(match_.size()) * block_size_;
}

int32_t kv_block_manager::admit(std::span<const int32_t> tokens, int32_t n_first, block_table& table, prefix_state& state,
                                bool reuse_prefix, uint64_t salt) {
  const auto n_tokens = static_cast<int32_t>(tokens.size());
  prefix_key key = root_prefix_key(salt);
  if (reuse_prefix) {
    key = find_prefix(tokens, salt);
  } else {
    match_.clear();
  }
  const auto n_matched = static_cast<int32_t>(match_.size()) * block_size_;
  n_first = std::max(n_first, n_matched + 1);
  int64_t n_revived = 0;  // matched blocks that are evictable now and stop being available
  for (int32_t id : match_) n_revived += pool_.ref_count(id) == 0;
  const int64_t need = blocks_for(n_first, block_size_) - static_cast<int64_t>(match_.size());
  if (need + n_revived > pool_.n_free()) return -1;
  for (int32_t id : match_) {
    pool_.acquire_cached(id);
    table.push(id);
  }
  table.grow_to(n_first, block_size_);
  state.n_committed_blocks = static_cast<int32_t>(match_.size());
  state.last_key = key;
  if (prefix_caching_) {
    stats_.n_query_tokens += n_tokens;
    stats_.n_hit_tokens += n_matched;
  }
  return n_matched;
}

bool kv_block_manager::grow(block_table& table, int64_t n_positions) {
  const int64_t need = blocks_for(n_positions, block_size_) - table.n_blocks();
  if (need <= 0) return true;
  if (need > pool_.n_free()) return false;
  table.grow_to(n_positions, block_size_);
  return true;
}

void kv_block_manager::commit(std::span<const int32_t> tokens, int32_t n_cached, const block_table& table, prefix_state& state,
                              uint64_t salt) {
  if (!prefix_caching_) return;
  const int32_t n_full = std::min<int32_t>(n_cached / block_size_, table.n_blocks());
  prefix_key key = state.n_committed_blocks == 0 ? root_prefix_key(salt) : state.last_key;
  for (int32_t b = state.n_committed_blocks; b < n_full; ++b) {
    auto blk = tokens.subspan(static_cast<size_t>(b) * block_size_, static_cast<size_t>(block_size_));
    const prefix_key k = next_prefix_key(key, blk);
    const int32_t id = table.ids()[static_cast<size_t>(b)];
    // A duplicate (same content computed by another sequence) stays private.
    if (pool_.register_cached(id, k.lo, key.lo, blk) && track_committed_) {
      committed_.push_back(committed_block{id, k, key, std::vector<int32_t>(blk.begin(), blk.end()), salt});
    }
    key = k;
  }
  if (n_full > state.n_committed_blocks) {
    state.n_committed_blocks = n_full;
    state.last_key = key;
  }
}

void kv_block_manager::chain_keys(std::span<const int32_t> tokens, int32_t n_blocks, uint64_t salt,
                                  std::vector<prefix_key>& keys, std::vector<prefix_key>& parents) const {
  keys.resize(static_cast<size_t>(n_blocks));
  parents.resize(static_cast<size_t>(n_blocks));
  prefix_key key = root_prefix_key(salt);
  for (int32_t b = 0; b < n_blocks; ++b) {
    parents[static_cast<size_t>(b)] = key;
    key = next_prefix_key(key, tokens.subspan(static_cast<size_t>(b) * block_size_, static_cast<size_t>(block_size_)));
    keys[static_cast<size_t>(b)] = key;
  }
}

void kv_block_manager::refresh_prefix(std::span<const int32_t> tokens, uint64_t salt) {
  find_prefix(tokens, salt);
  for (int32_t id : match_) pool_.acquire_cached(id);
  // Released last block first: the first block becomes the most recent.
  for (auto it = match_.rbegin(); it != match_.rend(); ++it) pool_.release(*it);
}

void kv_block_manager::free(block_table& table, prefix_state& state) {
  table.clear();
  state = prefix_state{};
}

}  // namespace spate
