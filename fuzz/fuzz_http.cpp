// libFuzzer target: the HTTP request path of the server up to the router,
// without a socket: the head is cut where the session cuts it
// (find_head_end), obs-fold is refused (has_obs_fold), Beast's parser with
// the server's limits parses the head and the body, then the RFC 9112 checks
// (check_request_head) and the CORS policy run on the result.
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/cors.h"
#include "server/http_request_checks.h"

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
  if (check_request_head(p.get().base())) return 0;
  (void)expects_continue(p.get().base());
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
