// The open Responses WebSockets (ws_responses.h), for the drain
// (cli/cmd_serve.cpp). A WebSocket outlives the HTTP request that opened it
// and is not a request in flight between its responses, so the drain counts
// it here, and tells it to close, instead of cutting it when it stops the I/O.
//
// Contract:
//   - a connection takes a ticket before it accepts its upgrade and drops it
//     once its socket is closed (or its upgrade refused);
//   - begin_drain() calls every ticket's on_drain once; the drain then waits
//     until open() is 0 (bounded by --shutdown-timeout);
//   - a ticket taken after begin_drain() is late(): its on_drain is never
//     called, and its connection refuses the upgrade (503), as
//     check_ws_upgrade does once ctx.draining is set.
// One mutex orders enter() against begin_drain(): a connection is either told
// by the drain or late, never missed, even when it passed check_ws_upgrade
// just before ctx.draining was set. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace spate {

class ws_registry {
 public:
  // Counts one connection in open() while it lives.
  class ticket {
   public:
    ~ticket();
    ticket(const ticket&) = delete;
    ticket& operator=(const ticket&) = delete;
    // The drain had begun when the ticket was taken.
    bool late() const { return late_; }

   private:
    friend class ws_registry;
    ticket(ws_registry& r, uint64_t id, bool late) : r_(r), id_(id), late_(late) {}
    ws_registry& r_;
    uint64_t id_;
    bool late_;
  };

  // on_drain runs at most once, in begin_drain()'s thread with the registry
  // locked: it must only post to the connection's strand, never block or call
  // back into the registry.
  std::unique_ptr<ticket> enter(std::function<void()> on_drain);
  // Calls every open connection's on_drain; later tickets are late(). Idempotent.
  void begin_drain();
  // Connections holding a ticket (late ones included).
  int64_t open() const;

 private:
  void leave(uint64_t id);

  mutable std::mutex mu_;
  bool draining_ = false;
  uint64_t next_id_ = 1;
  int64_t n_late_ = 0;
  std::map<uint64_t, std::function<void()>> on_drain_;  // by ticket id; late tickets are not here
};

}  // namespace spate
