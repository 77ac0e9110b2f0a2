// libFuzzer target: the HTTP request path of the server up to the router,
// without a socket: the head is cut where the session cuts it
// (find_head_end), obs-fold is refused (has_obs_fold), Beast's parser with
// the server's limits parses the head, then the RFC 9112 checks
// (check_request_head, Transfer-Encoding included) and the head-level
// admission (admit_request_head: Origin and API key, with and without keys)
// run on it as the session runs them, before the body; then the body and the
// CORS policy. Invariants checked (abort on violation): a head that passes
// check_request_head has unambiguous framing (no Transfer-Encoding other than
// "chunked" alone, never together with Content-Length); an admitted keyed
// request either names a public route, is a CORS preflight or OPTIONS, or
// carries one of the keys; a keyless admitted request announces no body.
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/cors.h"
#include "server/http_request_checks.h"
#include "server/request_admission.h"
#include "server/route_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spate;
  namespace http = boost::beast::http;
  static const cors_policy cors{cors_config{{"https://a.example"}, {"GET", "POST"}, {"authorization"}, true}};
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t end = find_head_end(in.substr(0, std::min<size_t>(in.size(), 16 << 10)));
  if (end == std::string_view::npos || has_obs_fold(in.substr(0, end))) return 0;
  http::request_parser<http::string_body> p;
  p.header_limit(16 << 10);
  p.body_limit(64 << 10);
  boost::system::error_code ec;
  const size_t n = p.put(boost::asio::buffer(in.data(), end), ec);
  if (ec || !p.is_header_done()) return 0;
  const auto& h = p.get().base();
  if (check_request_head(h)) return 0;
  if (h.count(http::field::transfer_encoding) > 0) {
    // Passed: exactly one coding, "chunked", and no Content-Length.
    if (h.count(http::field::content_length) > 0 || !p.chunked()) std::abort();
  }
  static const std::vector<std::string> keys = {"k1"};
  static const std::vector<std::string> no_keys;
  // The server's public routes (api_routes() with the chat page; its handlers
  // are coroutines, which this build cannot compile): the matcher is fuzzed too.
  static const route_table open_routes = [] {
    route_table t;
    for (const char* p : {"/", "/index.html", "/ui/{file...}", "/health", "/ready", "/metrics"}) {
      t.add({{http::verb::get}, p, route_auth::open, nullptr});
    }
    t.add({{http::verb::get}, "/v1/models/{id...}", route_auth::api_key_anthropic, nullptr});
    t.add({{http::verb::post}, "/v1/completions", route_auth::api_key, nullptr});
    return t;
  }();
  static const route_table no_routes;
  const auto denied = admit_request_head(h, keys, cors, open_routes);
  (void)admit_request_head(h, no_keys, cors, no_routes);
  if (!denied && !cors_policy::is_preflight(h) && h.method() != http::verb::options) {
    std::string_view path = h.target();
    path = path.substr(0, path.find('?'));
    const bool has_key = bearer_key_accepted(keys, h) || ws_key_accepted(keys, h) ||
                         (open_routes.takes_x_api_key(path) && x_api_key_accepted(keys, h));
    if (!has_key && !open_routes.is_public(h.method(), path)) std::abort();  // admitted without a key
    if (open_routes.match(h.method(), path).is_public != open_routes.is_public(h.method(), path)) std::abort();
  }
  if (!denied && has_body(h) &&
      !(bearer_key_accepted(keys, h) || ws_key_accepted(keys, h) ||
        (open_routes.takes_x_api_key(path_of(h.target())) && x_api_key_accepted(keys, h)))) {
    std::abort();  // a keyless request would make the server buffer its body
  }
  if (denied) return 0;  // the session answers and closes: the body is never read
  (void)expects_continue(h);
  // The body, fed as the session's reads would deliver it, until done or an error.
  for (size_t at = n; !p.is_done() && at < in.size();) {
    const size_t used = p.put(boost::asio::buffer(in.data() + at, in.size() - at), ec);
    if (ec || used == 0) break;
    at += used;
  }
  const auto& req = p.get();
  if (cors_policy::is_preflight(req.base())) {
    (void)cors.preflight(req.base());
  } else {
    http::response<http::string_body> res{http::status::ok, 11};
    cors.decorate(req.base(), res);
  }
  return 0;
}
