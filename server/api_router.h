// Routing of one HTTP request to its handler, and the helpers every handler
// shares (OpenAI-shaped error responses, JSON responses, the access log).
// Stream-type independent: handlers talk to http_io.
//
// The routes are a table (route_table.h): api_routes() below builds the
// server's, which server_context holds. Dispatch, in order:
//   CORS preflight                   the CORS policy's answer (cors.h)
//   any other OPTIONS, any path      204, Allow: GET, HEAD, POST, OPTIONS
//   draining, path not public        503 "the server is shutting down"
//   a route matches path and method  its handler
//   routes match the path only       405 with Allow (the routes' methods)
//   nothing matches                  404 "no route for <METHOD> <path>"
#pragma once

#include <boost/asio/awaitable.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/openai_request.h"
#include "server/http_io.h"
#include "server/server_context.h"

namespace spate {

// Dispatches ex.req by ctx.routes (complete, body read) and writes exactly one response
// through io. Throws only when the client is gone (write failure).
// Precondition: the head passed admit_request_head (request_admission.h):
// Origin and API key are not checked again here.
boost::asio::awaitable<void> handle_http_request(server_context& ctx, http_exchange& ex, http_io& io);

// A WebSocket upgrade request: the denial response (wrong route, draining),
// or nullopt when the upgrade may proceed. Precondition as handle_http_request's.
std::optional<http::response<http::string_body>> check_ws_upgrade(server_context& ctx, http_exchange& ex);

// {"error": {"message", "type", "param", "code"}} with the given status. The
// type follows OpenAI: invalid_request_error (4xx), authentication_error (401),
// not_found_error (404), server_error (5xx).
http::response<http::string_body> make_error_response(http::status st, std::string_view message, std::string_view code,
                                                      unsigned version, std::string_view param = {});
http::response<http::string_body> make_json_response(http::status st, std::string body, unsigned version);

// An api_error in the shape of the API that was called: Anthropic's
// {"type":"error","error":{"type","message"}} for the Messages API, else
// OpenAI's (make_error_response).
http::response<http::string_body> make_api_error_response(api::endpoint api, const api::api_error& e, unsigned version);
// The API a path belongs to, for errors before a route is chosen (401, 413, ...).
api::endpoint api_of_path(std::string_view path);

// X-Request-Id values we echo: 1..128 printable ASCII characters.
bool is_sane_request_id(std::string_view v);

// One access-log line per request (logger "access").
void log_access(const server_context& ctx, const http_exchange& ex);

}  // namespace spate
