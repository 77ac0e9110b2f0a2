// Entry points of one accepted connection, each in its own translation unit
// (the Beast/Asio template instantiations are heavy; two files build in
// parallel). Both run until the connection closes and never throw.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <memory>

#include "server/server_context.h"

namespace spate {

// Plain HTTP/WebSocket.
boost::asio::awaitable<void> serve_plain_connection(server_context& ctx, boost::asio::ip::tcp::socket sock);
// TLS handshake bounded by --header-timeout, then HTTPS/WSS. A failed
// handshake (garbage, old protocol) just closes the socket.
// The connection keeps its TLS context alive (SIGHUP may replace the listener's).
boost::asio::awaitable<void> serve_tls_connection(server_context& ctx, std::shared_ptr<boost::asio::ssl::context> tls,
                                                  boost::asio::ip::tcp::socket sock);

// Counts the connection for --max-connections while it lives.
struct connection_slot {
  explicit connection_slot(server_context& c) : ctx(c) { ctx.n_connections.fetch_add(1); }
  ~connection_slot() { ctx.n_connections.fetch_sub(1); }
  connection_slot(const connection_slot&) = delete;
  connection_slot& operator=(const connection_slot&) = delete;
  server_context& ctx;
};

}  // namespace spate
