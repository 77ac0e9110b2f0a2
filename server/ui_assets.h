// The chat page's files (server/ui), compiled into the binary by
// cmake/embed_files.cmake, and their HTTP responses (GET / and /ui/<file>).
// Nothing is read from disk or fetched from elsewhere at run time.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "server/http_io.h"

namespace spate::ui {

struct embedded_file {
  std::string_view name;   // e.g. "chat.js"
  std::string_view bytes;  // the file's content, static storage
};

// All embedded files (generated source).
std::span<const embedded_file> files();

// True for the chat page's paths: "/", "/index.html" and "/ui/<file>".
inline bool is_ui_path(std::string_view path) { return path == "/" || path == "/index.html" || path.starts_with("/ui/"); }

// The response for a GET of a UI path: 200 with the file, its content type,
// no-cache and a Content-Security-Policy that allows this origin only; 404
// for an unknown /ui/ file. Precondition: is_ui_path(path).
http::response<http::string_body> ui_response(std::string_view path, unsigned version);

}  // namespace spate::ui
