// Bridges engine events to one I/O session: the engine's callback (engine
// thread) posts each event to the session's executor (a strand), where it is
// queued and the session's waiting coroutine is woken. Nothing polls.
//
// One request_stream may carry several engine requests (the choices of n > 1),
// each tagged with its choice index.
//
// Thread-safety: everything except the callbacks made by make_callback() runs
// on the session's strand. The callbacks run on the engine thread and only post.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "engine/engine_api.h"

namespace spate {

struct tagged_event {
  int32_t choice = 0;
  engine_event ev;
};

class request_stream : public std::enable_shared_from_this<request_stream> {
 public:
  // ex: the session's strand. Use create() (make_callback needs shared
  // ownership). The callbacks hold only a weak_ptr: events that arrive after
  // the stream is gone are dropped.
  static std::shared_ptr<request_stream> create(boost::asio::any_io_executor ex);
  explicit request_stream(boost::asio::any_io_executor ex);

  // An engine callback that delivers to this stream as choice `choice`.
  event_callback make_callback(int32_t choice);

  // Waits (strand) until at least one event is queued, the stream is
  // interrupted, or `timeout` passes; then moves out everything queued
  // (possibly nothing on timeout/interrupt).
  boost::asio::awaitable<std::vector<tagged_event>> next(std::chrono::steady_clock::duration timeout);

  // Wakes next() without an event (strand): used when the client went away.
  void interrupt();
  bool interrupted() const { return interrupted_; }

 private:
  boost::asio::any_io_executor ex_;
  boost::asio::steady_timer wake_;
  std::deque<tagged_event> queue_;
  bool interrupted_ = false;
};

}  // namespace spate
