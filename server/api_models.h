// The model routes: GET /v1/models (and llama-server's GET /models) lists every
// model and adapter with its status; GET /v1/models/{id} returns one;
// POST /models/load and POST /models/unload {"model": ID} load and unload one
// (llama-server's router names), behind the API key.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "server/http_io.h"
#include "server/route_table.h"
#include "server/server_context.h"

namespace spate {

boost::asio::awaitable<void> handle_models(server_context& ctx, http_exchange& ex, http_io& io);
boost::asio::awaitable<void> handle_model(server_context& ctx, http_exchange& ex, http_io& io, const route_params& params);
// load: waits (up to --model-load-timeout) until the model is loaded, then 200
// {"success": true}; unload: 200 once the unload is scheduled (it happens when
// the model's running requests have finished).
boost::asio::awaitable<void> handle_model_load(server_context& ctx, http_exchange& ex, http_io& io, bool load);
// vLLM's POST /v1/load_lora_adapter {"lora_name", "lora_path"[, "base_model_name"]}
// (waits until it is installed: 200, or 400 naming the tensor that does not
// fit) and POST /v1/unload_lora_adapter {"lora_name"}; answers in vLLM's text.
// Both answer 404 unless --enable-lora-runtime-loading; a lora_path that does
// not resolve below --lora-allowed-dirs gets 403 "not allowed" and nothing
// more; a lora_name with control characters 400 (server/lora_paths.h).
boost::asio::awaitable<void> handle_lora_adapter(server_context& ctx, http_exchange& ex, http_io& io, bool load);

}  // namespace spate
