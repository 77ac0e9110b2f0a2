#include "server/server_context.h"

#include <cstdio>
#include <random>

namespace spate {

std::string server_context::make_id(const char* prefix) {
  // A per-process random base keeps ids from colliding across restarts.
  static const uint64_t base = std::random_device{}() * 0x9E3779B97F4A7C15ull;
  const uint64_t n = next_id.fetch_add(1, std::memory_order_relaxed);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%016llx", prefix, static_cast<unsigned long long>(base ^ (n * 0xBF58476D1CE4E5B9ull)));
  return buf;
}

}  // namespace spate
