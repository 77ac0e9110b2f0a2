// Thread-pool device executor: persistent workers that run data-parallel loops.
//
// Started once with n_threads - 1 workers; the calling thread is thread 0 and
// takes part in every loop. No thread is created per op or per step.
//
// Contract:
//   - parallel_for() is called from ONE thread at a time (the engine thread);
//     it blocks until every task has run. It is not reentrant.
//   - Tasks are claimed dynamically, one at a time. Which thread runs a task
//     never changes the result: each task must write disjoint outputs.
//   - The caller waits only for tasks that were claimed, never for a worker
//     that has not shown up: on a machine where other processes hold the
//     cores, a descheduled worker costs at most the task it is running, and
//     the caller runs the rest itself.
//   - Between loops the workers spin for a short while (spin_us) and then sleep
//     on a futex, so an idle server burns no CPU. The caller likewise spins,
//     then sleeps, while the last claimed tasks finish.
//
// Claiming: one 64-bit word holds (loop generation, task count, next index),
// so a worker that wakes late can never claim a task of a later loop with a
// stale view: its compare-and-swap fails when the generation differs.
//
//   63            40 39            20 19             0
//   +---------------+----------------+----------------+
//   | generation    | n_tasks        | next task      |
//   +---------------+----------------+----------------+
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace spate {

class thread_pool {
 public:
  explicit thread_pool(int n_threads, int spin_us = 200);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int n_threads() const { return n_threads_; }

  // Names the following loops in the profiler's worker tracks (util/trace.h);
  // label must be a static string. Same thread as parallel_for.
  void set_trace_label(const char* label) { label_ = label; }

  // Runs fn(task, thread_id) for every task in [0, n_tasks). thread_id is in [0, n_threads()).
  template <typename Fn>
  void parallel_for(int64_t n_tasks, Fn&& fn) {
    using fn_t = std::remove_reference_t<Fn>;
    run(n_tasks, [](void* ctx, int64_t task, int tid) { (*static_cast<fn_t*>(ctx))(task, tid); }, &fn);
  }

 private:
  using task_fn = void (*)(void*, int64_t, int);
  static constexpr int64_t k_max_tasks_per_round = (1 << 20) - 1;

  void run(int64_t n_tasks, task_fn fn, void* ctx);
  void run_round(int64_t offset, int64_t n_tasks, task_fn fn, void* ctx);
  void worker_main(int tid);
  // Claims and runs tasks of loop `gen` until none is left.
  void drain(uint32_t gen, int tid);

  int n_threads_;
  int spin_us_;
  std::vector<std::thread> workers_;
  // Job description: written by the caller before it publishes claim_; read by
  // a worker only after it claimed a task of that loop (so it cannot change meanwhile).
  task_fn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t offset_ = 0;
  const char* label_ = "tasks";
  alignas(64) std::atomic<uint64_t> claim_{0};
  alignas(64) std::atomic<uint32_t> n_done_{0};      // tasks of the current loop finished
  alignas(64) std::atomic<uint32_t> generation_{0};  // loop counter (low 24 bits used in claim_)
  std::atomic<int> n_sleeping_{0};                   // workers blocked on generation_
  std::atomic<uint32_t> main_waiting_{0};            // caller blocked on n_done_
  std::atomic<bool> stop_{false};
};

// Number of physical cores (distinct core ids per package), or the number of
// logical CPUs when the topology cannot be read. At least 1.
int physical_core_count();

}  // namespace spate
