#include "server/ui_assets.h"

#include <string>

namespace spate::ui {

namespace {

std::string_view content_type_of(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  return "application/octet-stream";
}

const embedded_file* find_file(std::string_view name) {
  for (const auto& f : files())
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace

http::response<http::string_body> ui_response(std::string_view path, unsigned version) {
  const std::string_view name = path.starts_with("/ui/") ? path.substr(4) : std::string_view("index.html");
  const embedded_file* f = find_file(name);
  if (f == nullptr) {
    http::response<http::string_body> res{http::status::not_found, version};
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = "no such file: " + std::string(path) + "\n";
    return res;
  }
  http::response<http::string_body> res{http::status::ok, version};
  res.set(http::field::content_type, content_type_of(f->name));
  res.set(http::field::cache_control, "no-cache");
  res.set("X-Content-Type-Options", "nosniff");
  // Scripts, styles and connections (fetch, WebSocket) to this origin only.
  res.set("Content-Security-Policy",
          "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'");
  res.body() = std::string(f->bytes);
  return res;
}

}  // namespace spate::ui
