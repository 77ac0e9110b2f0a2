#include "engine/kv_block_manager.h"

#include <algorithm>
#include <stdexcept>

namespace spate {

kv_block_manager::kv_block_manager(int32_t n_blocks, int32_t block_size, bool enable_prefix_caching, int32_t n_state_slots,
                                   int32_t checkpoint_interval_blocks)
    : pool_(n_blocks), block_size_(block_size), prefix_caching_(enable_prefix_caching),
      checkpoint_interval_blocks_(checkpoint_interval_blocks) {
  if (block_size < 1) throw std::invalid_argument("kv_block_manager: block_size must be >= 1");
  if (n_state_slots < 0) throw std::invalid_argument("kv_block_manager: n_state_slots must be >= 0");
  if (checkpoint_interval_blocks < 1) throw std::invalid_argument("kv_block_manager: checkpoint_interval_blocks must be >= 1");
  if (n_state_slots > 0) state_pool_.emplace(n_state_slots);
}

prefix_key kv_block_manager::find_prefix(std::span<const int32_t> tokens, uint64_t salt) {
  const auto n_tokens = static_cast<int32_t>(tokens.size());
  match_.clear();
  keys_.clear();
  ckpt_ = -1;
  const prefix_key root = root_prefix_key(salt);
  prefix_key key = root;
  if (prefix_caching_ && n_tokens > 0) {
    // Never match the block holding the last token: it must be computed.
    const int32_t max_blocks = (n_tokens - 1) / block_size_;
    for (int32_t b = 0; b < max_blocks; ++b) {
      auto blk = tokens.subspan(static_cast<size_t>(b) * block_size_, static_cast<size_t>(block_size_));
      const prefix_key k = next_prefix_key(key, blk);
      auto id = pool_.lookup(k.lo, key.lo, blk);
      if (!id) break;
      match_.push_back(*id);
      keys_.push_back(k);
      key = k;
    }
  }
  if (state_pool_) {
    // A recurrent layer's state must be the one after the reused prefix:
    // keep the longest matched run that ends at a checkpoint, or nothing.
    auto b = static_cast<int32_t>(match_.size());
    for (; b > 0; --b) {
      const auto bi = static_cast<size_t>(b - 1);
      const prefix_key parent = b >= 2 ? keys_[bi - 1] : root;
      auto blk = tokens.subspan(bi * block_size_, static_cast<size_t>(block_size_));
      if (auto id = state_pool_->lookup(keys_[bi].lo, parent.lo, blk)) {
        ckpt_ = *id;
        break;
      }
    }
    match_.resize(static_cast<size_t>(b));
    keys_.resize(static_cast<size_t>(b));
    key = b > 0 ? keys_.back() : root;
  }
  return key;
}

int32_t kv_block_manager::probe(std::span<const int32_t> tokens, uint64_t salt) {
  find_prefix(tokens, salt);
  return static_cast<int32_t>(match_.size()) * block_size_;
}

int32_t kv_block_manager::admit(std::span<const int32_t> tokens, int32_t n_first, block_table& table, prefix_state& state,
                                bool reuse_prefix, uint64_t salt, block_table* state_slot) {
  const auto n_tokens = static_cast<int32_t>(tokens.size());
  if (state_pool_ && !state_slot) throw std::invalid_argument("kv_block_manager::admit: a recurrent model's sequence needs a state slot");
  prefix_key key = root_prefix_key(salt);
  if (reuse_prefix) {
    key = find_prefix(tokens, salt);
  } else {
    match_.clear();
    keys_.clear();
    ckpt_ = -1;
  }
  const auto n_matched = static_cast<int32_t>(match_.size()) * block_size_;
  n_first = std::max(n_first, n_matched + 1);
  int64_t n_revived = 0;  // matched blocks that are evictable now and stop being available
  for (int32_t id : match_) n_revived += pool_.ref_count(id) == 0;
  const int64_t need = blocks_for(n_first, block_size_) - static_cast<int64_t>(match_.size());
  if (need + n_revived > pool_.n_free()) return -1;
  // The working slot, besides the checkpoint it copies (held until the copy ran).
  if (state_pool_ && 1 + (ckpt_ >= 0 && state_pool_->ref_count(ckpt_) == 0) > state_pool_->n_free()) return -1;
  for (int32_t id : match_) {
    pool_.acquire_cached(id);
    table.push(id);
  }
  table.grow_to(n_first, block_size_);
  state.n_committed_blocks = static_cast<int32_t>(match_.size());
  state.last_key = key;
  state.last_parent = match_.size() >= 2 ? keys_[match_.size() - 2] : root_prefix_key(salt);
  if (state_pool_) {
    if (ckpt_ >= 0) state_pool_->acquire_cached(ckpt_);
    const int32_t working = *state_pool_->allocate();  // checked above
    state_slot->push(working);
    state_ops_.push_back(state_op{ckpt_ >= 0 ? ckpt_ : state_op::k_zero_state, working, ckpt_});
    state.n_checkpoint_blocks = static_cast<int32_t>(match_.size());
  }
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
                              uint64_t salt, const block_table* state_slot, bool prompt_end) {
  if (!prefix_caching_) return;
  const int32_t n_full = std::min<int32_t>(n_cached / block_size_, table.n_blocks());
  prefix_key key = state.n_committed_blocks == 0 ? root_prefix_key(salt) : state.last_key;
  prefix_key parent = state.n_committed_blocks <= 1 ? root_prefix_key(salt) : state.last_parent;
  for (int32_t b = state.n_committed_blocks; b < n_full; ++b) {
    auto blk = tokens.subspan(static_cast<size_t>(b) * block_size_, static_cast<size_t>(block_size_));
    const prefix_key k = next_prefix_key(key, blk);
    const int32_t id = table.ids()[static_cast<size_t>(b)];
    // A duplicate (same content computed by another sequence) stays private.
    if (pool_.register_cached(id, k.lo, key.lo, blk) && track_committed_) {
      committed_.push_back(committed_block{id, k, key, std::vector<int32_t>(blk.begin(), blk.end()), salt});
    }
    parent = key;
    key = k;
  }
  if (n_full > state.n_committed_blocks) {
    state.n_committed_blocks = n_full;
    state.last_key = key;
    state.last_parent = parent;
  }
  // A checkpoint of the working state: only where it is the state after a
  // whole number of keyed blocks.
  if (!state_pool_ || !state_slot || state_slot->ids().empty() || n_cached == 0 || n_cached % block_size_ != 0 ||
      n_full != n_cached / block_size_ || n_full != state.n_committed_blocks || n_full <= state.n_checkpoint_blocks) {
    return;
  }
  if (prompt_end || n_full - state.n_checkpoint_blocks >= checkpoint_interval_blocks_)
    save_checkpoint(tokens, n_full, key, parent, state_slot->ids()[0], state);
}

void kv_block_manager::save_checkpoint(std::span<const int32_t> tokens, int32_t n_blocks, const prefix_key& key,
                                       const prefix_key& parent, int32_t working, prefix_state& state) {
  auto blk = tokens.subspan(static_cast<size_t>(n_blocks - 1) * block_size_, static_cast<size_t>(block_size_));
  if (!state_pool_->lookup(key.lo, parent.lo, blk)) {
    const auto id = state_pool_->allocate();  // may evict the least recently released checkpoint
    if (!id) return;                          // every slot is some sequence's working state
    state_pool_->register_cached(*id, key.lo, parent.lo, blk);
    state_ops_.push_back(state_op{working, *id, *id});  // released after the copy: evictable from then on
  }
  state.n_checkpoint_blocks = n_blocks;
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

void kv_block_manager::free(block_table& table, prefix_state& state, block_table* state_slot) {
  table.clear();
  if (state_slot) state_slot->clear();
  state = prefix_state{};
}

}  // namespace spate
