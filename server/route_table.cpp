#include "server/route_table.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "util/hex.h"
#include "util/utf8.h"

namespace spate {

namespace {

constexpr std::array<http::verb, 6> k_allow_order = {http::verb::get,   http::verb::head,  http::verb::post,
                                                     http::verb::put,   http::verb::patch, http::verb::delete_};

bool routes_method(const route& r, http::verb m) {
  for (http::verb v : r.methods) {
    if (v == m || (v == http::verb::get && m == http::verb::head)) return true;
  }
  return false;
}

}  // namespace

std::string_view route_params::get(std::string_view name) const {
  for (const auto& [k, v] : values) {
    if (k == name) return v;
  }
  return {};
}

std::string allow_header_value(std::span<const http::verb> methods) {
  std::string out;
  for (http::verb v : k_allow_order) {
    const bool in = std::find(methods.begin(), methods.end(), v) != methods.end() ||
                    (v == http::verb::head && std::find(methods.begin(), methods.end(), http::verb::get) != methods.end());
    if (!in) continue;
    if (!out.empty()) out += ", ";
    out += http::to_string(v);
  }
  return out;
}

std::vector<route_table::segment> route_table::compile(std::string_view pattern) {
  if (pattern.empty() || pattern.front() != '/') throw std::invalid_argument("route pattern must start with '/': " + std::string(pattern));
  std::vector<segment> segs;
  for (size_t pos = 1;;) {
    const size_t end = std::min(pattern.find('/', pos), pattern.size());
    const std::string_view s = pattern.substr(pos, end - pos);
    if (!segs.empty() && segs.back().k == segment::kind::rest) {
      throw std::invalid_argument("a rest parameter must end the route pattern: " + std::string(pattern));
    }
    if (s.starts_with('{')) {
      if (!s.ends_with('}') || s.size() < 3) throw std::invalid_argument("bad parameter in route pattern: " + std::string(pattern));
      std::string_view name = s.substr(1, s.size() - 2);
      const bool rest = name.ends_with("...");
      if (rest) name.remove_suffix(3);
      if (name.empty() || name.find_first_of("{}") != std::string_view::npos) {
        throw std::invalid_argument("bad parameter in route pattern: " + std::string(pattern));
      }
      segs.push_back({rest ? segment::kind::rest : segment::kind::param, std::string(name)});
    } else {
      if (s.find_first_of("{}") != std::string_view::npos) throw std::invalid_argument("bad route pattern: " + std::string(pattern));
      segs.push_back({segment::kind::literal, std::string(s)});
    }
    if (end == pattern.size()) break;
    pos = end + 1;
  }
  return segs;
}

bool route_table::match_path(const std::vector<segment>& segs, std::string_view path, route_params* params) {
  size_t pos = 0;
  for (const segment& s : segs) {
    if (pos >= path.size() || path[pos] != '/') return false;
    ++pos;
    switch (s.k) {
      case segment::kind::literal:
        if (path.substr(pos, s.text.size()) != s.text) return false;
        pos += s.text.size();
        break;
      case segment::kind::param: {
        const size_t end = std::min(path.find('/', pos), path.size());
        if (end == pos) return false;
        if (params) params->values.emplace_back(s.text, path.substr(pos, end - pos));
        pos = end;
        break;
      }
      case segment::kind::rest:
        if (params) params->values.emplace_back(s.text, path.substr(pos));
        pos = path.size();
        break;
    }
  }
  return pos == path.size();
}

void route_table::add(route r) {
  if (r.methods.empty()) throw std::invalid_argument("route without methods: " + r.pattern);
  auto segs = compile(r.pattern);
  for (const route& o : routes_) {
    if (o.pattern != r.pattern) continue;
    for (http::verb v : r.methods) {
      if (routes_method(o, v)) throw std::invalid_argument("method routed twice for " + r.pattern);
    }
  }
  routes_.push_back(std::move(r));
  compiled_.push_back(std::move(segs));
}

route_match route_table::match(http::verb method, std::string_view path) const {
  route_match m;
  std::vector<http::verb> allowed;
  bool path_public = false;  // some open route on the path, for any method
  for (size_t i = 0; i < routes_.size(); ++i) {
    route_params params;
    if (!match_path(compiled_[i], path, &params)) continue;
    const route& r = routes_[i];
    m.is_public = m.is_public || (r.auth == route_auth::open && routes_method(r, method));
    path_public = path_public || r.auth == route_auth::open;
    if (m.result != route_match::outcome::found && routes_method(r, method)) {
      m.result = route_match::outcome::found;
      m.found = &r;
      m.params = std::move(params);
    }
    allowed.insert(allowed.end(), r.methods.begin(), r.methods.end());
  }
  if (m.result == route_match::outcome::found) return m;
  m.is_public = path_public;  // no route for the method: the path's 405 is as public as the path
  if (!allowed.empty()) {
    m.result = route_match::outcome::method_not_allowed;
    m.allow = allow_header_value(allowed);
  }
  return m;
}

bool route_table::takes_x_api_key(std::string_view path) const {
  for (size_t i = 0; i < routes_.size(); ++i) {
    if (routes_[i].auth == route_auth::api_key_anthropic && match_path(compiled_[i], path, nullptr)) return true;
  }
  return false;
}

std::optional<std::string> percent_decode(std::string_view raw) {
  constexpr auto hex = hex_digit_value;
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '%') {
      out += raw[i];
      continue;
    }
    if (i + 2 >= raw.size()) return std::nullopt;  // fewer than two characters after '%'
    const int hi = hex(raw[i + 1]), lo = hex(raw[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  if (!utf8::is_valid(out)) return std::nullopt;
  return out;
}

bool route_table::is_public(http::verb method, std::string_view path) const {
  for (size_t i = 0; i < routes_.size(); ++i) {
    if (routes_[i].auth == route_auth::open && routes_method(routes_[i], method) && match_path(compiled_[i], path, nullptr)) return true;
  }
  // No route for the method on the path (a 405): public when the path is.
  return match(method, path).is_public;
}

}  // namespace spate
