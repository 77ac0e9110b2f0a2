// The engine with the prefix cache's disk tier, over the fake executor: a
// prefix computed by one engine is reloaded from disk by the next one (a
// restart) instead of recomputed, with the same output; bad files only cost
// recomputation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <chrono>
#include <unistd.h>

#include "engine_loop_harness.h"

namespace spate::test_engine {
namespace {

namespace fs = std::filesystem;

struct temp_dir {
  temp_dir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("spate_engine_disk_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

engine_config disk_config(const fs::path& dir) {
  engine_config c = small_config();
  c.kv_disk.dir = dir.string();
  c.kv_disk.model_id = 42;
  return c;
}

// 20 tokens: 4 full blocks of 4 can be reused (never the block holding the last token).
std::vector<int32_t> prefix() { return words("thequickbrownfoxjump"); }

std::vector<int32_t> with_turn(std::vector<int32_t> p, const std::string& turn) {
  const std::vector<int32_t> t = words(turn);
  p.insert(p.end(), t.begin(), t.end());
  return p;
}

// Runs one greedy request to its end and returns its log.
request_log run_one(harness& h, const std::vector<int32_t>& prompt, int32_t max_tokens) {
  const int64_t id = h.submit_ok(prompt, max_tokens);
  h.eng->wait_idle();
  const request_log r = h.log.get(id);
  expect_well_formed(r);
  EXPECT_EQ(r.tokens, expected_tokens(prompt, max_tokens));
  return r;
}

std::vector<fs::path> block_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() == ".kvb") out.push_back(e.path());
  }
  return out;
}

TEST(EngineDisk, ARestartedEngineReloadsThePrefixInsteadOfRecomputingIt) {
  temp_dir dir;
  {
    harness h(disk_config(dir.path));
    h.start();
    run_one(h, prefix(), 3);  // positions 0..21 computed: 5 full blocks
    h.expect_drained();
  }  // the engine's destruction writes what is queued
  EXPECT_EQ(block_files(dir.path).size(), 5u);

  harness h(disk_config(dir.path));
  h.start();
  const std::vector<int32_t> prompt = with_turn(prefix(), "overthelazydog");
  const request_log r = run_one(h, prompt, 4);
  EXPECT_EQ(r.usage.cached_prompt_tokens, 20);  // the prefix's 5 blocks, from disk
  EXPECT_EQ(h.exec.n_blocks_copied_in(), 5);
  const engine_stats st = h.eng->stats();
  EXPECT_EQ(st.kv_disk_hits, 5);
  EXPECT_EQ(st.kv_disk_misses, 3);  // 33 tokens: 8 reusable blocks, 5 from disk
  EXPECT_EQ(st.kv_disk_errors, 0);
  EXPECT_GT(st.kv_disk_read_bytes, 0);
  EXPECT_EQ(st.prefix_cache_hits, 20);
  h.expect_drained();

  // A second request with the same prefix now hits memory: nothing more is read.
  const request_log r2 = run_one(h, with_turn(prefix(), "andran"), 2);
  EXPECT_EQ(r2.usage.cached_prompt_tokens, 20);
  EXPECT_EQ(h.eng->stats().kv_disk_hits, 5);
}

TEST(EngineDisk, ALongRunIsReadInBatches) {
  temp_dir dir;
  {
    harness h(disk_config(dir.path));
    h.start();
    run_one(h, prefix(), 3);
  }
  engine_config c = disk_config(dir.path);
  c.kv_disk.max_queue_bytes = 2 * 4 * sizeof(int32_t);  // two of the fake's blocks per read
  harness h(c);
  h.start();
  const request_log r = run_one(h, with_turn(prefix(), "overthelazydog"), 4);
  EXPECT_EQ(r.usage.cached_prompt_tokens, 20);  // three batches: 2 + 2 + 1 blocks
  EXPECT_EQ(h.eng->stats().kv_disk_hits, 5);
  EXPECT_EQ(h.eng->stats().kv_disk_misses, 3);
  h.expect_drained();
}

TEST(EngineDisk, CancellingARequestWhileItsBlocksAreReadLeavesNothingBehind) {
  temp_dir dir;
  {
    harness h(disk_config(dir.path));
    h.start();
    run_one(h, prefix(), 3);
  }
  for (int round = 0; round < 20; ++round) {  // the cancel lands before, during or after the read
    harness h(disk_config(dir.path));
    h.start();
    const int64_t id = h.submit_ok(with_turn(prefix(), "over"), 4);
    h.eng->cancel(id);
    h.eng->wait_idle();
    const request_log r = h.log.get(id);
    expect_well_formed(r);
    // Then a request reading the same blocks runs normally.
    run_one(h, with_turn(prefix(), "over"), 2);
    h.expect_drained();
  }
}

TEST(EngineDisk, BadFilesAreRecomputedAndCounted) {
  temp_dir dir;
  {
    harness h(disk_config(dir.path));
    h.start();
    run_one(h, prefix(), 1);  // 20 positions: 5 blocks
  }
  // Corrupt every file: one flipped byte in one, the others truncated.
  auto files = block_files(dir.path);
  ASSERT_EQ(files.size(), 5u);
  for (size_t i = 0; i < files.size(); ++i) {
    if (i == 0) {
      std::fstream f(files[i], std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(100);
      const char c = 0x11;
      f.write(&c, 1);
    } else {
      fs::resize_file(files[i], fs::file_size(files[i]) / 2);
    }
  }
  harness h(disk_config(dir.path));
  h.start();
  const std::vector<int32_t> prompt = with_turn(prefix(), "over");
  const request_log r = run_one(h, prompt, 3);  // the output is checked in run_one
  EXPECT_LE(r.usage.cached_prompt_tokens, 20);
  const engine_stats st = h.eng->stats();
  EXPECT_GE(st.kv_disk_errors, 4);  // the truncated ones at start-up; the flipped one if it was read
  EXPECT_LE(st.kv_disk_hits, 4);
  h.expect_drained();
}

TEST(EngineDisk, AnotherModelNeverReadsTheBlocks) {
  temp_dir dir;
  {
    harness h(disk_config(dir.path));
    h.start();
    run_one(h, prefix(), 1);
  }
  engine_config other = disk_config(dir.path);
  other.kv_disk.model_id = 43;
  harness h(other);
  h.start();
  const request_log r = run_one(h, with_turn(prefix(), "over"), 2);
  EXPECT_EQ(r.usage.cached_prompt_tokens, 0);
  EXPECT_EQ(h.exec.n_blocks_copied_in(), 0);
  EXPECT_EQ(h.eng->stats().kv_disk_hits, 0);
}

TEST(EngineDisk, OffWithoutPrefixCachingAndForSaltedRequests) {
  temp_dir dir;
  {
    engine_config c = disk_config(dir.path);
    c.enable_prefix_caching = false;
    harness h(c);
    h.start();
    run_one(h, prefix(), 1);
  }
  EXPECT_TRUE(!fs::exists(dir.path) || block_files(dir.path).empty());
  {
    harness h(disk_config(dir.path));
    h.start();
    engine_request req;
    req.prompt = prefix();
    req.params.temperature = 0.0f;
    req.params.max_tokens = 1;
    req.cache_salt = 7;  // a LoRA adapter's blocks
    req.on_event = h.log.callback();
    ASSERT_TRUE(h.eng->submit(std::move(req)).ok());
    h.eng->wait_idle();
  }
  EXPECT_TRUE(block_files(dir.path).empty());
}

TEST(EngineDisk, AFullDiskBoundKeepsServingCorrectly) {
  temp_dir dir;
  engine_config c = disk_config(dir.path);
  c.kv_disk.max_bytes = 2 * (72 + 4 * 4 + 4 * 4 + 8);  // two block files of the fake's 4-token blocks
  {
    harness h(c);
    h.start();
    run_one(h, prefix(), 3);
    run_one(h, words("abcdefghijklmnopqrstu"), 2);
    // Writes run behind the engine: wait for the evictions of the second request's blocks.
    engine_stats st = h.eng->stats();
    for (int i = 0; i < 2000 && st.kv_disk_evictions == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      st = h.eng->stats();
    }
    EXPECT_LE(st.kv_disk_usage_bytes, static_cast<int64_t>(c.kv_disk.max_bytes));
    EXPECT_GT(st.kv_disk_evictions, 0);
  }
  EXPECT_LE(block_files(dir.path).size(), 2u);
  harness h(c);
  h.start();
  run_one(h, with_turn(prefix(), "over"), 2);  // the prefix's first blocks were evicted: recomputed
  h.expect_drained();
}

}  // namespace
}  // namespace spate::test_engine
