#include "server/cors.h"

#include "server/http_request_checks.h"

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <boost/json.hpp>

namespace spate {

namespace {

constexpr const char* k_all_methods = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT";
constexpr const char* k_max_age_s = "600";

bool contains(const std::vector<std::string>& v, std::string_view s) { return std::find(v.begin(), v.end(), s) != v.end(); }

bool contains_nocase(const std::vector<std::string>& v, std::string_view s) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& x) { return boost::beast::iequals(x, s); });
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

http::response<http::string_body> plain_400(unsigned version, std::string text) {
  http::response<http::string_body> res{http::status::bad_request, version};
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.body() = std::move(text);
  return res;
}

}  // namespace

cors_policy::cors_policy(cors_config cfg) : cfg_(std::move(cfg)) {
  any_origin_ = contains(cfg_.allowed_origins, "*");
  any_method_ = contains(cfg_.allowed_methods, "*");
  any_header_ = contains(cfg_.allowed_headers, "*");
}

bool cors_policy::is_preflight(const http::request_header<>& req) {
  return req.method() == http::verb::options && req.count(http::field::origin) > 0 &&
         req.count(http::field::access_control_request_method) > 0;
}

bool cors_policy::origin_allowed(std::string_view origin) const { return any_origin_ || contains(cfg_.allowed_origins, origin); }

bool cors_policy::method_allowed(std::string_view method) const { return any_method_ || contains_nocase(cfg_.allowed_methods, method); }

std::optional<std::string> cors_policy::disallowed_header(std::string_view requested) const {
  if (any_header_) return std::nullopt;
  // CORS-safelisted request headers are always allowed.
  static const std::vector<std::string> safelisted = {"accept", "accept-language", "content-language", "content-type"};
  while (!requested.empty()) {
    const size_t comma = requested.find(',');
    const std::string_view name = trim_ows(requested.substr(0, comma));
    if (!name.empty() && !contains_nocase(cfg_.allowed_headers, name) && !contains_nocase(safelisted, name)) {
      return std::string(name);
    }
    if (comma == std::string_view::npos) break;
    requested.remove_prefix(comma + 1);
  }
  return std::nullopt;
}

void cors_policy::set_allow_origin(std::string_view origin, http::response_header<>& res) const {
  if (any_origin_ && !cfg_.allow_credentials) {
    res.set(http::field::access_control_allow_origin, "*");
  } else {
    res.set(http::field::access_control_allow_origin, origin);
    res.set(http::field::vary, "Origin");
  }
  if (cfg_.allow_credentials) res.set(http::field::access_control_allow_credentials, "true");
}

http::response<http::string_body> cors_policy::preflight(const http::request_header<>& req) const {
  const unsigned v = req.version();
  const std::string_view origin = req[http::field::origin];
  const std::string_view method = req[http::field::access_control_request_method];
  const std::string_view headers = req[http::field::access_control_request_headers];
  if (!origin_allowed(origin)) return plain_400(v, "Disallowed CORS origin");
  if (!method_allowed(method)) return plain_400(v, "Disallowed CORS method");
  if (auto h = disallowed_header(headers)) return plain_400(v, "Disallowed CORS headers: " + *h);
  http::response<http::string_body> res{http::status::no_content, v};
  set_allow_origin(origin, res.base());
  res.set(http::field::access_control_allow_methods, any_method_ ? std::string(k_all_methods) : join(cfg_.allowed_methods));
  if (any_header_) {
    if (!headers.empty()) res.set(http::field::access_control_allow_headers, headers);
  } else {
    res.set(http::field::access_control_allow_headers, join(cfg_.allowed_headers));
  }
  res.set(http::field::access_control_max_age, k_max_age_s);
  return res;
}

void cors_policy::decorate_header(const http::request_header<>& req, http::response_header<>& res) const {
  const auto it = req.find(http::field::origin);
  if (it == req.end() || !origin_allowed(it->value())) return;
  set_allow_origin(it->value(), res);
  // Let browser code read the request id we answer with.
  res.set(http::field::access_control_expose_headers, "X-Request-Id");
}

std::string parse_json_string_list(const std::string& text, const char* flag, std::vector<std::string>& out) {
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(text, ec);
  const std::string bad = std::string(flag) + " must be a JSON list of strings, e.g. '[\"*\"]'";
  if (ec || !v.is_array()) return bad;
  std::vector<std::string> items;
  for (const auto& x : v.as_array()) {
    if (!x.is_string()) return bad;
    items.emplace_back(x.as_string());
  }
  out = std::move(items);
  return "";
}

}  // namespace spate
