// Shared set-up for integration tests that run the real default model.
// The model path comes from SPATE_MODEL, else the cache the setup script fills.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/block_pool.h"
#include "model/kv_cache.h"
#include "model/model_loader.h"
#include "model/model_runner.h"
#include "model/thread_pool.h"
#include "model/model_paths.h"

namespace spate::testing {

inline std::string model_path() {
  const char* m = std::getenv("SPATE_MODEL");
  return m && *m ? std::string(m) : default_model_path();
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// One loaded model shared by all tests of the binary (loading is the slow part).
inline loaded_model& shared_model() {
  static std::unique_ptr<loaded_model> m = [] {
    auto p = model_path();
    if (!std::ifstream(p)) {
      ADD_FAILURE() << "model not found at " << p << " (run scripts/fetch-model.sh or set SPATE_MODEL)";
      std::abort();
    }
    return load_model(p, kernels::active_isa());
  }();
  return *m;
}

// A runner with its own KV cache and block pool.
struct runner_env {
  explicit runner_env(int32_t n_blocks, int32_t block_size = 16, int n_threads = 2,
                      kernels::kv_dtype dtype = kernels::kv_dtype::f16)
      : model(shared_model()), pool(n_threads), kv(model.config, n_blocks, block_size, dtype), blocks(n_blocks),
        runner(model.config, model.weights, kv, pool) {}
  loaded_model& model;
  thread_pool pool;
  kv_cache kv;
  block_pool blocks;
  model_runner runner;
};

}  // namespace spate::testing
