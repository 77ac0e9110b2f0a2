// KV block manager: allocation of KV blocks for sequences and automatic prefix
// caching on top of block_pool.
//
// Every full block of a sequence whose KV has been computed is keyed by a hash
// of (parent block's key, the block's tokens) (engine/prefix_key.h: the lo
// half keys the pool's index, both halves name the block on disk) and
// registered in the pool's index. A new (or resumed) request looks up its tokens block by block and
// reuses the longest run of cached blocks, so only the rest is prefilled. At
// least the last token is always left uncached, so the step that computes it
// returns logits (and no shared block is ever written). Cached blocks whose
// last user released them stay in the pool as evictable and are evicted
// least-recently-released first, only when a block is needed.
//
// Units: positions/tokens unless named *_blocks.
// Thread-safety: none; only the engine thread uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "engine/block_pool.h"
#include "engine/prefix_key.h"

namespace spate {

// Per-sequence prefix-cache progress, owned by whoever owns the sequence's
// scheduling state. Reset (value-initialize) when the sequence loses its blocks.
struct prefix_state {
  int32_t n_committed_blocks = 0;  // leading blocks already keyed (registered or found duplicate)
  prefix_key last_key;             // key of block n_committed_blocks - 1 (unused when 0)
};

// A block that commit() registered in the prefix cache (recorded while
// track_committed is on, for the disk tier): its id, keys and tokens.
struct committed_block {
  int32_t id = 0;
  prefix_key key, parent;
  std::vector<int32_t> tokens;
  uint64_t salt = 0;  // the sequence's cache salt
};

struct prefix_cache_stats {
  int64_t n_query_tokens = 0;  // tokens looked up at admission
  int64_t n_hit_tokens = 0;    // of those, found cached (not recomputed)
};

class kv_block_manager {
 public:
  kv_block_manager(int32_t n_blocks, int32_t block_size, bool enable_prefix_caching);

  int32_t block_size() const { return block_size_; }
  int32_t n_total_blocks() const { return pool_.n_total(); }
  // Blocks available to allocation (free + evictable cached).
  int32_t n_free_blocks() const { return pool_.n_free(); }
  block_pool& pool() { return pool_; }
  const prefix_cache_stats& stats() const { return stats_; }

  static int64_t blocks_for(int64_t n_positions, int32_t block_size) { return (n_positions + block_size - 1) / block_size; }

  // Positions of tokens a prefix-cache lookup would find cached now (a
  // multiple of block_size, at most tokens.size() - 1). No side effects.
  // salt: the request's cache_salt (engine_request): blocks are keyed apart
  // per salt (0: the base model's keys).
  int32_t probe(std::span<const int32_t> tokens, uint64_t salt = 0);

  // Admission of a sequence that holds no blocks: reuses the longest cached
  // prefix of tokens, then allocates blocks for the first n_first positions
  // (n_first >= the matched positions; it is raised to matched + 1 if lower).
  // All or nothing: returns -1 and leaves table empty and the cache untouched
  // when the blocks are not available; otherwise returns the number of
  // positions whose KV is already cached (the sequence's new n_cached), and
  // counts the lookup in stats().
  // reuse_prefix false: no cached prefix is reused (an embedding request needs
  // every position's hidden state); the blocks it completes are still cached.
  // Precondition: table is empty; tokens non-empty; state value-initialized.
  int32_t admit(std::span<const int32_t> tokens, int32_t n_first, block_table& table, prefix_state& state,
                bool reuse_prefix = true, uint64_t salt = 0);

  // Grows table to cover n_positions. All or nothing: false (table unchanged)
  // when not enough blocks are available.
  bool grow(block_table& table, int64_t n_positions);

  // After a step computed KV for positions [0, n_cached) of tokens: keys and
  // registers the newly completed full blocks of the table.
  void commit(std::span<const int32_t> tokens, int32_t n_cached, const block_table& table, prefix_state& state, uint64_t salt = 0);

  // Releases the table's blocks (cached ones stay reusable) and resets state.
  void free(block_table& table, prefix_state& state);

  // The keys of tokens' first n_blocks full blocks (n_blocks * block_size <=
  // tokens.size()), with their parents', into keys and parents (resized).
  void chain_keys(std::span<const int32_t> tokens, int32_t n_blocks, uint64_t salt, std::vector<prefix_key>& keys,
                  std::vector<prefix_key>& parents) const;

  // Makes the cached blocks of tokens' longest cached prefix the most
  // recently used of the evictable ones, the first block last to be evicted.
  void refresh_prefix(std::span<const int32_t> tokens, uint64_t salt = 0);

  // Puts content loaded from elsewhere (the disk tier) into the cache: takes
  // a block from the pool (evicting like allocation), lets fill(id) write its
  // KV and registers it under (key, parent, tokens). Returns the block, with
  // one reference the caller gives back with pool().release(); nullopt (fill
  // not called) when the content is already cached or no block is available.
  template <typename Fill>
  std::optional<int32_t> insert_cached(const prefix_key& key, const prefix_key& parent, std::span<const int32_t> tokens,
                                       Fill&& fill);

  // On: commit() records every block it newly registers (committed_block);
  // take_committed() hands them over. Off (the default): nothing is recorded.
  void set_track_committed(bool on) { track_committed_ = on; }
  std::vector<committed_block> take_committed() { return std::exchange(committed_, {}); }

 private:
  // Fills match_ with the cached blocks of the longest prefix; returns the last key.
  prefix_key find_prefix(std::span<const int32_t> tokens, uint64_t salt);

  block_pool pool_;
  int32_t block_size_;
  bool prefix_caching_;
  prefix_cache_stats stats_;
  std::vector<int32_t> match_;  // scratch
  bool track_committed_ = false;
  std::vector<committed_block> committed_;
};

template <typename Fill>
std::optional<int32_t> kv_block_manager::insert_cached(const prefix_key& key, const prefix_key& parent,
                                                       std::span<const int32_t> tokens, Fill&& fill) {
  if (!prefix_caching_ || pool_.lookup(key.lo, parent.lo, tokens)) return std::nullopt;
  const auto id = pool_.allocate();
  if (!id) return std::nullopt;
  fill(*id);
  pool_.register_cached(*id, key.lo, parent.lo, tokens);
  return id;
}

}  // namespace spate
