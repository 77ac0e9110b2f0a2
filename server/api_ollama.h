// Ollama's API routes (Ollama's public API docs): /api/chat and /api/generate
// run through handle_generate (NDJSON streaming, ollama_format.h); here the
// rest: /api/tags, /api/show, /api/ps, /api/version, /api/embed and
// /api/embeddings, 501 for pull, push, create, copy and delete (spate serves
// local GGUF files), and the checks and answers of /api/chat and
// /api/generate that are Ollama's own (num_ctx, loading with an empty prompt).
// Errors: {"error": "..."} with Ollama's status codes.
//
// Thread-safety: the handlers run on the connection's strand.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <optional>

#include "protocol/ollama_request.h"
#include "server/http_io.h"
#include "server/model_registry.h"
#include "server/route_table.h"
#include "server/server_context.h"

namespace spate {

// Adds the routes; chat and generate are handle_generate's handlers for them.
void add_ollama_routes(route_table& t, route_handler chat, route_handler generate);

// The served model an Ollama request's name means: the name itself when a
// model has it, else "NAME:latest" (how Ollama clients name models) means
// NAME; otherwise the name unchanged (then a 404 names it). Thread-safe.
std::string ollama_model_id(const model_registry& models, std::string_view name);

// options.num_ctx above the model's length: a 400 naming both.
std::optional<api::api_error> ollama_check(const api::served_model& m, const api::ollama_extras& x);

// /api/chat or /api/generate without a prompt: the model is loaded (the lease
// holds it); answers done with done_reason "load", or with keep_alive 0 unloads
// it and answers "unload", as Ollama does.
boost::asio::awaitable<void> ollama_load_answer(server_context& ctx, http_exchange& ex, http_io& io, const model_lease& m,
                                                const api::parsed_request& r, const api::ollama_extras& x);

}  // namespace spate
