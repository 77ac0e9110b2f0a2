#include "server/http_request_checks.h"

#include <boost/beast/core/string.hpp>
#include <vector>

namespace spate {

size_t find_head_end(std::string_view data) {
  // Leading empty lines before the request line are tolerated (RFC 9112 2.2).
  size_t start = 0;
  while (start < data.size() && (data[start] == '\r' || data[start] == '\n')) ++start;
  for (size_t i = data.find('\n', start); i != std::string_view::npos; i = data.find('\n', i + 1)) {
    // The line after this LF is empty: "\n\n" or "\n\r\n".
    if (i + 1 < data.size() && data[i + 1] == '\n') return i + 2;
    if (i + 2 < data.size() && data[i + 1] == '\r' && data[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

bool has_obs_fold(std::string_view head) {
  // Skip the empty lines before the request line, then look at the first byte
  // of every following line except the final empty one.
  size_t start = 0;
  while (start < head.size() && (head[start] == '\r' || head[start] == '\n')) ++start;
  for (size_t i = head.find('\n', start); i != std::string_view::npos && i + 1 < head.size(); i = head.find('\n', i + 1)) {
    const char c = head[i + 1];
    if (c == ' ' || c == '\t') return true;
  }
  return false;
}

bool expects_continue(const http::request_header<>& h) {
  if (h.version() < 11) return false;
  const auto it = h.find(http::field::expect);
  return it != h.end() && boost::beast::iequals(it->value(), "100-continue");
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<head_error> check_transfer_encoding(const http::request_header<>& h) {
  if (h.count(http::field::transfer_encoding) == 0) return std::nullopt;
  auto bad = [](std::string why) { return head_error{http::status::bad_request, "Transfer-Encoding: " + std::move(why)}; };
  if (h.version() < 11) return bad("not allowed in an HTTP/1.0 request");
  if (h.count(http::field::content_length) > 0) return bad("not allowed together with Content-Length");
  // The codings of every field, in order (a list may span several fields).
  std::vector<std::string_view> codings;
  // Every field in arrival order (Beast's equal_range assumes equal names are adjacent).
  for (const auto& field : h) {
    if (field.name() != http::field::transfer_encoding) continue;
    std::string_view v = field.value();
    for (;;) {
      const size_t comma = v.find(',');
      codings.push_back(trim_ows(v.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  size_t n_chunked = 0;
  for (std::string_view c : codings) {
    if (c.empty()) return bad("an empty transfer coding");
    if (boost::beast::iequals(c, "chunked")) ++n_chunked;
  }
  if (!boost::beast::iequals(codings.back(), "chunked")) {
    return bad("'chunked' must be the final transfer coding of a request (RFC 9112 6.3), got '" + std::string(codings.back()) + "'");
  }
  if (n_chunked > 1) return bad("'chunked' applied more than once");
  if (codings.size() > 1) {
    return head_error{http::status::not_implemented,
                      "Transfer-Encoding: the transfer coding '" + std::string(codings.front()) + "' is not supported; send 'chunked' alone"};
  }
  return std::nullopt;
}

std::optional<head_error> check_request_head(const http::request_header<>& h) {
  if (h.version() >= 11) {
    const size_t n_host = h.count(http::field::host);
    if (n_host == 0) return head_error{http::status::bad_request, "an HTTP/1.1 request needs a Host header"};
    if (n_host > 1) return head_error{http::status::bad_request, "more than one Host header"};
  }
  // HTTP/1.0 requests' Expect is ignored (RFC 9110 10.1.1).
  if (h.version() >= 11 && h.count(http::field::expect) > 0 && !expects_continue(h)) {
    return head_error{http::status::expectation_failed, "only 'Expect: 100-continue' is supported"};
  }
  return check_transfer_encoding(h);
}

}  // namespace spate
