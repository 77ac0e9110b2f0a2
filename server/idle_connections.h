// The keep-alive connections that wait for their next request, oldest first,
// so that a connection arriving at --max-connections closes the oldest idle
// one instead of being refused (as nginx reuses keep-alive connections): idle
// clients cannot hold every slot, /health included, for --idle-timeout.
//
// A connection registers while it waits for the first byte of its next
// request (idle_registration, on its strand) and unregisters as soon as the
// wait ends. close_oldest() asks the oldest one to close: its closer posts to
// the connection's strand, which ends the wait there.
//
// Thread-safety: idle_connections' members from any thread (one mutex);
// idle_registration on its connection's strand only.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace spate {

class idle_connections {
 public:
  // Called at most once, from close_oldest's thread, outside the lock; must
  // only post work to the connection's own strand.
  using closer = std::function<void()>;

  uint64_t add(closer c);
  void remove(uint64_t id);
  // Calls the closer of the longest-waiting connection and forgets it.
  // Returns false when no connection is idle.
  bool close_oldest();
  size_t size() const;

 private:
  mutable std::mutex mu_;
  uint64_t next_id_ = 0;                  // ids grow: the map's first entry is the oldest
  std::map<uint64_t, closer> waiting_;
};

// Registers one connection's keep-alive wait for as long as it lives. The
// closer cancels the socket's pending read (the wait then ends with
// operation_aborted) unless the wait has already ended.
class idle_registration {
 public:
  idle_registration(idle_connections& reg, boost::asio::any_io_executor strand, boost::asio::ip::tcp::socket& sock)
      : reg_(reg), waiting_(std::make_shared<bool>(true)) {
    id_ = reg_.add([strand, waiting = waiting_, evicted = evicted_, &sock] {
      boost::asio::post(strand, [waiting, evicted, &sock] {
        if (!*waiting) return;  // the wait ended first; the socket may be gone
        *evicted = true;
        boost::system::error_code ignored;
        sock.cancel(ignored);
      });
    });
  }
  ~idle_registration() {
    *waiting_ = false;
    reg_.remove(id_);
  }
  idle_registration(const idle_registration&) = delete;
  idle_registration& operator=(const idle_registration&) = delete;

  // True when close_oldest() chose this connection.
  bool evicted() const { return *evicted_; }

 private:
  idle_connections& reg_;
  std::shared_ptr<bool> waiting_;
  std::shared_ptr<bool> evicted_ = std::make_shared<bool>(false);
  uint64_t id_ = 0;
};

}  // namespace spate
