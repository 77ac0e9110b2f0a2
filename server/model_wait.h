// Gets a request's model from the registry on the session's strand: at once
// when it is loaded, else waits for its load (the registry thread's callback
// wakes the coroutine; nothing polls) up to --model-load-timeout, calling
// keep_alive every interval meanwhile (an SSE stream sends comment lines).
//
// Thread-safety: one coroutine on the session's strand; the registry's
// callback only posts to it.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <string_view>

#include "server/model_registry.h"
#include "server/server_context.h"

namespace spate {

using keep_alive_fn = std::function<boost::asio::awaitable<void>()>;

// The lease, or the error to answer with: the registry's (404, 429, 500,
// 503), or 503 model_load_timeout after ctx.opts.model_load_timeout_s.
// keep_alive may be null (no keep-alives; a pointer, not a temporary
// std::function: GCC 12 may destroy a class temporary of a co_await
// expression twice). explicit_load: POST /models/load (model_registry::load:
// a model in error is retried).
boost::asio::awaitable<model_acquired> acquire_model(server_context& ctx, std::string_view id, const keep_alive_fn* keep_alive,
                                                     std::chrono::steady_clock::duration interval, bool explicit_load = false);

}  // namespace spate
