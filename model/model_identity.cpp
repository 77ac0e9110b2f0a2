#include "model/model_identity.h"

#include <algorithm>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "util/regular_file.h"

namespace spate {
namespace {

constexpr uint64_t k_edge_bytes = 1ull << 20;
constexpr uint64_t k_sample_bytes = 64ull << 10;
constexpr int k_n_samples = 8;

uint64_t fold(uint64_t h, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Folds bytes [offset, offset + n) of fd into h; false on a read error.
bool fold_range(int fd, uint64_t offset, uint64_t n, std::vector<uint8_t>& buf, uint64_t& h) {
  buf.resize(static_cast<size_t>(n));
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, buf.data() + done, n - done, static_cast<off_t>(offset + done));
    if (r <= 0) return false;
    done += static_cast<size_t>(r);
  }
  h = fold(h, buf.data(), done);
  return true;
}

}  // namespace

uint64_t model_file_identity(const std::string& path) {
  regular_file rf = open_regular_file(path);  // a FIFO or device: no identity, never a block
  if (!rf.fd) return 0;
  const int fd = rf.fd.get();
  uint64_t h = 1469598103934665603ull;
  bool ok = true;
  const uint64_t size = rf.size;
  h = fold(h, reinterpret_cast<const uint8_t*>(&size), sizeof size);
  std::vector<uint8_t> buf;
  if (ok) ok = fold_range(fd, 0, std::min(size, k_edge_bytes), buf, h);
  if (ok && size > 2 * k_edge_bytes + k_sample_bytes) {
    const uint64_t span = size - 2 * k_edge_bytes - k_sample_bytes;
    for (int i = 0; ok && i < k_n_samples; ++i) {
      ok = fold_range(fd, k_edge_bytes + span * static_cast<uint64_t>(i) / (k_n_samples - 1), k_sample_bytes, buf, h);
    }
  }
  if (ok && size > k_edge_bytes) {
    const uint64_t start = std::max(k_edge_bytes, size - k_edge_bytes);
    ok = fold_range(fd, start, size - start, buf, h);
  }
  return ok ? (h == 0 ? 1 : h) : 0;
}

}  // namespace spate
