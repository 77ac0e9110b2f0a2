#include "engine/block_pool.h"

#include <cassert>
#include <stdexcept>

namespace spate {

block_pool::block_pool(int32_t n_blocks) {
  if (n_blocks <= 0) throw std::invalid_argument("block_pool needs at least one block");
  ref_.assign(static_cast<size_t>(n_blocks), 0);
  free_.reserve(static_cast<size_t>(n_blocks));
  // Push in reverse so that allocation hands out 0, 1, 2, ... first.
  for (int32_t i = n_blocks - 1; i >= 0; --i) free_.push_back(i);
}

std::optional<int32_t> block_pool::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t id = free_.back();
  free_.pop_back();
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
  if (--r == 0) free_.push_back(id);
}

block_table& block_table::operator=(block_table&& o) noexcept {
  if (this != &o) {
    clear();
    pool_ = o.pool_;
    ids_ = std::move(o.ids_);
    o.ids_.clear();
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

void block_table::clear() {
  for (int32_t id : ids_) pool_->release(id);
  ids_.clear();
}

}  // namespace spate
