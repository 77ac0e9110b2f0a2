#include "engine/kv_disk_format.h"

#include <bit>
#include <cstring>

namespace spate {
namespace {

constexpr char k_magic[8] = {'S', 'P', 'A', 'T', 'E', 'K', 'V', '\0'};

constexpr uint64_t k_p1 = 11400714785074694791ull, k_p2 = 14029467366897019727ull, k_p3 = 1609587929392839161ull,
                   k_p4 = 9650029242287828579ull, k_p5 = 2870177450012600261ull;

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint64_t round64(uint64_t acc, uint64_t input) {
  acc += input * k_p2;
  acc = std::rotl(acc, 31);
  return acc * k_p1;
}

uint64_t merge_round(uint64_t acc, uint64_t val) {
  acc ^= round64(0, val);
  return acc * k_p1 + k_p4;
}

template <typename T>
void put(std::vector<uint8_t>& out, size_t at, const T& v) {
  std::memcpy(out.data() + at, &v, sizeof v);
}

template <typename T>
T get(std::span<const uint8_t> in, size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

}  // namespace

uint64_t checksum64(std::span<const uint8_t> bytes, uint64_t seed) {
  const uint8_t* p = bytes.data();
  const uint8_t* end = p + bytes.size();
  uint64_t h;
  if (bytes.size() >= 32) {
    uint64_t v1 = seed + k_p1 + k_p2, v2 = seed + k_p2, v3 = seed, v4 = seed - k_p1;
    for (; p + 32 <= end; p += 32) {
      v1 = round64(v1, load64(p));
      v2 = round64(v2, load64(p + 8));
      v3 = round64(v3, load64(p + 16));
      v4 = round64(v4, load64(p + 24));
    }
    h = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
    h = merge_round(merge_round(merge_round(merge_round(h, v1), v2), v3), v4);
  } else {
    h = seed + k_p5;
  }
  h += static_cast<uint64_t>(bytes.size());
  for (; p + 8 <= end; p += 8) h = std::rotl(h ^ round64(0, load64(p)), 27) * k_p1 + k_p4;
  if (p + 4 <= end) {
    h = std::rotl(h ^ (static_cast<uint64_t>(load32(p)) * k_p1), 23) * k_p2 + k_p3;
    p += 4;
  }
  for (; p < end; ++p) h = std::rotl(h ^ (*p * k_p5), 11) * k_p1;
  h ^= h >> 33;
  h *= k_p2;
  h ^= h >> 29;
  h *= k_p3;
  return h ^ (h >> 32);
}

size_t kv_disk_file_bytes(size_t n_tokens, size_t payload_bytes) {
  return k_kv_disk_header_bytes + 4 * n_tokens + payload_bytes + 8;
}

std::vector<uint8_t> kv_disk_encode_head(const prefix_key& fingerprint, const kv_disk_block& b, size_t payload_bytes) {
  std::vector<uint8_t> out(k_kv_disk_header_bytes + 4 * b.tokens.size());
  std::memcpy(out.data(), k_magic, sizeof k_magic);
  put(out, 8, k_kv_disk_version);
  put(out, 12, static_cast<uint32_t>(b.tokens.size()));
  put(out, 16, static_cast<uint64_t>(payload_bytes));
  const prefix_key keys[3] = {fingerprint, b.key, b.parent};
  for (size_t i = 0; i < 3; ++i) {
    put(out, 24 + 16 * i, keys[i].lo);
    put(out, 32 + 16 * i, keys[i].hi);
  }
  if (!b.tokens.empty()) std::memcpy(out.data() + k_kv_disk_header_bytes, b.tokens.data(), 4 * b.tokens.size());
  return out;
}

uint64_t kv_disk_checksum(std::span<const uint8_t> head, std::span<const uint8_t> payload) {
  return checksum64(payload, checksum64(head));
}

std::string kv_disk_check_head(std::span<const uint8_t> head, const prefix_key& fingerprint, const kv_disk_block& b,
                               size_t payload_bytes) {
  if (head.size() != k_kv_disk_header_bytes + 4 * b.tokens.size()) return "size";
  if (std::memcmp(head.data(), k_magic, sizeof k_magic) != 0) return "magic";
  if (get<uint32_t>(head, 8) != k_kv_disk_version) return "version";
  if (get<uint32_t>(head, 12) != b.tokens.size()) return "block size";
  if (get<uint64_t>(head, 16) != payload_bytes) return "payload size";
  const char* names[3] = {"fingerprint", "key", "parent"};
  const prefix_key keys[3] = {fingerprint, b.key, b.parent};
  for (size_t i = 0; i < 3; ++i) {
    if (get<uint64_t>(head, 24 + 16 * i) != keys[i].lo || get<uint64_t>(head, 32 + 16 * i) != keys[i].hi) return names[i];
  }
  if (!b.tokens.empty() && std::memcmp(head.data() + k_kv_disk_header_bytes, b.tokens.data(), 4 * b.tokens.size()) != 0)
    return "tokens";
  return "";
}

std::string kv_disk_hex(const prefix_key& k) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[static_cast<size_t>(15 - i)] = digits[(k.hi >> (4 * i)) & 15];
    s[static_cast<size_t>(31 - i)] = digits[(k.lo >> (4 * i)) & 15];
  }
  return s;
}

std::string kv_disk_file_name(const prefix_key& key) { return kv_disk_hex(key) + ".kvb"; }

bool kv_disk_parse_file_name(const std::string& name, prefix_key& key) {
  if (name.size() != 36 || name.compare(32, 4, ".kvb") != 0) return false;
  uint64_t parts[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    const char c = name[i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return false;
    }
    parts[i / 16] = parts[i / 16] << 4 | static_cast<uint64_t>(d);
  }
  key = {parts[1], parts[0]};
  return true;
}

}  // namespace spate
