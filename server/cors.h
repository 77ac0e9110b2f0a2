// Cross-origin resource sharing, configured as vLLM configures it
// (--allowed-origins, --allowed-methods, --allowed-headers, each a JSON list,
// "*" meaning any; --allow-credentials), with the behaviour of the CORS
// middleware vLLM uses:
//
//   request without Origin             no CORS headers
//   Origin allowed                     Access-Control-Allow-Origin: "*" when any
//                                      origin is allowed and credentials are
//                                      not, else the origin itself (+ Vary: Origin);
//                                      Access-Control-Allow-Credentials: true if set
//   Origin not allowed                 no CORS headers (the browser blocks it)
//   preflight (OPTIONS + Origin +      204 with the allowed origin, methods,
//   Access-Control-Request-Method)     headers (the requested ones when "*")
//                                      and Max-Age; 400 naming what is not allowed.
//                                      Answered before authentication: a browser
//                                      never sends credentials on a preflight.
//
// Thread-safety: immutable after construction; any thread.
#pragma once

#include <boost/beast/http.hpp>
#include <optional>
#include <string>
#include <vector>

namespace spate {

namespace http = boost::beast::http;

struct cors_config {
  std::vector<std::string> allowed_origins = {"*"};
  std::vector<std::string> allowed_methods = {"*"};
  std::vector<std::string> allowed_headers = {"*"};
  bool allow_credentials = false;
};

class cors_policy {
 public:
  explicit cors_policy(cors_config cfg);

  // True when --allowed-origins lets `origin` use the server ("*": any).
  bool allows_origin(std::string_view origin) const { return origin_allowed(origin); }

  // True for a CORS preflight request.
  static bool is_preflight(const http::request_header<>& req);

  // The answer to a preflight (204, or 400 with the reason as plain text).
  http::response<http::string_body> preflight(const http::request_header<>& req) const;

  // Adds the CORS headers an actual (non-preflight) response carries.
  template <class Body>
  void decorate(const http::request_header<>& req, http::response<Body>& res) const {
    decorate_header(req, res.base());
  }
  void decorate_header(const http::request_header<>& req, http::response_header<>& res) const;

 private:
  bool origin_allowed(std::string_view origin) const;
  bool method_allowed(std::string_view method) const;
  // The first requested header that is not allowed, if any.
  std::optional<std::string> disallowed_header(std::string_view requested) const;
  void set_allow_origin(std::string_view origin, http::response_header<>& res) const;

  cors_config cfg_;
  bool any_origin_ = false, any_method_ = false, any_header_ = false;
};

// Parses a JSON list of strings (the flags' syntax), e.g. ["*"] or
// ["https://a.example", "https://b.example"]. Returns "" or an error message
// naming `flag`.
std::string parse_json_string_list(const std::string& text, const char* flag, std::vector<std::string>& out);

}  // namespace spate
