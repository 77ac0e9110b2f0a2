#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "model/thread_pool.h"

namespace spate {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int n_threads : {1, 2, 3, 4}) {
    thread_pool pool(n_threads);
    for (int64_t n_tasks : {0, 1, 2, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n_tasks));
      pool.parallel_for(n_tasks, [&](int64_t t, int tid) {
        ASSERT_GE(tid, 0);
        ASSERT_LT(tid, n_threads);
        hits[static_cast<size_t>(t)].fetch_add(1);
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
}

// Regression: a loop submitted right after construction, before the worker
// threads have started, must still run (and not deadlock).
TEST(ThreadPool, LoopImmediatelyAfterConstruction) {
  for (int i = 0; i < 200; ++i) {
    thread_pool pool(2);
    std::atomic<int> n{0};
    pool.parallel_for(64, [&](int64_t, int) { n.fetch_add(1); });
    EXPECT_EQ(n.load(), 64);
  }
}

// Workers that went to sleep (after the spin window) are woken for the next loop.
TEST(ThreadPool, WakesSleepingWorkers) {
  thread_pool pool(2, /*spin_us=*/10);
  std::set<int> tids;
  for (int round = 0; round < 20; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::atomic<int> n{0};
    std::atomic<int> seen_worker{0};
    pool.parallel_for(256, [&](int64_t, int tid) {
      n.fetch_add(1);
      if (tid == 1) seen_worker.store(1);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    });
    EXPECT_EQ(n.load(), 256);
    if (seen_worker.load()) tids.insert(1);
  }
  EXPECT_TRUE(tids.count(1)) << "the worker thread never took a task";
}

TEST(ThreadPool, ManySmallLoops) {
  thread_pool pool(2);
  int64_t total = 0;
  std::vector<int64_t> partial(2);
  for (int i = 0; i < 20000; ++i) {
    partial.assign(2, 0);
    pool.parallel_for(2, [&](int64_t t, int) { partial[static_cast<size_t>(t)] = t + 1; });
    total += partial[0] + partial[1];
  }
  EXPECT_EQ(total, 20000 * 3);
}

TEST(ThreadPool, PhysicalCoreCountIsPositive) { EXPECT_GE(physical_core_count(), 1); }

}  // namespace
}  // namespace spate
