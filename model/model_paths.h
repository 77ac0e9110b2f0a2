// Where the default model lives on disk: the cache that scripts/fetch-model.sh
// fills. Reads the environment (SPATE_CACHE_DIR, HOME), so call it only from
// top-level code (the command line, tests, benchmarks), never from deep inside.
#pragma once

#include <string>

namespace spate {

// $SPATE_CACHE_DIR/models/SmolLM2-135M-Instruct.Q4_1.gguf, or
// $HOME/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf.
std::string default_model_path();

// The same directory for another file scripts/fetch-model.sh caches, e.g.
// "gemma-3-270m-q4_k_m.gguf".
std::string cached_model_path(const std::string& file_name);

}  // namespace spate
