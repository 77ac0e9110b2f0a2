// Content keys of the prefix cache. A full block of a sequence is keyed by
// its parent's key (the block before it, or a root derived from the request's
// cache salt) and its tokens, so a key stands for the whole prefix up to the
// block's end. Two independent 64-bit hash chains run side by side: lo keys
// the in-memory index (block_pool, which also compares parent and tokens),
// lo and hi together (128 bits) name a block on disk (kv_disk_store), where
// only the block's own tokens and its parent's key can be compared.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace spate {

struct prefix_key {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const prefix_key&) const = default;
};

struct prefix_key_hash {
  size_t operator()(const prefix_key& k) const { return static_cast<size_t>(k.lo ^ (k.hi * 0x9e3779b97f4a7c15ull)); }
};

// The key the first block of a sequence with this cache salt hangs off (salt
// 0: the base model's).
prefix_key root_prefix_key(uint64_t salt);

// The key of a block holding tokens whose parent has key parent.
prefix_key next_prefix_key(const prefix_key& parent, std::span<const int32_t> tokens);

}  // namespace spate
