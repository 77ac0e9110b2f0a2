// RFC 9112 checks on a request head that Beast's parser lets through, kept
// apart from the socket code so they are testable (and fuzzable) alone.
//
// The session (http_session.h) reads the raw head itself up to its blank line,
// runs find_head_end() and has_obs_fold() on those bytes, then feeds them to
// Beast's parser, and runs check_request_head() on the parsed header.
//
// Thread-safety: pure functions.
#pragma once

#include <boost/beast/http.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace spate {

namespace http = boost::beast::http;

// s without the spaces and tabs around it (RFC 9110's OWS), e.g. an element of
// a comma-separated field value.
std::string_view trim_ows(std::string_view s);

// The size of the request head (request line, fields and the blank line that
// ends them) at the start of data, or npos while the blank line has not come.
// A bare LF ends a line too, so a head of bare-LF lines is found and then
// rejected by the parser rather than waited on until the size limit.
size_t find_head_end(std::string_view data);

// True when a field line of the head starts with a space or a tab: obsolete
// line folding (RFC 9112 section 5.2), which a server must reject with 400.
bool has_obs_fold(std::string_view head);

// A rejected request: status and message for the client.
struct head_error {
  http::status status;
  std::string message;
};

// Checks the parsed header, before any body byte is read:
//   - an HTTP/1.1 request has exactly one Host field (RFC 9112 3.2: else 400);
//   - an Expect other than 100-continue gets 417;
//   - the framing is unambiguous (check_transfer_encoding).
// Every refusal closes the connection (the session lingers, then closes), so
// bytes after a refused head are never parsed as another request.
std::optional<head_error> check_request_head(const http::request_header<>& h);

// Transfer-Encoding, as RFC 9112 6.1 and 6.3 want it for a request, so that
// no body can be read two ways (request smuggling):
//   - absent: the body is Content-Length bytes (or none);
//   - present, all fields' codings together, case-insensitive:
//       "chunked" alone                        accepted: a chunked body;
//       chunked not the final coding, chunked
//       twice, an empty coding                 400 (the length cannot be determined);
//       other codings before a final chunked   501 (we decode no gzip, ...);
//       together with Content-Length           400;
//       in an HTTP/1.0 request                 400 (1.0 has no transfer codings).
std::optional<head_error> check_transfer_encoding(const http::request_header<>& h);

// True when the client asked for "Expect: 100-continue" (HTTP/1.1 only).
bool expects_continue(const http::request_header<>& h);

}  // namespace spate
