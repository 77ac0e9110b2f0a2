#include "engine/thread_pool.h"

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define SPATE_PAUSE() _mm_pause()
#else
#define SPATE_PAUSE() ((void)0)
#endif

namespace spate {
namespace {

// Raw futex calls: sleep while *addr == expected; wake all sleepers on addr.
// (libstdc++ 12's std::atomic::wait can lose wake-ups, so we do not use it.)
template <typename T>
void futex_wait(std::atomic<T>& a, T expected) {
  static_assert(sizeof(T) == 4);
  syscall(SYS_futex, reinterpret_cast<int*>(&a), FUTEX_WAIT_PRIVATE, static_cast<int>(expected), nullptr, nullptr, 0);
}
template <typename T>
void futex_wake_all(std::atomic<T>& a) {
  static_assert(sizeof(T) == 4);
  syscall(SYS_futex, reinterpret_cast<int*>(&a), FUTEX_WAKE_PRIVATE, 1 << 30, nullptr, nullptr, 0);
}

}  // namespace

thread_pool::thread_pool(int n_threads, int spin_us) : n_threads_(n_threads < 1 ? 1 : n_threads), spin_us_(spin_us) {
  workers_.reserve(n_threads_ - 1);
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_main(t); });
}

thread_pool::~thread_pool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(generation_);
  for (auto& w : workers_) w.join();
}

void thread_pool::drain(int tid) {
  for (;;) {
    const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) break;
    fn_(ctx_, task, tid);
  }
}

void thread_pool::run(int64_t n_tasks, task_fn fn, void* ctx) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(ctx, t, 0);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  n_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  n_busy_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (n_sleeping_.load(std::memory_order_seq_cst) > 0) futex_wake_all(generation_);
  drain(0);
  // Wait for the workers to finish their last task (they decrement n_busy_):
  // spin briefly, then sleep, so a descheduled worker does not cost us our time slice.
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
  int iter = 0;
  for (int busy = n_busy_.load(std::memory_order_acquire); busy != 0; busy = n_busy_.load(std::memory_order_acquire)) {
    SPATE_PAUSE();
    if ((++iter & 63) == 0 && std::chrono::steady_clock::now() > spin_until) {
      main_waiting_.store(true, std::memory_order_seq_cst);
      busy = n_busy_.load(std::memory_order_seq_cst);
      if (busy != 0) futex_wait(n_busy_, busy);
      main_waiting_.store(false, std::memory_order_relaxed);
    }
  }
}

void thread_pool::worker_main(int tid) {
  // generation_ is 0 until the first run(); reading it here instead would race with
  // a run() that starts before this thread does, and the worker would miss that job.
  uint32_t seen = 0;
  for (;;) {
    // Spin for a while for the next loop, then sleep until the generation changes.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
    uint32_t g = generation_.load(std::memory_order_acquire);
    int iter = 0;
    while (g == seen) {
      SPATE_PAUSE();
      if ((++iter & 63) == 0 && std::chrono::steady_clock::now() > spin_until) {
        n_sleeping_.fetch_add(1, std::memory_order_seq_cst);
        futex_wait(generation_, seen);
        n_sleeping_.fetch_sub(1, std::memory_order_relaxed);
      }
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    drain(tid);
    if (n_busy_.fetch_sub(1, std::memory_order_seq_cst) == 1 && main_waiting_.load(std::memory_order_seq_cst)) {
      futex_wake_all(n_busy_);
    }
  }
}

int physical_core_count() {
  std::set<std::pair<std::string, std::string>> cores;
  for (int cpu = 0; cpu < 4096; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core(base + "core_id"), pkg(base + "physical_package_id");
    if (!core) break;
    std::string c, p;
    core >> c;
    pkg >> p;
    cores.emplace(p, c);
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

}  // namespace spate
