#include "server/request_admission.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "server/ws_subprotocol.h"
#include "util/hex.h"

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

// Lenient %XX decoding for comparisons (a bad escape stays as is); '+' is a space, as forms send it.
std::string query_decode(std::string_view s) {
  constexpr auto hex = hex_digit_value;
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

bool is_credential_name(std::string_view decoded) {
  static constexpr std::string_view k_names[] = {"key",       "api_key",     "api-key", "apikey", "x-api-key",
                                                 "x_api_key", "access_token", "token",  "auth",   "auth_token",
                                                 "authorization", "password", "secret"};
  for (std::string_view n : k_names)
    if (boost::beast::iequals(decoded, n)) return true;
  return false;
}

bool is_one_of(const std::vector<std::string>& keys, std::string_view raw) {
  if (raw.empty()) return false;
  const std::string decoded = query_decode(raw);
  for (const auto& k : keys)
    if (raw == k || decoded == k) return true;
  return false;
}

}  // namespace

std::string redact_target(std::string_view target, const std::vector<std::string>& keys) {
  constexpr std::string_view k_redacted = "REDACTED";
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::string(target);
  std::string out(target.substr(0, q + 1));
  std::string_view query = target.substr(q + 1);
  for (bool first = true;; first = false) {
    const size_t amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    if (!first) out += '&';
    const size_t eq = item.find('=');
    const std::string_view name = item.substr(0, eq);
    if (is_one_of(keys, name)) {
      out += k_redacted;  // the key itself given as a name (or as a bare "?KEY")
      if (eq != std::string_view::npos) out += "=" + std::string(k_redacted);
    } else if (eq != std::string_view::npos && (is_credential_name(query_decode(name)) || is_one_of(keys, item.substr(eq + 1)))) {
      out += std::string(name) + "=" + std::string(k_redacted);
    } else {
      out += item;
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return out;
}

std::string_view path_of(std::string_view target) {
  const auto q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

bool has_body(const http::request_header<>& h) {
  if (h.count(http::field::transfer_encoding) > 0) return true;
  const auto it = h.find(http::field::content_length);
  return it != h.end() && it->value().find_first_not_of("0") != std::string_view::npos;
}

bool x_api_key_accepted(const std::vector<std::string>& keys, const http::request_header<>& h) {
  const auto x = h.find("x-api-key");
  return x != h.end() && key_in(keys, x->value());
}

bool bearer_key_accepted(const std::vector<std::string>& keys, const http::request_header<>& h) {
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
  const bool ok = boost::beast::websocket::is_upgrade(h)
                      ? ws_key_accepted(keys, h)
                      : bearer_key_accepted(keys, h) || (routes.takes_x_api_key(path_of(h.target())) && x_api_key_accepted(keys, h));
  if (ok) return std::nullopt;
  return head_denial{http::status::unauthorized, "missing or invalid API key", "invalid_api_key"};
}

}  // namespace spate
