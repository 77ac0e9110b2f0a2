// Offline batched generation (`spate generate`): runs a set of requests to
// completion on one device executor, with continuous batching over the paged
// KV cache and recompute-preemption when blocks run out.
//
// Blocking; runs the model on the calling thread plus the executor's workers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "kernels/ops.h"

namespace spate {

struct loaded_model;

struct offline_request {
  size_t line_no = 0;              // for messages
  std::vector<int32_t> prompt;     // non-empty
  sampling_params params;          // validated; max_tokens set
};

struct offline_result {
  std::string text;
  std::vector<int32_t> token_ids;  // generated tokens (including a final EOS, as vLLM reports)
  std::string finish_reason;       // "stop" or "length"
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
};

struct generate_config {
  int32_t n_threads = 1;
  int32_t block_size = 16;
  uint64_t kv_cache_bytes = 2ull << 30;
  kernels::kv_dtype kv_dtype = kernels::kv_dtype::f16;
  int32_t max_model_len = 2048;
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 8192;
  uint64_t seed = 0;
};

// Results in request order. Throws std::runtime_error when the KV cache cannot
// hold even one request.
std::vector<offline_result> run_offline_batch(const loaded_model& m, const generate_config& cfg,
                                              const std::vector<offline_request>& requests);

}  // namespace spate
