#include "engine/kv_disk_store.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/regular_file.h"
#include "util/trace.h"

namespace spate {
namespace {

namespace fs = std::filesystem;

// Temporary files older than this are a crashed writer's leftovers.
constexpr auto k_stale_tmp_age = std::chrono::seconds(60);

// Writes all of bytes at fd's offset; false with errno set on failure.
bool write_all(int fd, std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t r = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(r);
  }
  return true;
}

// Reads exactly bytes.size() bytes at offset; false on error or a short file.
bool read_all(int fd, std::span<uint8_t> bytes, uint64_t offset) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t r = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

// Failures that no later write will get past.
bool turns_writes_off(int err) { return err == ENOSPC || err == EDQUOT || err == EROFS || err == EACCES || err == EPERM; }

}  // namespace

kv_disk_store::kv_disk_store(options o) : opts_(std::move(o)) {
  path_ = (fs::path(opts_.dir) / kv_disk_hex(opts_.fingerprint)).string();
  std::error_code ec;
  fs::create_directories(path_, ec);
  if (ec || !fs::is_directory(path_, ec)) {
    spdlog::warn("KV disk cache: cannot use {} ({}); serving with the in-memory prefix cache only", path_,
                 ec ? ec.message() : "not a directory");
    return;
  }
  usable_ = true;
  scan();
  thread_ = std::thread([this] { io_main(); });
}

kv_disk_store::~kv_disk_store() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    reads_.clear();
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

std::string kv_disk_store::file_path(const prefix_key& key) const { return path_ + "/" + kv_disk_file_name(key); }

uint64_t kv_disk_store::file_bytes() const {
  return kv_disk_file_bytes(static_cast<size_t>(opts_.block_size), opts_.payload_bytes);
}

// Indexes the block files, oldest modification first; deletes wrong-sized
// files and stale temporary files.
void kv_disk_store::scan() {
  struct found {
    prefix_key key;
    fs::file_time_type mtime;
  };
  std::vector<found> files;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  int64_t n_bad = 0;
  for (fs::directory_iterator it(path_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code fec;
    const auto mtime = fs::last_write_time(it->path(), fec);
    prefix_key key;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) {
      if (!fec && now - mtime > k_stale_tmp_age) fs::remove(it->path(), fec);
    } else if (kv_disk_parse_file_name(name, key)) {
      const auto size = fs::file_size(it->path(), fec);
      if (fec || size != file_bytes()) {
        ++n_bad;
        fs::remove(it->path(), fec);
      } else {
        files.push_back({key, mtime});
      }
    }
  }
  if (ec) spdlog::warn("KV disk cache: listing {} failed ({}); starting with what was listed", path_, ec.message());
  std::sort(files.begin(), files.end(), [](const found& a, const found& b) { return a.mtime < b.mtime; });
  {
    std::lock_guard lk(mu_);
    for (const found& f : files) index_add(f.key, file_bytes());
  }
  if (n_bad > 0) {
    n_errors_ += n_bad;
    warned_bad_file_ = true;
    spdlog::warn("KV disk cache: deleted {} block files of the wrong size in {} (truncated or foreign)", n_bad, path_);
  }
  evict_for(0);
  spdlog::info("KV disk cache: {}, {} blocks ({} bytes) found, bound {} bytes", path_, files.size(),
               files.size() * file_bytes(), opts_.max_bytes);
}

void kv_disk_store::index_add(const prefix_key& key, uint64_t bytes) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru_pos);
    return;
  }
  index_.emplace(key, entry{lru_.insert(lru_.end(), key), bytes});
  usage_bytes_ += bytes;
}

void kv_disk_store::index_erase(const prefix_key& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  usage_bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru_pos);
  index_.erase(it);
}

void kv_disk_store::index_touch(const prefix_key& key) {
  auto it = index_.find(key);
  if (it != index_.end()) lru_.splice(lru_.end(), lru_, it->second.lru_pos);
}

