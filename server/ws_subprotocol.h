// Sec-WebSocket-Protocol for browser clients. A browser cannot set headers on
// a WebSocket, so it passes the API key as the subprotocol
// "openai-insecure-api-key.<key>" (the convention of OpenAI's browser
// clients), next to a subprotocol the server echoes (browsers fail the
// handshake when they offered subprotocols and none comes back).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace spate {

inline constexpr std::string_view k_ws_key_subprotocol_prefix = "openai-insecure-api-key.";

// The comma-separated list of a Sec-WebSocket-Protocol header, each entry
// trimmed of blanks; empty entries left out.
std::vector<std::string_view> offered_subprotocols(std::string_view header);

// The key of the first "openai-insecure-api-key.<key>" entry, if any.
std::optional<std::string_view> subprotocol_api_key(std::string_view header);

// The subprotocol the server selects: the first offered entry that does not
// carry a key; "" when there is none (then no Sec-WebSocket-Protocol is sent).
std::string_view selected_subprotocol(std::string_view header);

}  // namespace spate
