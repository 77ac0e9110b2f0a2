#include "server/ws_subprotocol.h"

#include "server/http_request_checks.h"

namespace spate {

std::vector<std::string_view> offered_subprotocols(std::string_view header) {
  std::vector<std::string_view> out;
  for (;;) {
    const size_t comma = header.find(',');
    const std::string_view item = trim_ows(header.substr(0, comma));
    if (!item.empty()) out.push_back(item);
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return out;
}

std::optional<std::string_view> subprotocol_api_key(std::string_view header) {
  for (std::string_view p : offered_subprotocols(header)) {
    if (p.starts_with(k_ws_key_subprotocol_prefix)) return p.substr(k_ws_key_subprotocol_prefix.size());
  }
  return std::nullopt;
}

std::string_view selected_subprotocol(std::string_view header) {
  for (std::string_view p : offered_subprotocols(header)) {
    if (!p.starts_with(k_ws_key_subprotocol_prefix)) return p;
  }
  return {};
}

}  // namespace spate
