// Architecture hyper-parameters read once from GGUF metadata.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/ops.h"

namespace spate {

class gguf_file;

struct model_config {
  std::string arch;            // "llama" or "qwen2"
  std::string name;            // general.name (informational)
  int32_t n_layer = 0;
  int32_t n_embd = 0;
  int32_t n_ff = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;        // n_embd / n_head unless attention.key_length says otherwise
  int32_t n_rot = 0;           // rotated dims per head
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  kernels::rope_mode rope = kernels::rope_mode::normal;

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }
  int32_t n_group() const { return n_head / n_head_kv; }
};

// Reads and validates the hyper-parameters; throws gguf_error naming the
// missing or inconsistent key, or the unsupported architecture.
model_config read_model_config(const gguf_file& f);

}  // namespace spate
