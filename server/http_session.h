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
//   handle (api_router.cpp)    none while generating; each write --write-timeout;
//                              while the engine works, the connection is read
//                              (stream_watch): a client that closes or resets
//                              cancels its request, pipelined bytes are kept
// After an early error (4xx before the request was handled) the connection
// closes lingering: what the client still sends is read and dropped (bounded),
// so that a client still uploading reads the 413 rather than a broken pipe.
// A WebSocket upgrade of GET /v1/responses hands the stream to ws_responses.h.
//
// This header is the template core (instantiated for both stream types in
// session_plain.cpp and session_tls.cpp); what does not depend on the stream
// type is in http_session_support.h.
//
// Thread-safety: everything runs on the connection's strand.
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include <spdlog/spdlog.h>

#include "server/api_router.h"
#include "server/http_io.h"
#include "server/http_request_checks.h"
#include "server/http_session_support.h"
#include "server/request_admission.h"
#include "server/server_context.h"
#include "server/ws_responses.h"

namespace spate {

namespace beast = boost::beast;

// Watches a connection, while a handler waits on the engine, for the client
// going away, by reading it (through TLS too: the records are decrypted):
//   end of stream (the client closed, or half-closed: either ends the
//   request, as in vLLM), a reset, a TLS close or error -> on_close;
//   bytes (a pipelined request) -> appended to the session's buffer, so that
//   the session reads them next; past k_max_buffered bytes in it the watch
//   stops reading (a client then gone shows at the next write).
// The read goes on after stop() (on_close no longer runs) until settle(),
// which the session awaits before it reads the buffer again or closes.
// Thread-safety: the connection's strand only. One watch at a time; on_close
// runs at most once, on the strand, never after stop().
template <class Stream>
class stream_watch {
 public:
  static constexpr size_t k_max_buffered = 1 << 20;

  stream_watch(Stream& s, beast::flat_buffer* buf) : s_(s), buf_(buf), settled_(s.get_executor()) {}
  stream_watch(const stream_watch&) = delete;
  stream_watch& operator=(const stream_watch&) = delete;

  // Without a buffer (an early error's answer) nothing is watched.
  void start(std::function<void()> on_close) {
    on_close_ = std::move(on_close);
    active_ = true;
    if (gone_) {  // an earlier watch saw the client go
      active_ = false;
      auto f = std::move(on_close_);
      if (f) f();
      return;
    }
    if (!buf_ || reading_) return;
    reading_ = true;
    settling_ = false;
    // No read deadline: a write's deadline (--write-timeout) arms only the write timer while this read is pending.
    beast::get_lowest_layer(s_).expires_never();
    boost::asio::co_spawn(s_.get_executor(), read_loop(), boost::asio::detached);
  }
  void stop() {
    active_ = false;
    on_close_ = nullptr;
  }
  // Ends the read (cancels it) and waits until it has returned. No write may be pending.
  boost::asio::awaitable<void> settle() {
    stop();
    if (!reading_) co_return;
    // A read that completed with bytes before the cancel below would start
    // another one that nothing cancels: the loop checks settling_ first.
    settling_ = true;
    boost::system::error_code ec;
    beast::get_lowest_layer(s_).socket().cancel(ec);
    settled_.expires_at(std::chrono::steady_clock::time_point::max());
    while (reading_) co_await settled_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  }
  // The read saw the end of the stream or an error: the connection is done.
  bool gone() const { return gone_; }

 private:
  boost::asio::awaitable<void> read_loop() {
    boost::system::error_code ec;
    while (!settling_ && buf_->size() < k_max_buffered) {
      const size_t n = co_await s_.async_read_some(buf_->prepare(4096), boost::asio::redirect_error(boost::asio::use_awaitable, ec));
      buf_->commit(n);
      if (!ec) continue;
      if (ec != boost::asio::error::operation_aborted) {
        gone_ = true;
        if (active_ && on_close_) {
          active_ = false;
          auto f = std::move(on_close_);
          f();
        }
      }
      break;
    }
    reading_ = false;
    settled_.cancel();
  }

  Stream& s_;
  beast::flat_buffer* buf_;
  boost::asio::steady_timer settled_;
  std::function<void()> on_close_;
  bool active_ = false, reading_ = false, gone_ = false, settling_ = false;
};

// http_io over the connection's stream. Each write is bounded by --write-timeout.
template <class Stream>
class http_stream_io final : public http_io {
 public:
  // buf: the session's buffer, where bytes read while watching go (nullptr: no watch).
  http_stream_io(Stream& s, const server_context& ctx, bool keep_alive, beast::flat_buffer* buf = nullptr)
      : s_(s), ctx_(ctx), keep_alive_(keep_alive), watch_(s, buf) {}

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
  void watch_disconnect(std::function<void()> on_close) override { watch_.start(std::move(on_close)); }
  void unwatch() override { watch_.stop(); }
  bool keep_alive() const override { return keep_alive_; }
  // After the handler: ends the watch's read (see stream_watch::settle).
  boost::asio::awaitable<void> settle() { co_await watch_.settle(); }
  bool client_gone() const { return watch_.gone(); }

