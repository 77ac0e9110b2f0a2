// The listening socket, the I/O threads and the TLS context of `spate serve`.
//
// Lifecycle: listen() binds (throws with a clear message when it cannot),
// start() runs the accept loop on --io-threads threads; each accepted
// connection gets its own strand and runs run_http_session() (plain or, with
// TLS configured, after a bounded handshake). stop_accepting() closes the
// listener (drain); stop() stops the I/O threads and joins them.
//
// Thread-safety: listen/start/stop_accepting/stop from the owning thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <thread>
#include <vector>

#include "server/server_context.h"

namespace spate {

class http_listener {
 public:
  explicit http_listener(server_context& ctx);
  ~http_listener();

  void listen();                 // throws std::runtime_error
  // Socket activation: serve on an inherited listening socket (fd >= 3)
  // instead of binding --host/--port. Throws when fd is not a TCP socket.
  void adopt(int fd);
  uint16_t port() const { return port_; }
  bool tls() const { return static_cast<bool>(std::atomic_load(&ssl_)); }
  // Re-reads --ssl-certfile/--ssl-keyfile for new connections (existing ones
  // keep theirs). Returns "" or why the old certificate stays. Any thread.
  std::string reload_tls();
  void start();
  void stop_accepting();
  void stop();
  boost::asio::io_context& io() { return ioc_; }

 private:
  boost::asio::awaitable<void> accept_loop();

  server_context& ctx_;
  boost::asio::io_context ioc_;
  std::shared_ptr<boost::asio::ssl::context> ssl_;  // atomic_load/atomic_store
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace spate
