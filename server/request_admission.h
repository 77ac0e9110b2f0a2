// What is decided on a request's head, before its body is read and before
// "100 Continue" is sent: whether the request's Origin may use the server
// (403) and whether it carries a valid API key (401). A refused request costs
// the server its head only: the session answers, lingers (reading and
// dropping what the client still uploads, bounded) and closes.
//
//   CORS preflight (OPTIONS + Origin +     admitted; the router answers it
//   Access-Control-Request-Method)         (204, or 400 for a disallowed origin),
//                                          413 with a body while keys are configured
//   Origin present, neither allowed by     403 origin_not_allowed (the browser
//   --allowed-origins nor this server's    would not show the answer, but a
//   own origin                             "simple" POST would still run)
//   no API key configured                  admitted
//   other OPTIONS, public route            admitted (OPTIONS: 204 with Allow), but
//   (public_routes::is_public)             413 when the head announces a body: what
//                                          is served without a key is never worth
//                                          buffering a keyless client's upload
//   WebSocket upgrade                      the key in Authorization or in the
//                                          Sec-WebSocket-Protocol, else 401
//   anything else                          the key in Authorization (or, on the
//                                          routes Anthropic's clients call,
//                                          public_routes::takes_x_api_key, in
//                                          x-api-key), else 401
//
// Same origin: an Origin whose host[:port] is the request's Host (any of
// http/https, since a TLS-terminating proxy may sit in front). Browsers send
// Origin on same-origin POSTs too, so the chat page keeps working whatever
// --allowed-origins lists.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <boost/beast/http.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/cors.h"

namespace spate {

namespace http = boost::beast::http;

// A refused head: status, message and error code for the client.
struct head_denial {
  http::status status;
  std::string message;
  std::string code;
};

// The path of a request target: what comes before '?'.
std::string_view path_of(std::string_view target);

// Which paths anyone may call without a key. The server's route table
// (route_table.h) says: /health, /ready, /metrics (probes and scrapers carry
// no key) and, when the chat page is served, its files (the page asks for the
// key itself). Implementations are safe for concurrent const use.
class public_routes {
 public:
  virtual ~public_routes() = default;
  // `path` has no query. Per method: a path may be open for GET (the chat page
  // at /) and need the key for POST (TGI's POST /).
  virtual bool is_public(http::verb method, std::string_view path) const = 0;
  // True when the key may come in Anthropic's x-api-key header on path (no
  // query): /v1/messages, /v1/messages/count_tokens and /v1/models[/{id}],
  // the routes Anthropic's clients call.
  virtual bool takes_x_api_key(std::string_view path) const = 0;
};

// True when the Authorization header is "Bearer <one of keys>" (scheme
// case-insensitive; constant time in the keys' content). keys non-empty.
bool bearer_key_accepted(const std::vector<std::string>& keys, const http::request_header<>& h);

// True when the x-api-key header (Anthropic's) is one of keys (constant time
// in the keys' content). Only where public_routes::takes_x_api_key says.
bool x_api_key_accepted(const std::vector<std::string>& keys, const http::request_header<>& h);

// bearer_key_accepted(), or the key a browser passes in Sec-WebSocket-Protocol
// (ws_subprotocol.h). For WebSocket upgrades only.
bool ws_key_accepted(const std::vector<std::string>& keys, const http::request_header<>& h);

// True when the head announces a body: Transfer-Encoding (checked to be
// chunked), or a Content-Length other than 0. Precondition: check_request_head passed.
bool has_body(const http::request_header<>& h);

// True when origin ("scheme://host[:port]") names the server the request was
// sent to (its Host field).
bool is_same_origin(std::string_view origin, const http::request_header<>& h);

// The request target as the logs may show it: every query parameter that
// could carry a credential has its value replaced by "REDACTED": a name
// (percent-decoded, case-insensitive) of key, api_key, api-key, apikey,
// x-api-key, x_api_key, access_token, token, auth, auth_token,
// authorization, password or secret (spate takes no key from the query, but
// clients written for other servers send one there), and any name or value
// that is one of keys (raw or percent-decoded). The path is kept as is.
std::string redact_target(std::string_view target, const std::vector<std::string>& keys);

// The table above. keys: the accepted API keys (empty: no authentication).
std::optional<head_denial> admit_request_head(const http::request_header<>& h, const std::vector<std::string>& keys,
                                              const cors_policy& cors, const public_routes& routes);

}  // namespace spate
