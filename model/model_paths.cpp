#include "model/model_paths.h"

#include <cstdlib>

namespace spate {

std::string cached_model_path(const std::string& file_name) {
  const char* cache = std::getenv("SPATE_CACHE_DIR");
  if (cache && *cache) return std::string(cache) + "/models/" + file_name;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/spate/models/" + file_name;
}

std::string default_model_path() { return cached_model_path("SmolLM2-135M-Instruct.Q4_1.gguf"); }

}  // namespace spate
