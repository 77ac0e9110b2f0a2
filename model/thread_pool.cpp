#include "model/thread_pool.h"

#include <chrono>
#include <fstream>
#include <linux/futex.h>
#include <set>
#include <string>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>

#include "util/trace.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SPATE_PAUSE() _mm_pause()
#else
#define SPATE_PAUSE() ((void)0)
#endif

namespace spate {
namespace {

// Raw futex calls (libstdc++ 12's std::atomic::wait can lose wake-ups).
void futex_wait(std::atomic<uint32_t>& a, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&a), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>& a) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&a), FUTEX_WAKE_PRIVATE, 1 << 30, nullptr, nullptr, 0);
}

constexpr uint64_t k_gen_mask = (1u << 24) - 1;
constexpr uint64_t k_field_mask = (1u << 20) - 1;

uint64_t pack(uint32_t gen, uint64_t n_tasks, uint64_t next) {
  return (static_cast<uint64_t>(gen & k_gen_mask) << 40) | (n_tasks << 20) | next;
}
uint32_t gen_of(uint64_t c) { return static_cast<uint32_t>(c >> 40); }
uint64_t n_of(uint64_t c) { return (c >> 20) & k_field_mask; }
uint64_t next_of(uint64_t c) { return c & k_field_mask; }

}  // namespace

thread_pool::thread_pool(int n_threads, int spin_us) : n_threads_(n_threads < 1 ? 1 : n_threads), spin_us_(spin_us) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_main(t); });
}

thread_pool::~thread_pool() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(generation_);
  for (auto& w : workers_) w.join();
}

void thread_pool::drain(uint32_t gen, int tid) {
  const uint32_t g = gen & k_gen_mask;
  uint64_t c = claim_.load(std::memory_order_acquire);
  // Profiler: a worker's share of a loop is one span on its track, from its
  // first claimed task to its last (the caller's ops are traced by the runner).
  const bool traced = tid != 0 && trace::enabled();
  int64_t t0_ns = 0, n_ran = 0;
  const char* label = nullptr;
  for (;;) {
    if (gen_of(c) != g || next_of(c) >= n_of(c)) break;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // The task is ours: the loop cannot finish (nor fn_/ctx_ change) before we report it done.
    if (traced && n_ran++ == 0) {
      t0_ns = trace::now_ns();
      label = label_;
    }
    fn_(ctx_, offset_ + static_cast<int64_t>(next_of(c)), tid);
    const uint32_t done = n_done_.fetch_add(1, std::memory_order_seq_cst) + 1;
    if (done == n_of(c) && main_waiting_.load(std::memory_order_seq_cst)) futex_wake_all(n_done_);
    c = claim_.load(std::memory_order_acquire);
  }
  if (n_ran > 0) trace::complete(label, "worker", t0_ns, trace::now_ns() - t0_ns, {{"tasks", n_ran}});
}

void thread_pool::run(int64_t n_tasks, task_fn fn, void* ctx) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(ctx, t, 0);
    return;
  }
  for (int64_t off = 0; off < n_tasks; off += k_max_tasks_per_round) {
    run_round(off, std::min(k_max_tasks_per_round, n_tasks - off), fn, ctx);
  }
}

void thread_pool::run_round(int64_t offset, int64_t n_tasks, task_fn fn, void* ctx) {
  fn_ = fn;
  ctx_ = ctx;
  offset_ = offset;
  n_done_.store(0, std::memory_order_relaxed);
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  claim_.store(pack(gen, static_cast<uint64_t>(n_tasks), 0), std::memory_order_release);
  generation_.store(gen, std::memory_order_seq_cst);
  if (n_sleeping_.load(std::memory_order_seq_cst) > 0) futex_wake_all(generation_);
  drain(gen, 0);
  // Every task is claimed now; wait for the claimed ones still running elsewhere.
  const auto total = static_cast<uint32_t>(n_tasks);
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
  int iter = 0;
  for (uint32_t done = n_done_.load(std::memory_order_acquire); done != total; done = n_done_.load(std::memory_order_acquire)) {
    SPATE_PAUSE();
    if ((++iter & 63) == 0 && std::chrono::steady_clock::now() > spin_until) {
      main_waiting_.store(1, std::memory_order_seq_cst);
      done = n_done_.load(std::memory_order_seq_cst);
      if (done != total) futex_wait(n_done_, done);
      main_waiting_.store(0, std::memory_order_relaxed);
    }
  }
}

void thread_pool::worker_main(int tid) {
  trace::set_thread_name("worker " + std::to_string(tid));
  // generation_ is 0 until the first run(); starting from it (not from a load
  // on this thread) means a loop published before this thread ran is not missed.
  uint32_t seen = 0;
  for (;;) {
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
    drain(g, tid);
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
