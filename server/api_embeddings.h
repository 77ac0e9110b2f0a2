// POST /v1/embeddings (OpenAI's embeddings API, protocol/embeddings.h): each
// input becomes one engine request with the served pooling (an embedding
// request: prompt only, batched with everything else), and the answer waits
// for all of them. A client that disconnects cancels its requests.
//
// Thread-safety: runs on the connection's strand.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "server/http_io.h"
#include "server/server_context.h"

namespace spate {

// Which API's embeddings route: OpenAI's /v1/embeddings, Ollama's /api/embed
// ({"embeddings": [[...]]} with timings) or its older /api/embeddings
// ({"embedding": [...]}, one prompt). Errors come in the API's shape.
enum class embed_api { openai, ollama, ollama_legacy };

boost::asio::awaitable<void> handle_embeddings(server_context& ctx, http_exchange& ex, http_io& io, embed_api api = embed_api::openai);

}  // namespace spate
