#include "server/request_admission.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "server/ws_subprotocol.h"

namespace spate {

namespace {

// Constant time in the keys' content; the length check leaks only the length.
bool key_in(const std::vector<std::string>& keys, std::string_view v) {
  bool ok = false;
  for (const auto& key : keys) {
    const bool same = v.size() == key.size() && CRYPTO_memcmp(v.data(), key.data(), key.size()) == 0;
    ok = ok || same;
  }
  return ok;
}

}  // namespace

std::string_view path_of(std::string_view target) {
  const auto q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

bool has_body(const http::request_header<>& h) {
  if (h.count(http::field::transfer_encoding) > 0) return true;
  const auto it = h.find(http::field::content_length);
  return it != h.end() && it->value().find_first_not_of("0") != std::string_view::npos;
}

bool bearer_key_accepted(const std::vector<std::string>& keys, const http::request_header<>& h) {
  // Anthropic's clients send the key as x-api-key.
  if (const auto x = h.find("x-api-key"); x != h.end() && key_in(keys, x->value())) return true;
  const auto it = h.find(http::field::authorization);
  if (it == h.end()) return false;
  std::string_view v = it->value();
  constexpr std::string_view bearer = "Bearer ";
  if (v.size() < bearer.size() || !boost::beast::iequals(v.substr(0, bearer.size()), bearer)) return false;
  v.remove_prefix(bearer.size());
  return key_in(keys, v);
}

bool ws_key_accepted(const std::vector<std::string>& keys, const http::request_header<>& h) {
  if (bearer_key_accepted(keys, h)) return true;
  const auto it = h.find(http::field::sec_websocket_protocol);
  if (it == h.end()) return false;
  const auto key = subprotocol_api_key(it->value());
  return key && key_in(keys, *key);
}

bool is_same_origin(std::string_view origin, const http::request_header<>& h) {
  const auto host = h.find(http::field::host);
  if (host == h.end() || host->value().empty()) return false;
  for (std::string_view scheme : {"http://", "https://"}) {
    if (origin.size() > scheme.size() && boost::beast::iequals(origin.substr(0, scheme.size()), scheme)) {
      return boost::beast::iequals(origin.substr(scheme.size()), host->value());
    }
  }
  return false;
}

std::optional<head_denial> admit_request_head(const http::request_header<>& h, const std::vector<std::string>& keys,
                                              const cors_policy& cors, const public_routes& routes) {
  if (cors_policy::is_preflight(h)) {
    if (keys.empty() || !has_body(h)) return std::nullopt;
    return head_denial{http::status::payload_too_large, "a CORS preflight carries no body", ""};
  }
  if (const auto it = h.find(http::field::origin); it != h.end()) {
    const std::string_view origin = it->value();
    if (!cors.allows_origin(origin) && !is_same_origin(origin, h)) {
      return head_denial{http::status::forbidden,
                         "the origin '" + std::string(origin.substr(0, 256)) + "' is not allowed (--allowed-origins)",
                         "origin_not_allowed"};
    }
  }
  if (keys.empty()) return std::nullopt;
  if (h.method() == http::verb::options || routes.is_public(h.method(), path_of(h.target()))) {
    // Served without a key, so never worth a body: a keyless client must not make the server buffer one.
    if (!has_body(h)) return std::nullopt;
    return head_denial{http::status::payload_too_large,
                       "a request served without an API key (a public route, OPTIONS) carries no body", ""};
  }
  const bool ok = boost::beast::websocket::is_upgrade(h) ? ws_key_accepted(keys, h) : bearer_key_accepted(keys, h);
  if (ok) return std::nullopt;
  return head_denial{http::status::unauthorized, "missing or invalid API key", "invalid_api_key"};
}

}  // namespace spate
