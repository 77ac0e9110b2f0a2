#include "engine/prefix_key.h"

namespace spate {
namespace {

constexpr uint64_t k_root_lo = 0x5eed0fb10c4ca4e5ull;
constexpr uint64_t k_root_hi = 0x243f6a8885a308d3ull;  // pi's fraction bits: any constant unlike k_root_lo

// The lo chain's step (boost-style combine, then a splitmix finalizer round).
uint64_t mix_lo(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 31);
}

// The hi chain's step: a different construction and constants (murmur3's
// finalizer over a multiply-rotate absorb), so a collision of one chain says
// nothing about the other.
uint64_t mix_hi(uint64_t h, uint64_t v) {
  h ^= v * 0x87c37b91114253d5ull;
  h = (h << 27 | h >> 37) * 0x4cf5ad432745937full + 0x52dce729ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

}  // namespace

prefix_key root_prefix_key(uint64_t salt) {
  if (salt == 0) return {k_root_lo, k_root_hi};
  return {mix_lo(k_root_lo, salt), mix_hi(k_root_hi, salt)};
}

prefix_key next_prefix_key(const prefix_key& parent, std::span<const int32_t> tokens) {
  const auto n = static_cast<uint64_t>(tokens.size());
  uint64_t lo = mix_lo(parent.lo, n);
  uint64_t hi = mix_hi(parent.hi, n);
  for (int32_t t : tokens) {
    lo = mix_lo(lo, static_cast<uint32_t>(t));
    hi = mix_hi(hi, static_cast<uint32_t>(t));
  }
  return {lo, hi};
}

}  // namespace spate
