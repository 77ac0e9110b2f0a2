// Opening files for reading that never blocks on what is not a regular file.
//
// open(2) of a FIFO for reading waits for a writer, forever; reading a
// character device such as /dev/zero never ends. Every file the server reads
// (models, adapters, the config and key files, chat templates, TLS
// certificates, KV cache blocks) is opened here: O_RDONLY | O_NONBLOCK |
// O_CLOEXEC (a FIFO opens at once), fstat on the descriptor (no race with a
// rename between a stat and the open), anything but a regular file is
// refused with its kind in the message, and O_NONBLOCK is cleared again.
//
// Thread-safety: free functions, no shared state. Blocking: open and fstat
// only; reading a regular file may wait for the disk.
#pragma once

#include <cstdint>
#include <string>

namespace spate {

// An open descriptor, closed by the destructor. Move-only.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(o.release()) {}
  unique_fd& operator=(unique_fd&& o) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd();

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release();  // gives up ownership; returns the descriptor

 private:
  int fd_ = -1;
};

// What open_regular_file found.
struct regular_file {
  unique_fd fd;        // open for reading (blocking mode); empty on failure
  uint64_t size = 0;   // st_size
  int64_t mtime_s = 0; // st_mtime (seconds since the epoch)
  unsigned mode = 0;   // st_mode once fstat succeeded (file_kind_name names a non-regular one)
  int error_errno = 0; // the open/fstat errno; 0 when it opened but is not a regular file (or on success)
  std::string error;   // "" on success, else e.g. "No such file or directory" or "is a FIFO, not a regular file"
};

// Opens path for reading; refuses anything but a regular file (after
// following symbolic links) without blocking. `error` does not name the path:
// callers prefix what the file is for.
regular_file open_regular_file(const std::string& path);

// The kind of a non-regular st_mode: "a directory", "a FIFO", "a character
// device", "a block device", "a socket", "a symbolic link", "not a regular file".
std::string file_kind_name(unsigned mode);

// Reads a whole regular file of at most max_bytes into out. Returns "" or the
// error (as open_regular_file's, or "is larger than N bytes", or the read's).
std::string read_regular_file(const std::string& path, std::string& out, uint64_t max_bytes);

}  // namespace spate
