// POST /v1/completions, /v1/chat/completions and /v1/responses: streaming
// (SSE) and non-streaming. The request is parsed and validated before anything
// is submitted; every refusal (400/404/429/503) is decided before a stream
// header is sent. A client that disconnects cancels its engine requests.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "server/http_io.h"
#include "protocol/openai_request.h"
#include "server/server_context.h"

namespace spate {

boost::asio::awaitable<void> handle_generate(server_context& ctx, http_exchange& ex, http_io& io, api::endpoint kind);

// Anthropic's POST /v1/messages/count_tokens: the Messages body's prompt,
// rendered and tokenized as /v1/messages would, as {"input_tokens": N}.
boost::asio::awaitable<void> handle_count_tokens(server_context& ctx, http_exchange& ex, http_io& io);

}  // namespace spate
