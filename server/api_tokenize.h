// POST /tokenize and POST /detokenize, as in vLLM.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "server/http_io.h"
#include "server/server_context.h"

namespace spate {

boost::asio::awaitable<void> handle_tokenize(server_context& ctx, http_exchange& ex, http_io& io, bool tokenize);

}  // namespace spate
