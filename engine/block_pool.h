// Pool of KV-cache block ids with reference counts.
//
// Block ids never move: a block id names the same KV memory for its whole
// life. A block is free when its reference count is zero. Ownership by a
// sequence is expressed through block_table (RAII), which releases its blocks
// when destroyed or cleared.
//
// Thread-safety: none. Only the engine thread touches the pool.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace spate {

class block_pool {
 public:
  explicit block_pool(int32_t n_blocks);

  int32_t n_total() const { return static_cast<int32_t>(ref_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }

  // Takes a free block (reference count 1), or nullopt when none is free.
  std::optional<int32_t> allocate();
  void retain(int32_t id);   // precondition: ref_count(id) > 0
  void release(int32_t id);  // precondition: ref_count(id) > 0; frees at zero
  int32_t ref_count(int32_t id) const { return ref_[static_cast<size_t>(id)]; }

 private:
  std::vector<int32_t> ref_;
  std::vector<int32_t> free_;  // LIFO stack of free ids
};

// A sequence's block table: grows only; releases its blocks on destruction.
class block_table {
 public:
  explicit block_table(block_pool& pool) : pool_(&pool) {}
  ~block_table() { clear(); }
  block_table(block_table&& o) noexcept : pool_(o.pool_), ids_(std::move(o.ids_)) { o.ids_.clear(); }
  block_table& operator=(block_table&& o) noexcept;
  block_table(const block_table&) = delete;
  block_table& operator=(const block_table&) = delete;

  const std::vector<int32_t>& ids() const { return ids_; }
  int32_t n_blocks() const { return static_cast<int32_t>(ids_.size()); }
  // Appends an already-owned reference (e.g. a freshly allocated block or a retained shared one).
  void push(int32_t id) { ids_.push_back(id); }
  // Grows until it covers n_positions; returns false (leaving what it got) when the pool runs dry.
  bool grow_to(int64_t n_positions, int32_t block_size);
  void clear();

 private:
  block_pool* pool_;
  std::vector<int32_t> ids_;
};

}  // namespace spate
