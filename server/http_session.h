// One HTTP/1.1 connection as one C++20 coroutine on its own strand, for a
// plain TCP stream or a TLS stream (beast::ssl_stream<beast::tcp_stream>).
//
// Per request:                 timeout
//   wait for the first byte    --idle-timeout   (keep-alive between requests; the
//                                                first request has none: its head
//                                                deadline starts at accept)
//   read the header            --header-timeout (slow or partial headers: 408, close;
//                                                obs-fold, no Host: 400; RFC 9112)
//   check the head             RFC 9112 (http_request_checks.h), then Origin and
//                              API key (request_admission.h): refused before the body
//   Expect: 100-continue       answered "100 Continue" before the body is read
//   read the body              --body-timeout   (413 beyond --max-body-bytes, decided on the header)
//   handle (api_router.cpp)    none while generating; each write --write-timeout
// After an early error (4xx before the request was handled) the connection
// closes lingering: what the client still sends is read and dropped (bounded),
// so that a client still uploading reads the 413 rather than a broken pipe.
// A WebSocket upgrade of GET /v1/responses hands the stream to ws_responses.h.
//
// Thread-safety: everything runs on the connection's strand.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cerrno>
#include <chrono>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>
#include <spdlog/spdlog.h>

#include "server/api_router.h"
#include "server/http_io.h"
#include "server/http_request_checks.h"
#include "server/request_admission.h"
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
    if (ex.req.method() == http::verb::head) {  // the GET's header, Content-Length included; no body
      http::response_serializer<http::string_body> sr(res);
      co_await http::async_write_header(s_, sr, boost::asio::use_awaitable);
      co_return;
    }
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
    ctx_.cors.decorate(ex.req.base(), res);
    res.keep_alive(keep_alive_);
    ex.status = res.result_int();
  }
  void arm_write_timer() { beast::get_lowest_layer(s_).expires_after(seconds_to_duration(ctx_.opts.write_timeout_s)); }

  // Waits for the socket to become readable without consuming anything:
  //   error (reset)            -> on_close;
  //   end of stream (recv 0)   -> the client half-closed (shutdown(SHUT_WR)
  //                               after its request, as nginx and Beast allow):
  //                               not a disconnect; wait_hangup;
  //   data pending (a pipelined request or a TLS record) -> stop watching.
  // A client that is really gone then shows at the next write.
  void arm_watch(const std::shared_ptr<watch_state>& st) {
    auto& sock = beast::get_lowest_layer(s_).socket();
    sock.async_wait(boost::asio::socket_base::wait_read, [this, st, &sock](boost::system::error_code ec) {
      if (!st->active || ec) return;  // unwatched (the socket may be gone) or cancelled
      char c;
      const ssize_t r = ::recv(sock.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        st->active = false;
        if (st->on_close) st->on_close();
      } else if (r == 0) {
        wait_hangup(st);
      } else {
        // Data pending, or a spurious wake-up (rare): stop watching; the next write detects a gone client.
        st->active = false;
      }
    });
  }
  // After a half-close: on_close once the socket errs or hangs up in both
  // directions (a reset: the client closed with unread data, or answered a
  // write with RST). A FIN alone never completes this wait.
  void wait_hangup(const std::shared_ptr<watch_state>& st) {
    auto& sock = beast::get_lowest_layer(s_).socket();
    pollfd p{sock.native_handle(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP))) {  // already reset
      st->active = false;
      if (st->on_close) st->on_close();
      return;
    }
    sock.async_wait(boost::asio::socket_base::wait_error, [st](boost::system::error_code ec) {
      if (!st->active || ec) return;
      st->active = false;
      if (st->on_close) st->on_close();
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

// Bounds of the lingering close after an early error (nginx's lingering_close):
// what a client still sends (the rest of an over-long body) is read and
// dropped, so that it reads our answer instead of a reset.
inline constexpr double k_linger_s = 5.0;                  // at most this long in all
inline constexpr uint64_t k_linger_max_bytes = 256ull << 20;  // and at most this much

// Reads one request head into the parser: the raw bytes up to the blank line
// (obs-fold is refused there: Beast would accept it), then the parser. buf may
// already hold bytes; the caller arms the deadline. Returns the error, if any;
// bad_header_fold marks obs-fold.
struct head_read {
  boost::system::error_code ec;
  bool obs_fold = false;
};

template <class Stream>
boost::asio::awaitable<head_read> read_request_head(Stream& stream, beast::flat_buffer& buf,
                                                    http::request_parser<http::string_body>& parser, size_t limit) {
  namespace asio = boost::asio;
  head_read r;
  for (;;) {
    const auto data = buf.cdata();
    const std::string_view have(static_cast<const char*>(data.data()), data.size());
    if (const size_t end = find_head_end(have.substr(0, std::min(have.size(), limit + 1))); end != std::string_view::npos) {
      if (has_obs_fold(have.substr(0, end))) {
        r.obs_fold = true;
        co_return r;
      }
      const size_t n = parser.put(asio::buffer(data.data(), end), r.ec);
      buf.consume(n);
      if (!r.ec && !parser.is_header_done()) r.ec = http::error::bad_line_ending;
      co_return r;
    }
    if (have.size() > limit) {
      r.ec = http::error::header_limit;
      co_return r;
    }
    const size_t n = co_await stream.async_read_some(buf.prepare(4096), asio::redirect_error(asio::use_awaitable, r.ec));
    if (r.ec) co_return r;
    buf.commit(n);
  }
}

// The answer to a failed head read, or none (the client is gone).
inline std::optional<std::pair<http::status, std::string>> head_error_answer(const head_read& r, bool timed_out,
                                                                             const server_context& ctx) {
  namespace asio = boost::asio;
  const auto& ec = r.ec;
  if (r.obs_fold) return std::pair{http::status::bad_request, std::string("obsolete line folding in the request header")};
  if (timed_out) return std::pair{http::status::request_timeout, std::string("timed out reading the request header")};
  if (ec == http::error::body_limit) {  // Content-Length over the limit, seen with the header
    return std::pair{http::status::payload_too_large,
                     "request body is larger than the limit of " + std::to_string(ctx.opts.max_body_bytes) + " bytes"};
  }
  if (ec == http::error::header_limit) {
    return std::pair{http::status::request_header_fields_too_large,
                     "request header is larger than " + std::to_string(ctx.opts.max_header_bytes) + " bytes"};
  }
  // The client went away (a TLS peer that closes without close_notify reads as stream_truncated).
  if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::operation_aborted || ec == asio::ssl::error::stream_truncated) {
    return std::nullopt;
  }
  return std::pair{http::status::bad_request, "malformed HTTP request: " + ec.message()};
}

// Reads the rest of a request after its head: answers Expect: 100-continue,
// refuses a body over the limit, reads the body. Returns false when the
// connection must close (an error was answered, or the client is gone).
template <class Stream>
boost::asio::awaitable<bool> read_request_body(server_context& ctx, Stream& stream, beast::flat_buffer& buf,
                                               http::request_parser<http::string_body>& parser, http_exchange& ex) {
  namespace asio = boost::asio;
  auto& lowest = beast::get_lowest_layer(stream);
  if (const auto cl = parser.content_length(); cl && *cl > ctx.opts.max_body_bytes) {
    co_await write_early_error(stream, ctx, ex, http::status::payload_too_large,
                               "request body of " + std::to_string(*cl) + " bytes is larger than the limit of " +
                                   std::to_string(ctx.opts.max_body_bytes) + " bytes",
                               "");
    co_return false;
  }
  if (parser.is_done()) co_return true;
  boost::system::error_code ec;
  if (expects_continue(parser.get().base()) && buf.size() == 0) {
    static constexpr std::string_view k_continue = "HTTP/1.1 100 Continue\r\n\r\n";
    lowest.expires_after(seconds_to_duration(ctx.opts.write_timeout_s));
    co_await asio::async_write(stream, asio::buffer(k_continue.data(), k_continue.size()), asio::redirect_error(asio::use_awaitable, ec));
    lowest.expires_never();
    if (ec) co_return false;
  }
  bool body_timed_out = false;
  {
    read_deadline dl(lowest.socket(), ctx.opts.body_timeout_s);
    co_await http::async_read(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
    body_timed_out = dl.fired();
  }
  if (!ec) co_return true;
  if (ec == http::error::body_limit) {
    co_await write_early_error(stream, ctx, ex, http::status::payload_too_large,
                               "request body is larger than the limit of " + std::to_string(ctx.opts.max_body_bytes) + " bytes", "");
  } else if (body_timed_out) {
    co_await write_early_error(stream, ctx, ex, http::status::request_timeout, "timed out reading the request body", "");
  } else if (ec != http::error::end_of_stream && ec != asio::error::eof && ec != asio::error::connection_reset) {
    co_await write_early_error(stream, ctx, ex, http::status::bad_request, "malformed HTTP request body: " + ec.message(), "");
  }
  co_return false;
}

// Orderly close. After an early error (linger) the rest of what the client
// sends is read and dropped, bounded by k_linger_s and k_linger_max_bytes.
template <class Stream>
boost::asio::awaitable<void> close_session(Stream& stream, bool linger) {
  namespace asio = boost::asio;
  auto& lowest = beast::get_lowest_layer(stream);
  boost::system::error_code ec;
  lowest.expires_after(std::chrono::seconds(2));
  if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
    if (!linger) co_await stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
  }
  lowest.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  if (linger) {
    lowest.expires_after(seconds_to_duration(k_linger_s));
    std::vector<char> sink(64 << 10);
    for (uint64_t n_read = 0; n_read < k_linger_max_bytes;) {
      const size_t n = co_await lowest.async_read_some(asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;  // EOF, reset or the linger deadline
      n_read += n;
    }
  }
  lowest.close();
}

// Runs the connection until it closes. The stream is already connected (and,
// for TLS, handshaken). Never throws.
//
// Deadlines: the first request's head must be complete --header-timeout after
// the connection starts here (accept, or the end of the TLS handshake), so a
// silent connection gives its slot back; a later request on the connection
// may wait --idle-timeout for its first byte, then has --header-timeout.
template <class Stream>
boost::asio::awaitable<void> run_http_session(server_context& ctx, Stream stream) {
  namespace asio = boost::asio;
  using clock = std::chrono::steady_clock;
  auto& lowest = beast::get_lowest_layer(stream);
  beast::flat_buffer buf;
  boost::system::error_code ec;
  bool linger = false;
  for (bool first = true;; first = false) {
    // The head deadline: from now for the first request, else from the first byte.
    auto head_deadline = clock::now() + seconds_to_duration(ctx.opts.header_timeout_s);
    if (!first && buf.size() == 0) {
      if (ctx.draining.load()) break;
      lowest.expires_after(seconds_to_duration(ctx.opts.idle_timeout_s));
      size_t n = 0;
      {
        // Closed by close_oldest() when a new connection needs the slot.
        idle_registration idle(ctx.idle, co_await asio::this_coro::executor, lowest.socket());
        n = co_await stream.async_read_some(buf.prepare(4096), asio::redirect_error(asio::use_awaitable, ec));
        if (idle.evicted()) spdlog::debug("closing an idle keep-alive connection: --max-connections {} reached", ctx.opts.max_connections);
      }
      if (ec) break;  // closed, reset, idle timeout or evicted: nothing to answer
      buf.commit(n);
      head_deadline = clock::now() + seconds_to_duration(ctx.opts.header_timeout_s);
    }
    lowest.expires_never();
    http_exchange ex;
    ex.t_start = clock::now();
    http::request_parser<http::string_body> parser;
    parser.header_limit(ctx.opts.max_header_bytes);
    parser.body_limit(ctx.opts.max_body_bytes);
    head_read hr;
    bool head_timed_out = false;
    {
      read_deadline dl(lowest.socket(), std::chrono::duration<double>(head_deadline - clock::now()).count());
      hr = co_await read_request_head(stream, buf, parser, ctx.opts.max_header_bytes);
      head_timed_out = dl.fired();
    }
    ex.request_id = ctx.make_id("req");
    if (hr.ec || hr.obs_fold) {
      // A silent connection that never sent a byte is closed without an answer.
      const bool silent = first && buf.size() == 0 && head_timed_out;
      if (auto answer = head_error_answer(hr, head_timed_out, ctx); answer && !silent) {
        co_await write_early_error(stream, ctx, ex, answer->first, std::move(answer->second), "");
        linger = true;
        log_access(ctx, ex);
      }
      break;
    }
    ex.req.base() = parser.get().base();
    if (auto bad = check_request_head(parser.get().base())) {
      co_await write_early_error(stream, ctx, ex, bad->status, std::move(bad->message), "");
      linger = true;
      log_access(ctx, ex);
      break;
    }
    // Origin and API key, before any body byte is read or 100 Continue sent.
    if (auto denied = admit_request_head(parser.get().base(), *ctx.api_keys(), ctx.cors, !ctx.opts.disable_ui)) {
      co_await write_early_error(stream, ctx, ex, denied->status, std::move(denied->message), std::move(denied->code));
      linger = true;
      log_access(ctx, ex);
      break;
    }
    if (!co_await read_request_body(ctx, stream, buf, parser, ex)) {
      linger = true;
      log_access(ctx, ex);
      break;
    }
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
    // During the drain a request on an open keep-alive connection is still
    // answered (503 for new work, see api_router.cpp), then the connection closes.
    const bool keep_alive = ex.req.keep_alive() && !ctx.draining.load();
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
  co_await close_session(stream, linger);
}

}  // namespace spate
