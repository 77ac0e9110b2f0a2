// Thread-pool device executor: persistent workers that run data-parallel loops.
//
// Started once with n_threads - 1 workers; the calling thread is thread 0 and
// takes part in every loop. No thread is created per op or per step.
//
// Contract:
//   - parallel_for() is called from ONE thread at a time (the engine thread);
//     it blocks until every task has run. It is not reentrant.
//   - Tasks are handed out dynamically (an atomic counter), so a core slowed by
//     a noisy neighbour takes fewer tasks. Which thread runs a task never changes
//     the result: each task must write disjoint outputs.
//   - Between loops the workers spin for a short while (spin_us) and then sleep
//     on an atomic wait, so an idle server burns no CPU. The caller likewise
//     spins, then sleeps, while waiting for the last task of a loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace spate {

class thread_pool {
 public:
  explicit thread_pool(int n_threads, int spin_us = 200);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int n_threads() const { return n_threads_; }

  // Runs fn(task, thread_id) for every task in [0, n_tasks). thread_id is in [0, n_threads()).
  template <typename Fn>
  void parallel_for(int64_t n_tasks, Fn&& fn) {
    using fn_t = std::remove_reference_t<Fn>;
    run(n_tasks, [](void* ctx, int64_t task, int tid) { (*static_cast<fn_t*>(ctx))(task, tid); }, &fn);
  }

 private:
  using task_fn = void (*)(void*, int64_t, int);
  void run(int64_t n_tasks, task_fn fn, void* ctx);
  void worker_main(int tid);
  void drain(int tid);

  int n_threads_;
  int spin_us_;
  std::vector<std::thread> workers_;
  // Job description, published by generation_ (release) and read after seeing it (acquire).
  task_fn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_tasks_ = 0;
  alignas(64) std::atomic<int64_t> next_task_{0};
  alignas(64) std::atomic<int> n_busy_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};
  std::atomic<int> n_sleeping_{0};      // workers blocked in generation_.wait
  std::atomic<bool> main_waiting_{false};  // caller blocked in n_busy_.wait
  std::atomic<bool> stop_{false};
};

// Number of physical cores (distinct core ids per package), or the number of
// logical CPUs when the topology cannot be read. At least 1.
int physical_core_count();

}  // namespace spate
