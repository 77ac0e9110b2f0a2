#include "engine/block_pool.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>

namespace spate {

block_pool::block_pool(int32_t n_blocks) {
  if (n_blocks <= 0) throw std::invalid_argument("block_pool needs at least one block");
  ref_.assign(static_cast<size_t>(n_blocks), 0);
  info_.resize(static_cast<size_t>(n_blocks));
  free_.reserve(static_cast<size_t>(n_blocks));
  // Push in reverse so that allocation hands out 0, 1, 2, ... first.
  for (int32_t i = n_blocks - 1; i >= 0; --i) free_.push_back(i);
}

std::optional<int32_t> block_pool::allocate() {
  int32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    id = lru_.front();
    lru_.pop_front();
    info_[static_cast<size_t>(id)].evictable = false;
    unregister(id);
  } else {
    return std::nullopt;
  }
  ref_[static_cast<size_t>(id)] = 1;
  return id;
}

void block_pool::retain(int32_t id) {
  assert(ref_[static_cast<size_t>(id)] > 0);
  ++ref_[static_cast<size_t>(id)];
}

void block_pool::release(int32_t id) {
  int32_t& r = ref_[static_cast<size_t>(id)];
  assert(r > 0);
  if (--r > 0) return;
  cached_info& ci = info_[static_cast<size_t>(id)];
  if (ci.registered) {
    ci.lru_pos = lru_.insert(lru_.end(), id);
    ci.evictable = true;
  } else {
    free_.push_back(id);
  }
}

std::optional<int32_t> block_pool::lookup(uint64_t key, uint64_t parent, std::span<const int32_t> tokens) const {
  auto [b, e] = index_.equal_range(key);
  for (auto it = b; it != e; ++it) {
    const cached_info& ci = info_[static_cast<size_t>(it->second)];
    if (ci.parent == parent && std::equal(ci.tokens.begin(), ci.tokens.end(), tokens.begin(), tokens.end())) return it->second;
  }
  return std::nullopt;
}

void block_pool::acquire_cached(int32_t id) {
  cached_info& ci = info_[static_cast<size_t>(id)];
  assert(ci.registered);
  if (ci.evictable) {
    lru_.erase(ci.lru_pos);
    ci.evictable = false;
  }
  ++ref_[static_cast<size_t>(id)];
}

bool block_pool::register_cached(int32_t id, uint64_t key, uint64_t parent, std::span<const int32_t> tokens) {
  assert(ref_[static_cast<size_t>(id)] > 0);
  cached_info& ci = info_[static_cast<size_t>(id)];
  if (ci.registered || lookup(key, parent, tokens)) return false;
  ci.key = key;
  ci.parent = parent;
  ci.tokens.assign(tokens.begin(), tokens.end());
  ci.registered = true;
  index_.emplace(key, id);
  return true;
}

void block_pool::unregister(int32_t id) {
  cached_info& ci = info_[static_cast<size_t>(id)];
  if (!ci.registered) return;
  auto [b, e] = index_.equal_range(ci.key);
  for (auto it = b; it != e; ++it) {
    if (it->second == id) {
      index_.erase(it);
      break;
    }
  }
  ci.registered = false;
  ci.tokens.clear();
}

block_table& block_table::operator=(block_table&& o) noexcept {
  if (this != &o) {
    clear();
    pool_ = o.pool_;
    ids_ = std::move(o.ids_);
    n_released_ = o.n_released_;
    o.ids_.clear();
    o.n_released_ = 0;
  }
  return *this;
}

bool block_table::grow_to(int64_t n_positions, int32_t block_size) {
  while (static_cast<int64_t>(ids_.size()) * block_size < n_positions) {
    auto id = pool_->allocate();
    if (!id) return false;
    ids_.push_back(*id);
  }
  return true;
}

void block_table::release_front(int32_t n_front) {
  n_front = std::min(n_front, n_blocks());
  for (; n_released_ < n_front; ++n_released_) {
    int32_t& id = ids_[static_cast<size_t>(n_released_)];
    pool_->release(id);
    id = k_no_block;
  }
}

void block_table::shrink_to(int32_t n_keep) {
  n_keep = std::max(n_keep, 0);
  while (n_blocks() > n_keep) {
    if (ids_.back() != k_no_block) pool_->release(ids_.back());
    ids_.pop_back();
  }
  n_released_ = std::min(n_released_, n_blocks());
}

void block_table::clear() {
  // Last block first: with prefix caching the tail of a sequence is the least
  // likely to be shared, so it becomes the first to be evicted.
  for (auto it = ids_.rbegin(); it != ids_.rend(); ++it) {
    if (*it != k_no_block) pool_->release(*it);
  }
  ids_.clear();
  n_released_ = 0;
}

}  // namespace spate
