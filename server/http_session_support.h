// The parts of an HTTP session (http_session.h) that do not depend on the
// stream type, compiled once: the read deadline (on the connection's TCP
// socket, under TLS too), the decisions taken on a request
// (limits, admission, keep-alive) and the answers to early errors.
//
// Thread-safety: the classes are bound to the connection's strand; the
// functions are pure, or read only server_context's thread-safe members.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http.hpp>
#include <boost/optional.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/http_io.h"
#include "server/serve_options.h"
#include "server/server_context.h"

namespace spate {

inline std::chrono::steady_clock::duration seconds_to_duration(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

// A deadline that cancels (not closes) the socket's pending operations, so a
// timed-out read can still be answered with 408 before the connection closes.
// Strand-bound: constructed and destroyed on the socket's strand.
class read_deadline {
 public:
  read_deadline(boost::asio::ip::tcp::socket& sock, double seconds);
  ~read_deadline();
  read_deadline(const read_deadline&) = delete;
  read_deadline& operator=(const read_deadline&) = delete;
  bool fired() const { return state_->fired; }

 private:
  struct state {
    bool fired = false, done = false;
  };
  std::shared_ptr<state> state_ = std::make_shared<state>();
  boost::asio::steady_timer timer_;
};

// An answer given before the request reaches the router (4xx); the connection
// then closes lingering.
struct early_error {
  http::status status;
  std::string message;
  std::string code = {};  // the error body's "code" ("" -> null)
};

// The header fields every response carries: Server, X-Request-Id and the CORS
// headers; records the status in ex for the access log.
void stamp_response(const server_context& ctx, http_exchange& ex, http::response_header<>& res);

// Where the request head ends in the bytes read so far (the raw bytes up to
// the blank line; at most limit bytes are searched), whether it uses obs-fold
// (which Beast would accept), or that more than limit bytes came without one.
struct head_scan {
  size_t end = std::string_view::npos;  // npos: incomplete
  bool obs_fold = false;                // only when end != npos
  bool too_large = false;               // only when end == npos
};
head_scan scan_request_head(std::string_view have, size_t limit);

// The outcome of reading one request head. obs_fold: refused before parsing.
struct head_read {
  boost::system::error_code ec;
  bool obs_fold = false;
};

// The answer to a failed head read, or none (the client is gone).
std::optional<early_error> head_error_answer(const head_read& r, bool timed_out, const cli::serve_options& opts);
// 413 when the head's Content-Length is over --max-body-bytes.
std::optional<early_error> declared_body_too_large(boost::optional<uint64_t> content_length, const cli::serve_options& opts);
// The answer to a failed body read (413, 408, 400), or none (the client is gone).
std::optional<early_error> body_error_answer(const boost::system::error_code& ec, bool timed_out, const cli::serve_options& opts);
// The refusal of a request head before its body: RFC 9112 checks
// (http_request_checks.h), then Origin and API key (request_admission.h, the
// public paths from ctx.routes). None: the request may proceed.
std::optional<early_error> refuse_head(const server_context& ctx, const http::request_header<>& h);
// Whether the connection stays open after answering req: the client's wish
// (HTTP/1.1 default, Connection: close/keep-alive), and never while draining
// (a request on a connection opened before the drain is answered, then the
// connection closes).
bool keep_alive_after(const http::request<http::string_body>& req, const server_context& ctx);

// Bounds of the lingering close after an early error (nginx's lingering_close):
// what a client still sends (the rest of an over-long body) is read and
// dropped, so that it reads our answer instead of a reset.
inline constexpr double k_linger_s = 5.0;                     // at most this long in all
inline constexpr uint64_t k_linger_max_bytes = 256ull << 20;  // and at most this much

}  // namespace spate
