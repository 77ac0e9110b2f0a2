#include "util/regular_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace spate {

unique_fd& unique_fd::operator=(unique_fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

unique_fd::~unique_fd() {
  if (fd_ >= 0) ::close(fd_);
}

int unique_fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

std::string file_kind_name(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
  }
}

regular_file open_regular_file(const std::string& path) {
  regular_file r;
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    r.error_errno = errno;
    r.error = std::strerror(r.error_errno);
    return r;
  }
  unique_fd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    r.error_errno = errno;
    r.error = std::string("cannot stat: ") + std::strerror(r.error_errno);
    return r;
  }
  r.mode = static_cast<unsigned>(st.st_mode);
  if (!S_ISREG(st.st_mode)) {
    const std::string kind = file_kind_name(static_cast<unsigned>(st.st_mode));
    r.error = kind == "not a regular file" ? kind : "is " + kind + ", not a regular file";
    return r;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    r.error_errno = errno;
    r.error = std::string("cannot clear O_NONBLOCK: ") + std::strerror(r.error_errno);
    return r;
  }
  r.fd = std::move(owned);
  r.size = static_cast<uint64_t>(st.st_size);
  r.mtime_s = static_cast<int64_t>(st.st_mtime);
  return r;
}

std::string read_regular_file(const std::string& path, std::string& out, uint64_t max_bytes) {
  out.clear();
  regular_file f = open_regular_file(path);
  if (!f.fd) return f.error;
  if (f.size > max_bytes) return "is larger than " + std::to_string(max_bytes) + " bytes";
  out.resize(static_cast<size_t>(f.size));
  size_t done = 0;
  // Reads up to max_bytes + 1 so that a file grown since the fstat is refused too.
  for (;;) {
    if (done == out.size()) {
      if (out.size() > max_bytes) return "is larger than " + std::to_string(max_bytes) + " bytes";
      out.resize(out.size() + std::min<size_t>(4096, static_cast<size_t>(max_bytes - out.size()) + 1));
    }
    const ssize_t n = ::read(f.fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      out.clear();
      return std::string("read error: ") + std::strerror(e);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return "";
}

}  // namespace spate