int32_t kv_disk_store::count_present(std::span<const prefix_key> keys) {
  std::lock_guard lk(mu_);
  int32_t n = 0;
  for (const prefix_key& k : keys) {
    auto it = index_.find(k);
    if (it == index_.end()) break;
    lru_.splice(lru_.end(), lru_, it->second.lru_pos);
    ++n;
  }
  return n;
}

bool kv_disk_store::has(const prefix_key& key) {
  std::lock_guard lk(mu_);
  index_touch(key);
  return index_.count(key) > 0 || pending_.count(key) > 0;
}

bool kv_disk_store::write(kv_disk_block b, std::vector<uint8_t> payload) {
  if (!usable_ || payload.size() != opts_.payload_bytes) return false;
  std::lock_guard lk(mu_);
  if (index_.count(b.key) > 0 || pending_.count(b.key) > 0) return false;
  if (writes_off_ || queued_bytes_ + payload.size() > opts_.max_queue_bytes) {
    ++n_dropped_;
    return false;
  }
  pending_.insert(b.key);
  queued_bytes_ += payload.size();
  writes_.push_back(write_job{std::move(b), std::move(payload)});
  cv_.notify_all();
  return true;
}

void kv_disk_store::read(std::vector<kv_disk_block> blocks, read_done done) {
  if (!usable_) {
    done({});
    return;
  }
  std::lock_guard lk(mu_);
  reads_.push_back(read_job{std::move(blocks), std::move(done)});
  cv_.notify_all();
}

kv_disk_stats kv_disk_store::stats() const {
  kv_disk_stats s;
  s.read_bytes = read_bytes_;
  s.written_bytes = written_bytes_;
  s.n_evictions = n_evictions_;
  s.n_errors = n_errors_;
  s.n_dropped = n_dropped_;
  std::lock_guard lk(mu_);
  s.usage_bytes = static_cast<int64_t>(usage_bytes_);
  s.n_files = static_cast<int64_t>(index_.size());
  return s;
}

void kv_disk_store::flush() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [&] { return (reads_.empty() && writes_.empty() && !busy_) || !thread_.joinable(); });
}

void kv_disk_store::io_main() {
  trace::set_thread_name("kv_disk");
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !reads_.empty() || !writes_.empty(); });
    if (!reads_.empty()) {
      read_job job = std::move(reads_.front());
      reads_.pop_front();
      busy_ = true;
      lk.unlock();
      do_read(job);
      lk.lock();
    } else if (!writes_.empty()) {
      write_job job = std::move(writes_.front());
      writes_.pop_front();
      queued_bytes_ -= job.payload.size();
      busy_ = true;
      lk.unlock();
      do_write(job);
      lk.lock();
      pending_.erase(job.block.key);
    } else if (stop_) {
      break;
    }
    busy_ = false;
    idle_cv_.notify_all();
  }
  idle_cv_.notify_all();
}

void kv_disk_store::evict_for(uint64_t incoming) {
  std::vector<prefix_key> victims;
  {
    std::lock_guard lk(mu_);
    while (!lru_.empty() && usage_bytes_ + incoming > opts_.max_bytes) {
      const prefix_key k = lru_.front();
      lru_.pop_front();
      auto it = index_.find(k);
      usage_bytes_ -= it->second.bytes;
      index_.erase(it);
      victims.push_back(k);
    }
  }
  for (const prefix_key& k : victims) {
    if (::unlink(file_path(k).c_str()) != 0 && errno != ENOENT) ++n_errors_;
    ++n_evictions_;
  }
}

void kv_disk_store::write_failed(int err, const std::string& what) {
  ++n_errors_;
  if (turns_writes_off(err)) {
    writes_off_ = true;
    if (!warned_writes_off_.exchange(true)) {  // its own flag: an earlier skipped block must not hide this one
      spdlog::warn("KV disk cache: {} in {} failed ({}); no more blocks are written (reads go on), the server keeps serving",
                   what, path_, std::strerror(err));
    }
  } else if (!warned_write_.exchange(true)) {
    spdlog::warn("KV disk cache: {} in {} failed ({}); the block is skipped (further failures are counted in "
                 "spate:kv_disk_errors_total)", what, path_, std::strerror(err));
  } else {
    spdlog::debug("KV disk cache: {} in {} failed ({})", what, path_, std::strerror(err));
  }
}

