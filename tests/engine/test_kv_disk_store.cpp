// The prefix cache's disk tier without an engine: the file format's pieces
// and kv_disk_store (write, read and verify, bad files, foreign stores, the
// LRU bound, unusable directories).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <unistd.h>
#include <vector>

#include "engine/kv_disk_format.h"
#include "engine/kv_disk_store.h"

namespace spate {
namespace {

namespace fs = std::filesystem;

constexpr int32_t k_block_size = 4;
constexpr size_t k_payload = 256;

// A fresh directory under the system's temporary directory, removed at the end.
struct temp_dir {
  temp_dir() {
    path = fs::temp_directory_path() / ("spate_kv_disk_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    for (auto& e : fs::recursive_directory_iterator(path, ec)) fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
  fs::path path;
};

kv_disk_store::options opts(const fs::path& dir, prefix_key fp = {1, 2}, uint64_t max_bytes = 1ull << 30) {
  kv_disk_store::options o;
  o.dir = dir.string();
  o.fingerprint = fp;
  o.block_size = k_block_size;
  o.payload_bytes = k_payload;
  o.max_bytes = max_bytes;
  o.max_queue_bytes = 1ull << 20;
  return o;
}

// Block i of a chain: keys derived from i, tokens {i, i+1, i+2, i+3}.
kv_disk_block block(int32_t i) {
  kv_disk_block b;
  b.parent = {static_cast<uint64_t>(i) * 7 + 1, static_cast<uint64_t>(i) * 11 + 3};
  b.key = {static_cast<uint64_t>(i + 1) * 7 + 1, static_cast<uint64_t>(i + 1) * 11 + 3};
  for (int32_t t = 0; t < k_block_size; ++t) b.tokens.push_back(i + t);
  return b;
}

std::vector<uint8_t> payload(int32_t i) {
  std::vector<uint8_t> p(k_payload);
  for (size_t j = 0; j < p.size(); ++j) p[j] = static_cast<uint8_t>(i * 31 + static_cast<int32_t>(j));
  return p;
}

// Reads blocks synchronously: the payloads the store verified.
std::vector<std::vector<uint8_t>> read_sync(kv_disk_store& s, std::vector<kv_disk_block> blocks) {
  std::promise<std::vector<std::vector<uint8_t>>> done;
  auto f = done.get_future();
  s.read(std::move(blocks), [&](std::vector<std::vector<uint8_t>> p) { done.set_value(std::move(p)); });
  return f.get();
}

void write_blocks(kv_disk_store& s, int32_t first, int32_t n) {
  for (int32_t i = first; i < first + n; ++i) EXPECT_TRUE(s.write(block(i), payload(i)));
  s.flush();
}

fs::path file_of(const kv_disk_store& s, int32_t i) { return fs::path(s.path()) / kv_disk_file_name(block(i).key); }

uint64_t file_bytes() { return kv_disk_file_bytes(k_block_size, k_payload); }

TEST(KvDiskFormat, ChecksumIsXxh64) {
  const std::string abc = "abc";
  EXPECT_EQ(checksum64({}), 0xef46db3751d8e999ull);
  EXPECT_EQ(checksum64({reinterpret_cast<const uint8_t*>("a"), 1}), 0xd24ec4f1a98c6e5bull);
  EXPECT_EQ(checksum64({reinterpret_cast<const uint8_t*>(abc.data()), 3}), 0x44bc2cf5ad770999ull);
  std::vector<uint8_t> seq(100), big(768);
  for (size_t i = 0; i < seq.size(); ++i) seq[i] = static_cast<uint8_t>(i);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i % 256);
  EXPECT_EQ(checksum64(seq), 0x6ac1e58032166597ull);
  EXPECT_EQ(checksum64(big), 0x8e03c838c596036full);
  EXPECT_EQ(checksum64(big, 12345), 0x6ecac135863f12b2ull);
}

TEST(KvDiskFormat, FileNamesRoundTripAndHeadsCheckEveryField) {
  const prefix_key k{0x0123456789abcdefull, 0xfedcba9876543210ull};
  EXPECT_EQ(kv_disk_file_name(k), "fedcba98765432100123456789abcdef.kvb");
  prefix_key back;
  ASSERT_TRUE(kv_disk_parse_file_name(kv_disk_file_name(k), back));
  EXPECT_EQ(back, k);
  EXPECT_FALSE(kv_disk_parse_file_name("fedcba98765432100123456789abcdeg.kvb", back));
  EXPECT_FALSE(kv_disk_parse_file_name("x.kvb", back));

  const prefix_key fp{5, 6};
  const kv_disk_block b = block(3);
  const std::vector<uint8_t> head = kv_disk_encode_head(fp, b, k_payload);
  EXPECT_EQ(head.size() + k_payload + 8, file_bytes());
  EXPECT_EQ(kv_disk_check_head(head, fp, b, k_payload), "");
  EXPECT_EQ(kv_disk_check_head(head, {5, 7}, b, k_payload), "fingerprint");
  EXPECT_EQ(kv_disk_check_head(head, fp, b, k_payload + 2), "payload size");
  kv_disk_block other = b;
  other.tokens[2] += 1;
  EXPECT_EQ(kv_disk_check_head(head, fp, other, k_payload), "tokens");
  other = b;
  other.parent.hi ^= 1;
  EXPECT_EQ(kv_disk_check_head(head, fp, other, k_payload), "parent");
  other = b;
  other.key.lo ^= 1;
  EXPECT_EQ(kv_disk_check_head(head, fp, other, k_payload), "key");
  std::vector<uint8_t> bad = head;
  bad[0] = 'X';
  EXPECT_EQ(kv_disk_check_head(bad, fp, b, k_payload), "magic");
}

TEST(KvDiskStore, WritesReadsAndFindsBlocksAfterReopening) {
  temp_dir dir;
  {
    kv_disk_store s(opts(dir.path));
    ASSERT_TRUE(s.usable());
    write_blocks(s, 0, 3);
    EXPECT_FALSE(s.write(block(1), payload(1)));  // already there
    const kv_disk_stats st = s.stats();
    EXPECT_EQ(st.n_files, 3);
    EXPECT_EQ(st.written_bytes, static_cast<int64_t>(3 * file_bytes()));
    EXPECT_EQ(st.usage_bytes, static_cast<int64_t>(3 * file_bytes()));
    EXPECT_EQ(st.n_errors, 0);
  }
  kv_disk_store s(opts(dir.path));
  const std::vector<prefix_key> keys = {block(0).key, block(1).key, block(2).key, block(3).key};
  EXPECT_EQ(s.count_present(keys), 3);
  const auto got = read_sync(s, {block(0), block(1), block(2), block(3)});  // the 4th is missing: stops there
  ASSERT_EQ(got.size(), 3u);
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], payload(i));
  EXPECT_EQ(s.stats().read_bytes, static_cast<int64_t>(3 * file_bytes()));
  EXPECT_EQ(s.stats().n_errors, 0);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(s.path())) EXPECT_EQ(e.path().extension(), ".kvb") << e.path();
}

