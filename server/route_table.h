// The server's routes as data: each route is a method set, a path pattern, an
// access rule (API key or public) and a handler. The router (api_router.cpp)
// dispatches by a lookup here; the session's head admission asks it which
// paths are public (request_admission.h).
//
// Path patterns (matched against the path without its query):
//   "/v1/models"           literal segments, compared exactly (case-sensitive);
//   "/x/{name}"            a parameter: one non-empty segment (no '/');
//   "/v1/models/{id...}"   a rest parameter, last only: everything after the
//                          '/' before it, '/' included, possibly empty (model
//                          names like "org/model" are one id).
// A GET route answers HEAD too (http_io sends the header only).
//
// Lookup: the first route (in the order added) whose pattern matches the path
// and whose methods include the request's. When patterns match but no method
// does: method_not_allowed, with the Allow value of every matching route's
// methods (in the fixed order GET, HEAD, POST, PUT, PATCH, DELETE). No pattern
// matches: not_found.
//
// Thread-safety: add() while building, before serving; match() and
// is_public() are const and safe from any thread afterwards.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/verb.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/http_io.h"
#include "server/request_admission.h"

namespace spate {

struct server_context;

// Path parameters of a match: views into the table (names) and the matched
// path (values), valid while both live and the table is not added to.
struct route_params {
  std::vector<std::pair<std::string_view, std::string_view>> values;  // (name, value)
  // The value of parameter name; "" when the pattern has none of that name.
  std::string_view get(std::string_view name) const;
};

enum class route_auth : uint8_t {
  api_key,            // the API key is required (when keys are configured), in Authorization: Bearer
  api_key_anthropic,  // the same, also accepted in Anthropic's x-api-key header (the routes Anthropic's clients call)
  open,               // public: probes, scrapers, the chat page's files
};

// Runs one request of the route and writes exactly one response through io;
// throws only when the client is gone (http_io's contract).
using route_handler =
    std::function<boost::asio::awaitable<void>(server_context&, http_exchange&, http_io&, const route_params&)>;

struct route {
  std::vector<http::verb> methods;  // non-empty; get implies head
  std::string pattern;
  route_auth auth = route_auth::api_key;
  route_handler handler;
};

struct route_match {
  enum class outcome : uint8_t { found, method_not_allowed, not_found };
  outcome result = outcome::not_found;
  const route* found = nullptr;  // outcome::found: the route (owned by the table)
  route_params params;           // outcome::found: its parameters (raw: percent_decode them)
  std::string allow;             // outcome::method_not_allowed: the Allow header's value
  bool is_public = false;        // some route matching the path and the method is route_auth::open (no route for the method: the path's)
};

class route_table final : public public_routes {
 public:
  // Throws std::invalid_argument on a malformed pattern (not starting with
  // '/', an unclosed or empty "{}", a rest parameter before the end), no
  // methods, or a method already routed for an identical pattern.
  void add(route r);

  route_match match(http::verb method, std::string_view path) const;
  // True when a route matching path is public (any method): such requests
  // need no API key, and are still served while the server drains.
  bool is_public(http::verb method, std::string_view path) const override;
  // True when a route matching path (any method) is route_auth::api_key_anthropic.
  bool takes_x_api_key(std::string_view path) const override;
  std::span<const route> routes() const { return routes_; }

 private:
  struct segment {
    enum class kind : uint8_t { literal, param, rest };
    kind k;
    std::string text;  // literal: the segment; param/rest: the name
  };
  static std::vector<segment> compile(std::string_view pattern);
  static bool match_path(const std::vector<segment>& segs, std::string_view path, route_params* params);

  std::vector<route> routes_;
  std::vector<std::vector<segment>> compiled_;  // routes_[i]'s pattern
};

// A path parameter's value percent-decoded (RFC 3986 2.1; '+' stays '+'), or
// nullopt when a '%' is not followed by two hex digits or the decoded bytes
// are not well-formed UTF-8 (the handler answers 400).
std::optional<std::string> percent_decode(std::string_view raw);

// "GET, HEAD, POST": the methods in the fixed order above, get implying head.
std::string allow_header_value(std::span<const http::verb> methods);

}  // namespace spate
