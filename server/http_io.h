// The seam between one HTTP connection (plain or TLS; see http_session.h) and
// the API handlers, so that handlers are written once for both stream types.
//
// Contract: all calls happen on the connection's strand, one at a time (a
// handler never has two writes in flight). Write calls throw
// boost::system::system_error when the client is gone or a write times out
// (--write-timeout); the handler then cancels its work and returns.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace spate {

namespace http = boost::beast::http;

// One request/response exchange, also the access-log record.
struct http_exchange {
  http::request<http::string_body> req;
  std::string request_id;                 // X-Request-Id (client's, if sane, else generated)
  std::chrono::steady_clock::time_point t_start;
  unsigned status = 0;                    // set when the response header is written
  int32_t prompt_tokens = 0, completion_tokens = 0;
  double ttft_s = -1;                     // -1: no token
  std::string finish_reason;
};

class http_io {
 public:
  virtual ~http_io() = default;
  // A complete response (Content-Length). Adds Server, X-Request-Id, keep-alive.
  virtual boost::asio::awaitable<void> write_response(http_exchange& ex, http::response<http::string_body> res) = 0;
  // The header of a chunked streaming response (e.g. text/event-stream).
  virtual boost::asio::awaitable<void> write_stream_header(http_exchange& ex, http::response<http::empty_body> res) = 0;
  // One chunk of the body; empty data is ignored.
  virtual boost::asio::awaitable<void> write_chunk(std::string_view data) = 0;
  // The final zero-length chunk.
  virtual boost::asio::awaitable<void> write_stream_end() = 0;
  // Calls on_close (on the strand) when the client closes the connection while
  // a handler waits on the engine; until unwatch(). One watch at a time.
  virtual void watch_disconnect(std::function<void()> on_close) = 0;
  virtual void unwatch() = 0;
  virtual bool keep_alive() const = 0;
};

}  // namespace spate
