// One HTTP/1.1 connection as one C++20 coroutine on its own strand, for a
// plain TCP stream or a TLS stream (beast::ssl_stream<beast::tcp_stream>).
//
// Per request:                 timeout
//   wait for the first byte    --idle-timeout   (keep-alive between requests)
//   read the header            --header-timeout (slow or partial headers: 408, close)
//   read the body              --body-timeout   (413 beyond --max-body-bytes, decided on the header)
//   handle (api_router.cpp)    none while generating; each write --write-timeout
// A WebSocket upgrade of GET /v1/responses hands the stream to ws_responses.h.
//
// Thread-safety: everything runs on the connection's strand.
#pragma once

#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cerrno>
#include <chrono>
#include <memory>
#include <spdlog/spdlog.h>

#include "server/api_router.h"
#include "server/http_io.h"
#include "server/server_context.h"
#include "server/ws_responses.h"

namespace spate {

namespace beast = boost::beast;

inline std::chrono::steady_clock::duration seconds_to_duration(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

template <class Stream>
class http_stream_io final : public http_io {
 public:
  http_stream_io(Stream& s, const server_context& ctx, bool keep_alive) : s_(s), ctx_(ctx), keep_alive_(keep_alive) {}
  ~http_stream_io() override { unwatch(); }

  boost::asio::awaitable<void> write_response(http_exchange& ex, http::response<http::string_body> res) override {
    decorate(ex, res);
    res.prepare_payload();
    arm_write_timer();
    co_await http::async_write(s_, res, boost::asio::use_awaitable);
  }
  boost::asio::awaitable<void> write_stream_header(http_exchange& ex, http::response<http::empty_body> res) override {
    decorate(ex, res);
    res.chunked(true);
    http::response_serializer<http::empty_body> sr(res);
    arm_write_timer();
    co_await http::async_write_header(s_, sr, boost::asio::use_awaitable);
  }
  boost::asio::awaitable<void> write_chunk(std::string_view data) override {
    if (data.empty()) co_return;
    arm_write_timer();
    co_await boost::asio::async_write(s_, http::make_chunk(boost::asio::buffer(data.data(), data.size())),
                                      boost::asio::use_awaitable);
  }
  boost::asio::awaitable<void> write_stream_end() override {
    arm_write_timer();
    co_await boost::asio::async_write(s_, http::make_chunk_last(), boost::asio::use_awaitable);
  }

  void watch_disconnect(std::function<void()> on_close) override {
    unwatch();
    watch_ = std::make_shared<watch_state>();
    watch_->on_close = std::move(on_close);
    arm_watch(watch_);
  }
  void unwatch() override {
    if (!watch_) return;
    const bool was_waiting = watch_->active;
    watch_->active = false;
    watch_.reset();
    if (was_waiting) {
      boost::system::error_code ec;
      beast::get_lowest_layer(s_).socket().cancel(ec);  // only the readiness wait is pending here
    }
  }
  bool keep_alive() const override { return keep_alive_; }

 private:
  struct watch_state {
    bool active = true;
    std::function<void()> on_close;
  };

  template <class Res>
  void decorate(http_exchange& ex, Res& res) {
    res.set(http::field::server, "spate");
    res.set("X-Request-Id", ex.request_id);
    res.keep_alive(keep_alive_);
    ex.status = res.result_int();
  }
  void arm_write_timer() { beast::get_lowest_layer(s_).expires_after(seconds_to_duration(ctx_.opts.write_timeout_s)); }

  // Waits for the socket to become readable without consuming anything. Peer
  // closed (recv peek 0 / error) -> on_close. Data pending (a pipelined request
  // or a TLS record) -> stop watching; a vanished client then shows at the next write.
  void arm_watch(const std::shared_ptr<watch_state>& st) {
    auto& sock = beast::get_lowest_layer(s_).socket();
    sock.async_wait(boost::asio::socket_base::wait_read, [st, &sock](boost::system::error_code ec) {
      if (!st->active || ec) return;  // unwatched (the socket may be gone) or cancelled
      char c;
      const ssize_t r = ::recv(sock.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        st->active = false;
        if (st->on_close) st->on_close();
      } else {
        // Data pending, or a spurious wake-up (rare): stop watching; the next write detects a gone client.
        st->active = false;
      }
    });
  }

  Stream& s_;
  const server_context& ctx_;
  bool keep_alive_;
  std::shared_ptr<watch_state> watch_;
};

// A deadline that cancels (not closes) the socket's pending operations, so a
// timed-out read can still be answered with 408 before the connection closes.
// Strand-bound: construct with the stream's executor.
class read_deadline {
 public:
  template <class Socket>
  read_deadline(Socket& sock, double seconds) : timer_(sock.get_executor()) {
    timer_.expires_after(seconds_to_duration(seconds));
    timer_.async_wait([st = state_, &sock](boost::system::error_code ec) {
      if (ec || st->done) return;  // cancelled: the read finished in time
      st->fired = true;
      boost::system::error_code ignored;
      sock.cancel(ignored);
    });
  }
  ~read_deadline() {
    state_->done = true;
    timer_.cancel();
  }
  bool fired() const { return state_->fired; }

 private:
  struct state {
    bool fired = false, done = false;
  };
  std::shared_ptr<state> state_ = std::make_shared<state>();
  boost::asio::steady_timer timer_;
};

// Writes a small error response on a connection that is about to be closed.
template <class Stream>
boost::asio::awaitable<void> write_early_error(Stream& s, server_context& ctx, http_exchange& ex, http::status st,
                                               std::string message, std::string code) {
  http_stream_io<Stream> io(s, ctx, false);
  co_await io.write_response(ex, make_error_response(st, message, code, ex.req.version() ? ex.req.version() : 11));
}

// Runs the connection until it closes. The stream is already connected (and,
// for TLS, handshaken). Never throws.
template <class Stream>
boost::asio::awaitable<void> run_http_session(server_context& ctx, Stream stream) {
  namespace asio = boost::asio;
  auto& lowest = beast::get_lowest_layer(stream);
  beast::flat_buffer buf;
  boost::system::error_code ec;
  for (;;) {
    if (ctx.draining.load()) break;
    // Idle: wait for the first byte of the next request.
    if (buf.size() == 0) {
      lowest.expires_after(seconds_to_duration(ctx.opts.idle_timeout_s));
      const size_t n = co_await stream.async_read_some(buf.prepare(4096), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;  // closed, reset or idle timeout: nothing to answer
      buf.commit(n);
    }
    http_exchange ex;
    ex.t_start = std::chrono::steady_clock::now();
    http::request_parser<http::string_body> parser;
    parser.header_limit(ctx.opts.max_header_bytes);
    parser.body_limit(ctx.opts.max_body_bytes);
    lowest.expires_never();
    bool header_timed_out = false;
    {
      read_deadline dl(lowest.socket(), ctx.opts.header_timeout_s);
      co_await http::async_read_header(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
      header_timed_out = dl.fired();
    }
    ex.request_id = ctx.make_id("req");
    if (ec) {
      if (header_timed_out) {
        co_await write_early_error(stream, ctx, ex, http::status::request_timeout, "timed out reading the request header", "");
      } else if (ec == http::error::body_limit) {  // Content-Length over the limit, seen with the header
        co_await write_early_error(stream, ctx, ex, http::status::payload_too_large,
                                   "request body is larger than the limit of " + std::to_string(ctx.opts.max_body_bytes) + " bytes", "");
      } else if (ec == http::error::header_limit) {
        co_await write_early_error(stream, ctx, ex, http::status::request_header_fields_too_large,
                                   "request header is larger than " + std::to_string(ctx.opts.max_header_bytes) + " bytes", "");
      } else if (ec != http::error::end_of_stream && ec != asio::error::eof && ec != asio::error::connection_reset &&
                 ec != asio::error::operation_aborted) {
        co_await write_early_error(stream, ctx, ex, http::status::bad_request, "malformed HTTP request: " + ec.message(), "");
      }
      log_access(ctx, ex);
      break;
    }
    ex.req.version(parser.get().version());
    if (const auto cl = parser.content_length(); cl && *cl > ctx.opts.max_body_bytes) {
      co_await write_early_error(stream, ctx, ex, http::status::payload_too_large,
                                 "request body of " + std::to_string(*cl) + " bytes is larger than the limit of " +
                                     std::to_string(ctx.opts.max_body_bytes) + " bytes",
                                 "");
      log_access(ctx, ex);
      break;
    }
    if (!parser.is_done()) {
      bool body_timed_out = false;
      {
        read_deadline dl(lowest.socket(), ctx.opts.body_timeout_s);
        co_await http::async_read(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
        body_timed_out = dl.fired();
      }
      if (ec) {
        if (ec == http::error::body_limit) {
          co_await write_early_error(stream, ctx, ex, http::status::payload_too_large,
                                     "request body is larger than the limit of " + std::to_string(ctx.opts.max_body_bytes) + " bytes", "");
        } else if (body_timed_out) {
          co_await write_early_error(stream, ctx, ex, http::status::request_timeout, "timed out reading the request body", "");
        } else if (ec != http::error::end_of_stream && ec != asio::error::eof && ec != asio::error::connection_reset) {
          co_await write_early_error(stream, ctx, ex, http::status::bad_request, "malformed HTTP request body: " + ec.message(), "");
        }
        log_access(ctx, ex);
        break;
      }
    }
    lowest.expires_never();
    ex.req = parser.release();
    if (auto it = ex.req.find("X-Request-Id"); it != ex.req.end() && is_sane_request_id(it->value())) {
      ex.request_id = std::string(it->value());
    }
    if (beast::websocket::is_upgrade(ex.req)) {
      if (auto denial = check_ws_upgrade(ctx, ex)) {
        http_stream_io<Stream> io(stream, ctx, false);
        co_await io.write_response(ex, std::move(*denial));
        log_access(ctx, ex);
        break;
      }
      co_await run_ws_responses(ctx, std::move(stream), std::move(ex));
      co_return;
    }
    const bool keep_alive = ex.req.keep_alive() && !ctx.draining.load();
    {
      http_stream_io<Stream> io(stream, ctx, keep_alive);
      bool write_failed = false;
      try {
        co_await handle_http_request(ctx, ex, io);
      } catch (const std::exception& e) {
        spdlog::debug("{}: connection lost: {}", ex.request_id, e.what());
        write_failed = true;
      }
      log_access(ctx, ex);
      if (write_failed || !keep_alive) break;
    }
  }
  // Orderly close: TLS close_notify (bounded), then TCP shutdown.
  lowest.expires_after(std::chrono::seconds(2));
  if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
    co_await stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
  }
  lowest.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  lowest.close();
}

}  // namespace spate
