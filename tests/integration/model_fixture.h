// Shared set-up for integration tests that run the real default model.
// The model path comes from SPATE_MODEL, else the cache the setup script fills.
// The kernel level is chosen as `spate` chooses it (SPATE_FORCE_REFERENCE,
// SPATE_MAX_ISA), once, before the first model is loaded.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_options.h"
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

// Gemma 3 270M Q4_K_M (scripts/fetch-model.sh gemma3-270m): SPATE_GEMMA_MODEL, else the cache.
inline std::string gemma_model_path() {
  const char* m = std::getenv("SPATE_GEMMA_MODEL");
  return m && *m ? std::string(m) : cached_model_path("gemma-3-270m-q4_k_m.gguf");
}

// Fixes the kernel level from the environment through the CLI's typed path
// (cli::read_isa_env, cli::init_kernels), on the first call; later calls do
// nothing. scripts/test.sh runs these tests again under SPATE_MAX_ISA=avx2.
inline void init_kernels_once() {
  static const bool done = [] {
    cli::isa_options o;
    if (const std::string err = cli::read_isa_env(o); !err.empty()) {
      std::fprintf(stderr, "%s\n", err.c_str());
      std::abort();
    }
    std::printf("Kernels: %s\n", cli::init_kernels(o).c_str());
    return true;
  }();
  (void)done;
}

// Each model loaded once and shared by all tests of the binary (loading is the
// slow part), with its weights packed for the level init_kernels_once() fixed.
inline loaded_model& shared_model_at(const std::string& path, const char* fetch_hint = "scripts/fetch-model.sh") {
  static std::map<std::string, std::unique_ptr<loaded_model>> models;
  init_kernels_once();
  auto& m = models[path];
  if (!m) {
    if (!std::ifstream(path)) {
      ADD_FAILURE() << "model not found at " << path << " (run " << fetch_hint << ")";
      std::abort();
    }
    m = load_model(path, kernels::active_isa());
  }
  return *m;
}
inline loaded_model& shared_model() { return shared_model_at(model_path()); }

// A runner with its own KV cache and block pool.
struct runner_env {
  explicit runner_env(int32_t n_blocks, int32_t block_size = 16, int n_threads = 2,
                      kernels::kv_dtype dtype = kernels::kv_dtype::f16)
      : runner_env(shared_model(), n_blocks, block_size, n_threads, dtype) {}
  runner_env(loaded_model& m, int32_t n_blocks, int32_t block_size = 16, int n_threads = 2,
             kernels::kv_dtype dtype = kernels::kv_dtype::f16)
      : model(m), pool(n_threads), kv(model.config, n_blocks, block_size, dtype), blocks(n_blocks),
        runner(model.config, model.weights, kv, pool) {}
  loaded_model& model;
  thread_pool pool;
  kv_cache kv;
  block_pool blocks;
  model_runner runner;
};

}  // namespace spate::testing