void kv_disk_store::do_write(write_job& job) {
  const uint64_t bytes = file_bytes();
  if (writes_off_ || bytes > opts_.max_bytes) {
    ++n_dropped_;
    return;
  }
  {
    std::lock_guard lk(mu_);
    if (index_.count(job.block.key) > 0) return;
  }
  evict_for(bytes);
  const std::vector<uint8_t> head = kv_disk_encode_head(opts_.fingerprint, job.block, job.payload.size());
  const uint64_t sum = kv_disk_checksum(head, job.payload);
  const std::string final_path = file_path(job.block.key);
  const std::string tmp = path_ + "/." + kv_disk_file_name(job.block.key) + "." + std::to_string(::getpid()) + "." +
                          std::to_string(tmp_counter_++) + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    write_failed(errno, "creating a block file");
    return;
  }
  const auto* sum_bytes = reinterpret_cast<const uint8_t*>(&sum);
  bool ok = write_all(fd, head) && write_all(fd, job.payload) && write_all(fd, {sum_bytes, sizeof sum});
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), final_path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    write_failed(err, "writing a block file");
    return;
  }
  written_bytes_ += static_cast<int64_t>(bytes);
  std::lock_guard lk(mu_);
  index_add(job.block.key, bytes);
}

void kv_disk_store::reject(const prefix_key& key, const std::string& why) {
  ++n_errors_;
  const std::string p = file_path(key);
  if (!warned_bad_file_.exchange(true)) {
    spdlog::warn("KV disk cache: {} is bad ({}); deleted, the block is recomputed (further bad files are counted in "
                 "spate:kv_disk_errors_total)", p, why);
  } else {
    spdlog::debug("KV disk cache: {} is bad ({}); deleted", p, why);
  }
  ::unlink(p.c_str());
  std::lock_guard lk(mu_);
  index_erase(key);
}

std::string kv_disk_store::read_one(const kv_disk_block& b, std::vector<uint8_t>& payload) {
  // A FIFO or device put in a block file's place is refused without blocking (and deleted by reject).
  regular_file rf = open_regular_file(file_path(b.key));
  if (!rf.fd) return rf.error_errno == ENOENT ? "missing" : "open: " + rf.error;
  const int fd = rf.fd.get();
  std::string why;
  std::vector<uint8_t> head(k_kv_disk_header_bytes + 4 * b.tokens.size());
  uint64_t sum = 0;
  if (rf.size != file_bytes()) {
    why = "size " + std::to_string(rf.size) + ", expected " + std::to_string(file_bytes());
  } else if (!read_all(fd, head, 0)) {
    why = "short read";
  } else if (why = kv_disk_check_head(head, opts_.fingerprint, b, opts_.payload_bytes); why.empty()) {
    payload.resize(opts_.payload_bytes);
    if (!read_all(fd, payload, head.size()) ||
        !read_all(fd, {reinterpret_cast<uint8_t*>(&sum), sizeof sum}, head.size() + payload.size())) {
      why = "short read";
    } else if (sum != kv_disk_checksum(head, payload)) {
      why = "checksum";
    } else if (!writes_off_) {
      ::futimens(fd, nullptr);  // recency survives a restart (the scan orders by modification time)
    }
  } else {
    why = "header: " + why;
  }
  return why;
}

void kv_disk_store::do_read(read_job& job) {
  std::vector<std::vector<uint8_t>> payloads;
  for (const kv_disk_block& b : job.blocks) {
    std::vector<uint8_t> payload;
    const std::string why = read_one(b, payload);
    if (why == "missing") {  // deleted behind our back (another server sharing the directory)
      std::lock_guard lk(mu_);
      index_erase(b.key);
      break;
    }
    if (!why.empty()) {
      reject(b.key, why);
      break;
    }
    read_bytes_ += static_cast<int64_t>(file_bytes());
    {
      std::lock_guard lk(mu_);
      index_touch(b.key);
    }
    payloads.push_back(std::move(payload));
  }
  job.done(std::move(payloads));
}

}  // namespace spate
