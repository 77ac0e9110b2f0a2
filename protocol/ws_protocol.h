// The Responses API WebSocket mode, stream-type independent part: parsing a
// client message into a prepared generation, and error events.
//
// Client -> server: {"type": "response.create", <the POST /v1/responses fields>}
// ("stream" is implicit). Server -> client: the same events as SSE mode, one
// JSON text message each, or {"type": "error", "code", "message", "param",
// "sequence_number"} for a bad message; the connection stays usable.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "protocol/generation.h"
#include "protocol/openai_request.h"
#include "protocol/served_model.h"

namespace spate {

struct ws_create {
  api::parsed_request req;
  prepared_generation gen;
};

// Parses one text message's event and request fields into out.req (no model
// needed). Returns nullopt, or the api_error to report as an error event.
std::optional<api::api_error> ws_parse_event(std::string_view msg, ws_create& out);

// Validates out.req against the model it names (the server resolved it) and
// prepares out.gen. Returns nullopt or the error event's api_error.
std::optional<api::api_error> ws_prepare(const api::served_model& m, ws_create& out);

// ws_parse_event, then ws_prepare.
std::optional<api::api_error> ws_parse_message(const api::served_model& m, std::string_view msg, ws_create& out);

std::string ws_error_event(const api::api_error& e, int64_t sequence_number);

}  // namespace spate