TEST(KvDiskStore, ACorruptByteIsRejectedDeletedAndCounted) {
  temp_dir dir;
  kv_disk_store s(opts(dir.path));
  write_blocks(s, 0, 3);
  {
    std::fstream f(file_of(s, 1), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(file_bytes() / 2));
    const char c = 0x5a;
    f.write(&c, 1);  // a payload byte
  }
  const auto got = read_sync(s, {block(0), block(1), block(2)});
  ASSERT_EQ(got.size(), 1u);  // block 1 fails its checksum: the run stops before it
  EXPECT_EQ(got[0], payload(0));
  EXPECT_EQ(s.stats().n_errors, 1);
  EXPECT_FALSE(fs::exists(file_of(s, 1)));
  EXPECT_EQ(s.stats().n_files, 2);
  // A header byte (the tokens) is caught too.
  {
    std::fstream f(file_of(s, 0), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(k_kv_disk_header_bytes));
    const char c = 0x7f;
    f.write(&c, 1);
  }
  EXPECT_TRUE(read_sync(s, {block(0)}).empty());
  EXPECT_EQ(s.stats().n_errors, 2);
}

TEST(KvDiskStore, TruncatedFilesAreRejectedAtReadAndAtStartUp) {
  temp_dir dir;
  {
    kv_disk_store s(opts(dir.path));
    write_blocks(s, 0, 3);
    fs::resize_file(file_of(s, 0), file_bytes() - 1);
    EXPECT_TRUE(read_sync(s, {block(0)}).empty());
    EXPECT_EQ(s.stats().n_errors, 1);
    fs::resize_file(file_of(s, 2), 10);
  }
  kv_disk_store s(opts(dir.path));
  EXPECT_EQ(s.stats().n_errors, 1);  // block 2's file, found by the scan
  EXPECT_EQ(s.stats().n_files, 1);
  EXPECT_FALSE(fs::exists(file_of(s, 2)));
  const std::vector<prefix_key> keys = {block(1).key};
  EXPECT_EQ(s.count_present(keys), 1);
}

