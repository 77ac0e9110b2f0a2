// Pool of KV-cache block ids with reference counts, plus the index of cached
// (content-addressed) blocks used by prefix caching.
//
// Block ids never move: a block id names the same KV memory for its whole
// life. A block is unused when its reference count is zero. An unused block
// is either free (no cached content) or evictable: it still holds the KV of a
// full, registered block and can be revived by a prefix-cache hit until
// allocate() needs it, evicting least recently released first. Ownership by a
// sequence is expressed through block_table (RAII), which releases its blocks
// when destroyed or cleared.
//
// Without any register_cached() call the pool behaves as a plain free list
// (LIFO, 0, 1, 2, ... first).
//
// Thread-safety: none. Only the engine thread touches the pool.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace spate {

class block_pool {
 public:
  explicit block_pool(int32_t n_blocks);

  int32_t n_total() const { return static_cast<int32_t>(ref_.size()); }
  // Blocks allocate() can hand out: free plus evictable cached blocks.
  int32_t n_free() const { return static_cast<int32_t>(free_.size() + lru_.size()); }
  // Unused blocks still holding cached content.
  int32_t n_evictable() const { return static_cast<int32_t>(lru_.size()); }
  // Registered cached blocks (in use or evictable).
  int32_t n_cached() const { return static_cast<int32_t>(index_.size()); }

  // Takes a free block (reference count 1), evicting the least recently
  // released cached block when no plain free block is left; nullopt when none.
  std::optional<int32_t> allocate();
  void retain(int32_t id);   // precondition: ref_count(id) > 0
  void release(int32_t id);  // precondition: ref_count(id) > 0; frees (or parks as evictable) at zero
  int32_t ref_count(int32_t id) const { return ref_[static_cast<size_t>(id)]; }

  // Prefix-cache index. key identifies (parent key, tokens); parent and tokens
  // are compared too, so a hash collision never yields a wrong block.
  // Returns the cached block for that content, or nullopt.
  std::optional<int32_t> lookup(uint64_t key, uint64_t parent, std::span<const int32_t> tokens) const;
  // Takes a reference to a cached block found by lookup() (reviving it if evictable).
  void acquire_cached(int32_t id);
  // Registers block id (in use, its KV fully computed) as holding this content.
  // Returns false (and changes nothing) when the content is already cached in
  // another block or id is already registered.
  bool register_cached(int32_t id, uint64_t key, uint64_t parent, std::span<const int32_t> tokens);

 private:
  struct cached_info {
    uint64_t key = 0;
    uint64_t parent = 0;
    std::vector<int32_t> tokens;
    bool registered = false;
    std::list<int32_t>::iterator lru_pos;  // valid while evictable
    bool evictable = false;
  };
  void unregister(int32_t id);

  std::vector<int32_t> ref_;
  std::vector<int32_t> free_;  // LIFO stack of free ids (no cached content)
  std::list<int32_t> lru_;     // evictable cached ids, least recently released first
  std::vector<cached_info> info_;
  std::unordered_multimap<uint64_t, int32_t> index_;  // key -> block id
};

// A sequence's block table: grows at its end; releases its blocks on
// destruction. release_front() gives back leading blocks no layer will read
// again (sliding-window models) and leaves k_no_block in their entries, so no
// other entry moves and the table still covers the same positions.
//
//   ids_: [ -1 | -1 | 17 | 4 | 9 ]     n_released_ = 2
//          released   held (oldest first)
inline constexpr int32_t k_no_block = -1;

class block_table {
 public:
  explicit block_table(block_pool& pool) : pool_(&pool) {}
  ~block_table() { clear(); }
  block_table(block_table&& o) noexcept : pool_(o.pool_), ids_(std::move(o.ids_)), n_released_(o.n_released_) {
    o.ids_.clear();
    o.n_released_ = 0;
  }
  block_table& operator=(block_table&& o) noexcept;
  block_table(const block_table&) = delete;
  block_table& operator=(const block_table&) = delete;

  const std::vector<int32_t>& ids() const { return ids_; }
  int32_t n_blocks() const { return static_cast<int32_t>(ids_.size()); }
  // Leading entries released by release_front() (k_no_block now).
  int32_t n_released() const { return n_released_; }
  // Appends an already-owned reference (e.g. a freshly allocated block or a retained shared one).
  void push(int32_t id) { ids_.push_back(id); }
  // Grows until it covers n_positions; returns false (leaving what it got) when the pool runs dry.
  bool grow_to(int64_t n_positions, int32_t block_size);
  // Releases entries [n_released(), n_front) to the pool (registered blocks
  // stay cached) and marks them k_no_block. n_front is clamped to n_blocks();
  // at or below n_released() it does nothing.
  void release_front(int32_t n_front);
  // Releases trailing entries until at most n_keep remain (speculative
  // decoding gives back the blocks grown for rejected draft tokens). The
  // entries kept do not move.
  void shrink_to(int32_t n_keep);
  void clear();

 private:
  block_pool* pool_;
  std::vector<int32_t> ids_;
  int32_t n_released_ = 0;
};

}  // namespace spate
