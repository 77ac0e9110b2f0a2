// The file format of the prefix cache's disk tier: one file per KV block.
//
//   offset  bytes            field
//   0       8                magic "SPATEKV\0"
//   8       4                format version (k_kv_disk_version)
//   12      4                n_tokens (the block size)
//   16      8                payload bytes
//   24      16               fingerprint (lo, hi): the model and KV format
//   40      16               key (lo, hi): the block's prefix_key
//   56      16               parent key (lo, hi)
//   72      4 * n_tokens     the block's tokens (int32)
//   ...     payload bytes    the block's KV (forward_executor::copy_kv_block_out)
//   end-8   8                checksum: checksum64(payload, checksum64(bytes [0, 72 + 4 * n_tokens)))
//
// Integers in the machine's byte order (the fingerprint covers the order, so
// a file from a machine of the other order is foreign). A file is used only
// if its size, magic, version, n_tokens, payload size, fingerprint, key,
// parent, tokens and checksum all match what the reader expects.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/prefix_key.h"

namespace spate {

// Raised whenever the bytes written for a block change meaning.
inline constexpr uint32_t k_kv_disk_version = 1;
inline constexpr size_t k_kv_disk_header_bytes = 72;

// 64-bit checksum of bytes (XXH64, written here; seed chains calls).
uint64_t checksum64(std::span<const uint8_t> bytes, uint64_t seed = 0);

// What identifies one block file's content.
struct kv_disk_block {
  prefix_key key, parent;
  std::vector<int32_t> tokens;
};

// Total size of a block file.
size_t kv_disk_file_bytes(size_t n_tokens, size_t payload_bytes);

// The file's bytes before the payload (header and tokens).
std::vector<uint8_t> kv_disk_encode_head(const prefix_key& fingerprint, const kv_disk_block& b, size_t payload_bytes);

// The checksum that ends a file with this head and payload.
uint64_t kv_disk_checksum(std::span<const uint8_t> head, std::span<const uint8_t> payload);

// "" when head (the bytes before the payload) is a valid head of block b's
// file under fingerprint with payload_bytes of payload; else what differs
// ("magic", "version", "fingerprint", "key", "parent", "tokens", ...).
std::string kv_disk_check_head(std::span<const uint8_t> head, const prefix_key& fingerprint, const kv_disk_block& b,
                               size_t payload_bytes);

// The file name of a key: 32 lowercase hex digits (hi then lo) and ".kvb".
std::string kv_disk_file_name(const prefix_key& key);
// The key of a file name made by kv_disk_file_name; false for any other name.
bool kv_disk_parse_file_name(const std::string& name, prefix_key& key);
// 32 hex digits (hi then lo), the subdirectory of a fingerprint.
std::string kv_disk_hex(const prefix_key& k);

}  // namespace spate
