// POST /start_profile and POST /stop_profile, vLLM's profiler routes, behind
// the API key. With SPATE_PROFILER_ENABLED unset they answer 404 saying how
// to turn the profiler on. stop writes a Chrome trace-event JSON file
// (util/trace.h) under SPATE_PROFILER_DIR and answers with its path.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "server/http_io.h"
#include "server/server_context.h"

namespace spate {

boost::asio::awaitable<void> handle_profile(server_context& ctx, http_exchange& ex, http_io& io, bool start);

}  // namespace spate