TEST(KvDiskStore, AnotherFingerprintNeverSeesTheBlocks) {
  temp_dir dir;
  kv_disk_store a(opts(dir.path, {1, 2}));
  write_blocks(a, 0, 2);
  kv_disk_store b(opts(dir.path, {1, 3}));
  EXPECT_NE(a.path(), b.path());
  const std::vector<prefix_key> keys = {block(0).key};
  EXPECT_EQ(b.count_present(keys), 0);
  EXPECT_TRUE(read_sync(b, {block(0)}).empty());
  // Even a file copied into its directory is refused: its header names a's fingerprint.
  fs::copy_file(file_of(a, 0), file_of(b, 0));
  kv_disk_store b2(opts(dir.path, {1, 3}));
  EXPECT_EQ(b2.count_present(keys), 1);
  EXPECT_TRUE(read_sync(b2, {block(0)}).empty());
  EXPECT_EQ(b2.stats().n_errors, 1);
  // And a read asking for other tokens under the same key is refused.
  kv_disk_block other = block(1);
  other.tokens[0] = 99;
  EXPECT_TRUE(read_sync(a, {other}).empty());
  EXPECT_EQ(a.stats().n_errors, 1);
}

TEST(KvDiskStore, StaysWithinItsBoundEvictingTheLeastRecentlyUsed) {
  temp_dir dir;
  kv_disk_store s(opts(dir.path, {1, 2}, 3 * file_bytes()));
  write_blocks(s, 0, 3);
  const std::vector<prefix_key> first = {block(0).key};
  EXPECT_EQ(s.count_present(first), 1);  // block 0 becomes the most recently used
  write_blocks(s, 3, 2);                  // evicts blocks 1 and 2
  const kv_disk_stats st = s.stats();
  EXPECT_EQ(st.n_files, 3);
  EXPECT_EQ(st.n_evictions, 2);
  EXPECT_LE(st.usage_bytes, static_cast<int64_t>(3 * file_bytes()));
  EXPECT_TRUE(fs::exists(file_of(s, 0)));
  EXPECT_FALSE(fs::exists(file_of(s, 1)));
  EXPECT_FALSE(fs::exists(file_of(s, 2)));
  EXPECT_TRUE(fs::exists(file_of(s, 4)));
  // A smaller bound at start-up evicts the oldest files by modification time.
  kv_disk_store small(opts(dir.path, {1, 2}, 1 * file_bytes()));
  EXPECT_EQ(small.stats().n_files, 1);
}

TEST(KvDiskStore, AFullQueueDropsWrites) {
  temp_dir dir;
  kv_disk_store::options o = opts(dir.path);
  o.max_queue_bytes = k_payload - 1;
  kv_disk_store s(o);
  EXPECT_FALSE(s.write(block(0), payload(0)));
  EXPECT_EQ(s.stats().n_dropped, 1);
}

TEST(KvDiskStore, AnUnusableDirectoryLeavesTheStoreOff) {
  temp_dir dir;
  std::ofstream(dir.path / "file") << "x";
  kv_disk_store s(opts(dir.path / "file" / "cache"));  // the parent is a regular file
  EXPECT_FALSE(s.usable());
  EXPECT_FALSE(s.write(block(0), payload(0)));
  EXPECT_TRUE(read_sync(s, {block(0)}).empty());
}

// Makes dir refuse new files: its mode for a user, the immutable attribute
// for root (whom modes do not stop). False when neither works here.
bool make_read_only(const fs::path& dir) {
  if (::geteuid() != 0) {
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
    return true;
  }
  return std::system(("chattr +i '" + dir.string() + "' 2>/dev/null").c_str()) == 0;
}

void undo_read_only(const fs::path& dir) {
  if (::geteuid() == 0) (void)std::system(("chattr -i '" + dir.string() + "' 2>/dev/null").c_str());
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add);
}

TEST(KvDiskStore, AReadOnlyDirectoryTurnsWritesOffAndReadsGoOn) {
  temp_dir dir;
  fs::path sub;
  {
    kv_disk_store s(opts(dir.path));
    write_blocks(s, 0, 1);
    sub = s.path();
  }
  if (!make_read_only(sub)) GTEST_SKIP() << "neither modes (root) nor chattr +i make a directory read-only here";
  struct undo {
    fs::path p;
    ~undo() { undo_read_only(p); }  // also when an assertion returns early: temp_dir can then remove it
  } restore{sub};
  {
    kv_disk_store s(opts(dir.path));
    ASSERT_TRUE(s.usable());
    EXPECT_TRUE(s.write(block(1), payload(1)));
    s.flush();
    EXPECT_EQ(s.stats().n_errors, 1);
    EXPECT_FALSE(s.write(block(2), payload(2)));  // writes are off now
    EXPECT_EQ(s.stats().n_errors, 1);
    EXPECT_EQ(s.stats().n_dropped, 1);
    EXPECT_EQ(read_sync(s, {block(0)}).size(), 1u);
  }
}

}  // namespace
}  // namespace spate
