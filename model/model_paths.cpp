#include "model/model_paths.h"

#include <cstdlib>

namespace spate {

std::string default_model_path() {
  const char* cache = std::getenv("SPATE_CACHE_DIR");
  if (cache && *cache) return std::string(cache) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/spate/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace spate
