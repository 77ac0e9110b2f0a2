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
// Recurrent state (hybrid models: Gated DeltaNet or Mamba layers beside
// attention; n_state_slots > 0). Besides its KV blocks, a sequence holds one
// working state slot: the fixed-size state of every recurrent layer after its
// n_cached positions (forward_seq::state_slot). Slots come from a second
// block_pool of the same manager, budgeted with the KV blocks from one memory
// budget (the executor sizes both) and owned the same way (a one-entry
// block_table, RAII): taken at admission, given back on finish, cancel and
// preemption. Prefix caching keeps checkpoints: after a step that ends on a
// block boundary, at least checkpoint_interval_blocks after the sequence's
// last checkpoint (or at the last boundary of its tokens), the working state
// is copied into a slot registered under that block's prefix key (evictable,
// least recently released first, like a cached block). A new sequence reuses
// the longest cached KV prefix that ends where a checkpoint is: the
// checkpoint is copied into its working slot and only the rest is prefilled;
// without one it reuses nothing (its state must start at position 0).
// Copies and zeroing are state_ops: the manager queues them, the engine runs
// them on the executor (take_state_ops) before the step's forward (admission)
// and after on_step_done (checkpoints), then gives back their references.
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
  prefix_key last_parent;          // key of block n_committed_blocks - 2 (the root's when 1)
  int32_t n_checkpoint_blocks = 0; // recurrent: blocks covered by its last state checkpoint (saved or restored)
};

// One copy between recurrent state slots, run by the engine on the executor
// between forward passes: dst = src's state (src k_zero_state: the initial
// state), then `release` (a slot reference the op held, or -1) goes back.
struct state_op {
  static constexpr int32_t k_zero_state = -1;
  int32_t src = k_zero_state;
  int32_t dst = 0;
  int32_t release = -1;
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
  // n_state_slots > 0: a recurrent model (see above), checkpoints every
  // checkpoint_interval_blocks blocks at most (>= 1).
  kv_block_manager(int32_t n_blocks, int32_t block_size, bool enable_prefix_caching, int32_t n_state_slots = 0,
                   int32_t checkpoint_interval_blocks = k_default_checkpoint_interval_blocks);
  static constexpr int32_t k_default_checkpoint_interval_blocks = 8;

  int32_t block_size() const { return block_size_; }
  int32_t n_total_blocks() const { return pool_.n_total(); }
  // Blocks available to allocation (free + evictable cached).
  int32_t n_free_blocks() const { return pool_.n_free(); }
  block_pool& pool() { return pool_; }
  // Recurrent models: the state slots' pool (null: none).
  block_pool* state_pool() { return state_pool_ ? &*state_pool_ : nullptr; }
  bool recurrent() const { return state_pool_.has_value(); }
  int32_t n_state_slots() const { return state_pool_ ? state_pool_->n_total() : 0; }
  // Slots admission can take: free plus evictable checkpoints (0 when not recurrent).
  int32_t n_free_state_slots() const { return state_pool_ ? state_pool_->n_free() : 0; }
  // Registered checkpoints (in use or evictable).
  int32_t n_checkpoints() const { return state_pool_ ? state_pool_->n_cached() : 0; }
  // The state ops queued since the last call, in order; the caller runs them
  // and gives back each op's `release` with release_state().
  std::vector<state_op> take_state_ops() { return std::exchange(state_ops_, {}); }
  void release_state(int32_t slot) { state_pool_->release(slot); }
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
  // Recurrent models: also takes the working state slot into state_slot
  // (all or nothing with the blocks) and queues its state_op: a copy of the
  // checkpoint the reused prefix ends at, or zeroing.
  // Precondition: table and state_slot are empty; tokens non-empty; state value-initialized.
  int32_t admit(std::span<const int32_t> tokens, int32_t n_first, block_table& table, prefix_state& state,
                bool reuse_prefix = true, uint64_t salt = 0, block_table* state_slot = nullptr);

  // Grows table to cover n_positions. All or nothing: false (table unchanged)
  // when not enough blocks are available.
  bool grow(block_table& table, int64_t n_positions);

  // After a step computed KV for positions [0, n_cached) of tokens: keys and
  // registers the newly completed full blocks of the table. Recurrent
  // models: with state_slot (the working slot, whose state is now that after
  // n_cached positions), queues a checkpoint when the rule above says so.
  // prompt_end: the step was a prefill that ended at the last block boundary
  // of the tokens (a checkpoint there whatever the interval).
  void commit(std::span<const int32_t> tokens, int32_t n_cached, const block_table& table, prefix_state& state, uint64_t salt = 0,
              const block_table* state_slot = nullptr, bool prompt_end = false);

  // Releases the table's blocks (cached ones stay reusable) and the working
  // state slot, and resets state.
  void free(block_table& table, prefix_state& state, block_table* state_slot = nullptr);

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
  // Fills match_ with the cached blocks of the longest prefix (recurrent:
  // cut back to the longest that ends at a checkpoint, found in ckpt_);
  // returns the last key.
  prefix_key find_prefix(std::span<const int32_t> tokens, uint64_t salt);
  // Recurrent: queues a checkpoint of working slot `working` for block n_blocks - 1.
  void save_checkpoint(std::span<const int32_t> tokens, int32_t n_blocks, const prefix_key& key, const prefix_key& parent,
                       int32_t working, prefix_state& state);

  block_pool pool_;
  int32_t block_size_;
  bool prefix_caching_;
  prefix_cache_stats stats_;
  std::vector<int32_t> match_;  // scratch
  std::vector<prefix_key> keys_;  // scratch: the keys of match_'s blocks (recurrent)
  std::optional<block_pool> state_pool_;  // recurrent models: state slots
  int32_t checkpoint_interval_blocks_;
  int32_t ckpt_ = -1;  // the checkpoint find_prefix's prefix ends at (recurrent; -1: none)
  std::vector<state_op> state_ops_;
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
