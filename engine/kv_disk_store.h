// The prefix cache's disk tier: KV blocks as files in one directory, an
// in-memory index of them, and one I/O thread that reads and writes them.
//
// The store lives in dir/<fingerprint as 32 hex digits>/, one file per block
// named after its 128-bit prefix_key (engine/kv_disk_format.h has the
// format). The fingerprint covers the model's weights and everything that
// decides the KV bytes, so stores of other models or formats sharing dir
// never see each other's files. At construction the subdirectory is created
// if needed and scanned into the index: files of the wrong size are deleted
// (counted as errors), temporary files older than a minute (left by a crash)
// are deleted, and the files are ordered least recently used first by
// modification time. Beyond max_bytes the least recently used files are
// deleted (evictions), at start-up and before each write.
//
// Writes (write-behind): write() queues a block (bounded by max_queue_bytes;
// beyond it the block is dropped and counted); the I/O thread writes it to a
// temporary file in the same directory and renames it into place, so a
// reader never sees a partial file under a block's name. No fsync: after a
// power loss a file may hold garbage, which its checksum catches.
// Reads: read() queues consecutive blocks; the I/O thread reads them in order
// and verifies each (size, header, key, parent, tokens, checksum), stopping
// at the first missing or bad one, and hands the verified payloads to the
// callback. A bad file (corrupt, truncated, foreign) is deleted, dropped from
// the index and counted in errors; the first one is logged as a warning,
// later ones at debug level. Reads go before queued writes.
//
// Failures never stop the server: a directory that cannot be created or
// listed leaves the store unusable (usable() false; one warning); a write
// failing for lack of space (ENOSPC, EDQUOT) or permission (EROFS, EACCES,
// EPERM) turns writes off for the store's life (one warning); reads go on.
//
// Thread-safety: every member may be called from any thread. The index and
// queues are guarded by one mutex held only briefly, never across file I/O,
// so callers (the engine thread) never wait on the disk. Callbacks run on the
// I/O thread and must not block. Units: bytes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/kv_disk_format.h"
#include "engine/prefix_key.h"

namespace spate {

struct kv_disk_stats {
  int64_t read_bytes = 0;      // bytes of files read and verified
  int64_t written_bytes = 0;   // bytes of files written
  int64_t n_evictions = 0;     // files deleted to stay within max_bytes
  int64_t n_errors = 0;        // bad files found, failed reads and writes
  int64_t n_dropped = 0;       // writes dropped (queue full, writes off)
  int64_t usage_bytes = 0;     // bytes of the indexed files
  int64_t n_files = 0;         // indexed files
};

class kv_disk_store {
 public:
  struct options {
    std::string dir;              // the base directory (created if missing)
    prefix_key fingerprint;       // the subdirectory's name and every file's header
    int32_t block_size = 0;       // tokens per block
    size_t payload_bytes = 0;     // KV bytes per block
    uint64_t max_bytes = 0;       // bound on the files' total size
    uint64_t max_queue_bytes = 0; // bound on the payloads waiting to be written
  };
  // The blocks' payloads, in order: the leading blocks of a read() that were
  // found and verified (empty when the first was not).
  using read_done = std::function<void(std::vector<std::vector<uint8_t>> payloads)>;

  // Creates and scans the subdirectory (blocking, caller's thread) and starts
  // the I/O thread.
  explicit kv_disk_store(options o);
  // Finishes the queued writes, drops the queued reads (their callbacks never
  // run) and joins the I/O thread. Blocking.
  ~kv_disk_store();
  kv_disk_store(const kv_disk_store&) = delete;
  kv_disk_store& operator=(const kv_disk_store&) = delete;

  // False when the directory could not be used: nothing is ever read or written.
  bool usable() const { return usable_; }
  // Whether write() can still take blocks (usable, and writing not turned off by a full or read-only disk).
  // Thread-safe. The engine skips copying blocks out when false.
  bool accepting_writes() const { return usable_ && !writes_off_; }
  // Counts n blocks not offered to write() because !accepting_writes() (in stats().n_dropped). Thread-safe.
  void count_dropped(int64_t n) { n_dropped_ += n; }
  // dir/<fingerprint>.
  const std::string& path() const { return path_; }
  size_t payload_bytes() const { return opts_.payload_bytes; }

  // How many of keys, from the first, have a file in the index; marks them
  // recently used.
  int32_t count_present(std::span<const prefix_key> keys);
  // True when key has a file or is queued to be written; marks it recently used.
  bool has(const prefix_key& key);
  // Queues block b with its payload (payload_bytes() bytes) to be written.
  // False when it is not queued: already there or queued, the queue is full
  // or writes are off (the last two count as dropped).
  bool write(kv_disk_block b, std::vector<uint8_t> payload);
  // Queues a read of consecutive blocks; done runs on the I/O thread.
  void read(std::vector<kv_disk_block> blocks, read_done done);

  kv_disk_stats stats() const;
  // Blocks until every queued read and write is done (tests, shutdown).
  void flush();

 private:
  struct write_job {
    kv_disk_block block;
    std::vector<uint8_t> payload;
  };
  struct read_job {
    std::vector<kv_disk_block> blocks;
    read_done done;
  };
  struct entry {
    std::list<prefix_key>::iterator lru_pos;
    uint64_t bytes = 0;
  };

  void scan();
  void io_main();
  void do_write(write_job& job);
  void do_read(read_job& job);
  // Reads and verifies one block file into payload; "" or why it is bad
  // ("missing" when there is no file, which is not an error).
  std::string read_one(const kv_disk_block& b, std::vector<uint8_t>& payload);
  // Deletes least recently used files until `incoming` more bytes fit.
  void evict_for(uint64_t incoming);
  // Forgets and deletes a bad file; counts and logs it.
  void reject(const prefix_key& key, const std::string& why);
  void index_add(const prefix_key& key, uint64_t bytes);  // under mu_
  void index_touch(const prefix_key& key);                // under mu_
  void index_erase(const prefix_key& key);                // under mu_
  void write_failed(int err, const std::string& what);
  std::string file_path(const prefix_key& key) const;
  uint64_t file_bytes() const;

  const options opts_;
  std::string path_;
  bool usable_ = false;

  mutable std::mutex mu_;  // guards everything below up to the thread
  std::condition_variable cv_, idle_cv_;
  std::list<prefix_key> lru_;  // least recently used first
  std::unordered_map<prefix_key, entry, prefix_key_hash> index_;
  std::unordered_set<prefix_key, prefix_key_hash> pending_;  // queued or being written
  std::deque<write_job> writes_;
  std::deque<read_job> reads_;
  uint64_t queued_bytes_ = 0;
  uint64_t usage_bytes_ = 0;
  bool busy_ = false;  // the I/O thread is running a job
  bool stop_ = false;
  std::thread thread_;

  std::atomic<bool> writes_off_{false};
  std::atomic<bool> warned_bad_file_{false}, warned_write_{false}, warned_writes_off_{false};
  std::atomic<int64_t> read_bytes_{0}, written_bytes_{0}, n_evictions_{0}, n_errors_{0}, n_dropped_{0};
  uint64_t tmp_counter_ = 0;  // I/O thread only
};

}  // namespace spate
