// Fair turns on one device executor (thread pool) shared by several engines:
// each loaded model's engine thread takes a turn for every forward pass and
// every batch of engine tasks, and turns are granted in the order they were
// asked for (a ticket lock). Two engines that both have work alternate step
// by step; one that is idle costs the other nothing.
//
// Thread-safety: any thread. A turn is not reentrant: a thread holding one
// must not ask for another (the executors never nest them).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace spate {

class device_turns {
 public:
  // Blocks until every turn asked for before this one has been released.
  void acquire() {
    std::unique_lock lock(mu_);
    const uint64_t ticket = next_ticket_++;
    cv_.wait(lock, [&] { return serving_ == ticket; });
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      ++serving_;
    }
    cv_.notify_all();
  }

  // RAII turn; a null device_turns means "not shared" (no wait).
  class turn {
   public:
    explicit turn(device_turns* t) : t_(t) {
      if (t_) t_->acquire();
    }
    ~turn() {
      if (t_) t_->release();
    }
    turn(const turn&) = delete;
    turn& operator=(const turn&) = delete;

   private:
    device_turns* t_;
  };

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ticket_ = 0;
  uint64_t serving_ = 0;
};

}  // namespace spate
