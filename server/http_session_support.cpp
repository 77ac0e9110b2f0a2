#include "server/http_session_support.h"

#include <boost/asio/ssl/error.hpp>

#include "server/http_request_checks.h"
#include "server/request_admission.h"

namespace spate {

namespace asio = boost::asio;

// ---- read_deadline ----

read_deadline::read_deadline(asio::ip::tcp::socket& sock, double seconds) : timer_(sock.get_executor()) {
  timer_.expires_after(seconds_to_duration(seconds));
  timer_.async_wait([st = state_, &sock](boost::system::error_code ec) {
    if (ec || st->done) return;  // cancelled: the read finished in time
    st->fired = true;
    boost::system::error_code ignored;
    sock.cancel(ignored);
  });
}

read_deadline::~read_deadline() {
  state_->done = true;
  timer_.cancel();
}

// ---- decisions without I/O ----

void stamp_response(const server_context& ctx, http_exchange& ex, http::response_header<>& res) {
  res.set(http::field::server, "spate");
  res.set("X-Request-Id", ex.request_id);
  ctx.cors.decorate_header(ex.req.base(), res);
  ex.status = res.result_int();
}

head_scan scan_request_head(std::string_view have, size_t limit) {
  head_scan s;
  const size_t end = find_head_end(have.substr(0, std::min(have.size(), limit + 1)));
  if (end != std::string_view::npos) {
    s.end = end;
    s.obs_fold = has_obs_fold(have.substr(0, end));
  } else {
    s.too_large = have.size() > limit;
  }
  return s;
}

std::optional<early_error> head_error_answer(const head_read& r, bool timed_out, const cli::serve_options& opts) {
  const auto& ec = r.ec;
  if (r.obs_fold) return early_error{http::status::bad_request, "obsolete line folding in the request header"};
  if (timed_out) return early_error{http::status::request_timeout, "timed out reading the request header"};
  if (ec == http::error::body_limit) {  // Content-Length over the limit, seen with the header
    return early_error{http::status::payload_too_large,
                       "request body is larger than the limit of " + std::to_string(opts.max_body_bytes) + " bytes"};
  }
  if (ec == http::error::header_limit) {
    return early_error{http::status::request_header_fields_too_large,
                       "request header is larger than " + std::to_string(opts.max_header_bytes) + " bytes"};
  }
  // The client went away (a TLS peer that closes without close_notify reads as stream_truncated).
  if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::operation_aborted || ec == asio::ssl::error::stream_truncated) {
    return std::nullopt;
  }
  return early_error{http::status::bad_request, "malformed HTTP request: " + ec.message()};
}

std::optional<early_error> declared_body_too_large(boost::optional<uint64_t> content_length, const cli::serve_options& opts) {
  if (!content_length || *content_length <= opts.max_body_bytes) return std::nullopt;
  return early_error{http::status::payload_too_large, "request body of " + std::to_string(*content_length) +
                                                          " bytes is larger than the limit of " + std::to_string(opts.max_body_bytes) +
                                                          " bytes"};
}

std::optional<early_error> body_error_answer(const boost::system::error_code& ec, bool timed_out, const cli::serve_options& opts) {
  if (ec == http::error::body_limit) {
    return early_error{http::status::payload_too_large,
                       "request body is larger than the limit of " + std::to_string(opts.max_body_bytes) + " bytes"};
  }
  if (timed_out) return early_error{http::status::request_timeout, "timed out reading the request body"};
  if (ec != http::error::end_of_stream && ec != asio::error::eof && ec != asio::error::connection_reset) {
    return early_error{http::status::bad_request, "malformed HTTP request body: " + ec.message()};
  }
  return std::nullopt;
}

std::optional<early_error> refuse_head(const server_context& ctx, const http::request_header<>& h) {
  if (auto bad = check_request_head(h)) return early_error{bad->status, std::move(bad->message)};
  if (auto denied = admit_request_head(h, *ctx.api_keys(), ctx.cors, ctx.routes)) {
    return early_error{denied->status, std::move(denied->message), std::move(denied->code)};
  }
  return std::nullopt;
}

bool keep_alive_after(const http::request<http::string_body>& req, const server_context& ctx) {
  return req.keep_alive() && !ctx.draining.load();
}

}  // namespace spate