 private:
  template <class Body>
  void decorate(http_exchange& ex, http::response<Body>& res) {
    stamp_response(ctx_, ex, res.base());
    res.keep_alive(keep_alive_);
  }
  void arm_write_timer() { beast::get_lowest_layer(s_).expires_after(seconds_to_duration(ctx_.opts.write_timeout_s)); }

  Stream& s_;
  const server_context& ctx_;
  bool keep_alive_;
  stream_watch<Stream> watch_;
};

// Writes a small error response on a connection that is about to be closed.
template <class Stream>
boost::asio::awaitable<void> write_early_error(Stream& s, server_context& ctx, http_exchange& ex, early_error e) {
  http_stream_io<Stream> io(s, ctx, false);
  // Built before the co_await: GCC 12 may destroy a braced temporary of a
  // co_await expression twice.
  const api::api_error err{static_cast<int>(e.status), e.message, "", "", e.code};
  auto res = make_api_error_response(api_of_path(path_of(ex.req.target())), err, ex.req.version() ? ex.req.version() : 11);
  co_await io.write_response(ex, std::move(res));
}

// Reads one request head into the parser: the raw bytes up to the blank line
// (obs-fold is refused there), then the parser. buf may already hold bytes;
// the caller arms the deadline. limit: --max-header-bytes.
template <class Stream>
boost::asio::awaitable<head_read> read_request_head(Stream& stream, beast::flat_buffer& buf,
                                                    http::request_parser<http::string_body>& parser, size_t limit) {
  namespace asio = boost::asio;
  head_read r;
  for (;;) {
    const auto data = buf.cdata();
    const head_scan scan = scan_request_head(std::string_view(static_cast<const char*>(data.data()), data.size()), limit);
    if (scan.obs_fold) {
      r.obs_fold = true;
      co_return r;
    }
    if (scan.end != std::string_view::npos) {
      const size_t n = parser.put(asio::buffer(data.data(), scan.end), r.ec);
      buf.consume(n);
      if (!r.ec && !parser.is_header_done()) r.ec = http::error::bad_line_ending;
      co_return r;
    }
    if (scan.too_large) {
      r.ec = http::error::header_limit;
      co_return r;
    }
    const size_t n = co_await stream.async_read_some(buf.prepare(4096), asio::redirect_error(asio::use_awaitable, r.ec));
    if (r.ec) co_return r;
    buf.commit(n);
  }
}

// Reads the rest of a request after its head: refuses a body over the limit,
// answers Expect: 100-continue, reads the body (--body-timeout). Returns false
// when the connection must close (an error was answered, or the client is gone).
template <class Stream>
boost::asio::awaitable<bool> read_request_body(server_context& ctx, Stream& stream, beast::flat_buffer& buf,
                                               http::request_parser<http::string_body>& parser, http_exchange& ex) {
  namespace asio = boost::asio;
  auto& lowest = beast::get_lowest_layer(stream);
  if (auto too_large = declared_body_too_large(parser.content_length(), ctx.opts)) {
    co_await write_early_error(stream, ctx, ex, std::move(*too_large));
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
  bool timed_out = false;
  {
    read_deadline dl(lowest.socket(), ctx.opts.body_timeout_s);
    co_await http::async_read(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
    timed_out = dl.fired();
  }
  if (!ec) co_return true;
  if (auto answer = body_error_answer(ec, timed_out, ctx.opts)) co_await write_early_error(stream, ctx, ex, std::move(*answer));
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

// Waits --idle-timeout for the first byte of the next request on a keep-alive
// connection. False when the connection closes instead, without an answer:
// the server drains, or the client closed, reset, stayed idle too long, or the
// connection was evicted for a new one (--max-connections).
template <class Stream>
boost::asio::awaitable<bool> await_next_request(server_context& ctx, Stream& stream, beast::flat_buffer& buf) {
  namespace asio = boost::asio;
  if (ctx.draining.load()) co_return false;
  auto& lowest = beast::get_lowest_layer(stream);
  lowest.expires_after(seconds_to_duration(ctx.opts.idle_timeout_s));
  boost::system::error_code ec;
  size_t n = 0;
  {
    // Closed by close_oldest() when a new connection needs the slot.
    idle_registration idle(ctx.idle, co_await asio::this_coro::executor, lowest.socket());
    n = co_await stream.async_read_some(buf.prepare(4096), asio::redirect_error(asio::use_awaitable, ec));
    if (idle.evicted()) spdlog::debug("closing an idle keep-alive connection: --max-connections {} reached", ctx.opts.max_connections);
  }
  if (ec) co_return false;
  buf.commit(n);
  co_return true;
}

// What the session does after one request.
enum class session_step : uint8_t {
  next,             // keep-alive: read the next request
  close,            // close (the client is gone, or did not want keep-alive)
  close_lingering,  // an early error was answered: close lingering
  handed_off,       // the stream went to a WebSocket session
};

// Answers a complete request (body read): a WebSocket upgrade goes to
// ws_responses.h (or is denied), anything else to the router.
template <class Stream>
boost::asio::awaitable<session_step> answer_request(server_context& ctx, Stream& stream, beast::flat_buffer& buf, http_exchange& ex) {
  if (beast::websocket::is_upgrade(ex.req)) {
    if (auto denial = check_ws_upgrade(ctx, ex)) {
      http_stream_io<Stream> io(stream, ctx, false);
      co_await io.write_response(ex, std::move(*denial));
      log_access(ctx, ex);
      co_return session_step::close;
    }
    co_await run_ws_responses(ctx, std::move(stream), std::move(ex));
    co_return session_step::handed_off;
  }
  const bool keep_alive = keep_alive_after(ex.req, ctx);
  http_stream_io<Stream> io(stream, ctx, keep_alive, &buf);
  bool write_failed = false;
  try {
    co_await handle_http_request(ctx, ex, io);
  } catch (const std::exception& e) {
    spdlog::debug("{}: connection lost: {}", ex.request_id, e.what());
    write_failed = true;
  }
  co_await io.settle();
  log_access(ctx, ex);
  co_return write_failed || io.client_gone() || !keep_alive ? session_step::close : session_step::next;
}

// Reads one request (its head must be complete by head_deadline), checks and
// admits its head, reads its body and answers it. first: the connection's
// first request (a silent new connection is closed without an answer).
template <class Stream>
boost::asio::awaitable<session_step> serve_one_request(server_context& ctx, Stream& stream, beast::flat_buffer& buf, bool first,
                                                       std::chrono::steady_clock::time_point head_deadline) {
  using clock = std::chrono::steady_clock;
  auto& lowest = beast::get_lowest_layer(stream);
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
    auto answer = head_error_answer(hr, head_timed_out, ctx.opts);
    if (!answer || silent) co_return session_step::close;
    // What the parser has of the head (the request line at least, when it
    // came): the answer takes the shape of the API of its path (a 413 decided
    // on the Content-Length of a /v1/messages request is Anthropic's).
    ex.req.base() = parser.get().base();
    co_await write_early_error(stream, ctx, ex, std::move(*answer));
    log_access(ctx, ex);
    co_return session_step::close_lingering;
  }
  ex.req.base() = parser.get().base();
  // RFC 9112, then Origin and API key: before any body byte is read or 100 Continue sent.
  if (auto refused = refuse_head(ctx, parser.get().base())) {
    co_await write_early_error(stream, ctx, ex, std::move(*refused));
    log_access(ctx, ex);
    co_return session_step::close_lingering;
  }
  if (!co_await read_request_body(ctx, stream, buf, parser, ex)) {
    log_access(ctx, ex);
    co_return session_step::close_lingering;
  }
  ex.req = parser.release();
  if (auto it = ex.req.find("X-Request-Id"); it != ex.req.end() && is_sane_request_id(it->value())) {
    ex.request_id = std::string(it->value());
  }
  co_return co_await answer_request(ctx, stream, buf, ex);
}

// Runs the connection until it closes. The stream is already connected (and,
// for TLS, handshaken). Never throws.
//
// Deadlines: the first request's head must be complete --header-timeout after
// the connection starts here (accept, or the end of the TLS handshake), so a
// silent connection gives its slot back; a later request on the connection
// may wait --idle-timeout for its first byte, then has --header-timeout.
// Pipelined requests already in the buffer are read without an idle wait.
template <class Stream>
boost::asio::awaitable<void> run_http_session(server_context& ctx, Stream stream) {
  using clock = std::chrono::steady_clock;
  beast::flat_buffer buf;
  bool linger = false;
  for (bool first = true;; first = false) {
    // The head deadline: from now for the first request, else from the first byte.
    auto head_deadline = clock::now() + seconds_to_duration(ctx.opts.header_timeout_s);
    if (!first && buf.size() == 0) {
      if (!co_await await_next_request(ctx, stream, buf)) break;
      head_deadline = clock::now() + seconds_to_duration(ctx.opts.header_timeout_s);
    }
    const session_step step = co_await serve_one_request(ctx, stream, buf, first, head_deadline);
    if (step == session_step::handed_off) co_return;
    if (step == session_step::next) continue;
    linger = step == session_step::close_lingering;
    break;
  }
  co_await close_session(stream, linger);
}

}  // namespace spate
