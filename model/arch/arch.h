// The architectures spate runs, by GGUF general.architecture name. Each one
// lives in model/arch/<family>.cpp, which defines its arch_def (how to read
// its features from the file, and its forward pass on the shared blocks of
// model/layers.h), and is listed once in model/arch/registry.cpp.
// See model/README.md, "Adding an architecture".
//
// Thread-safety: the table is immutable; any thread may read it.
#pragma once

#include <string>
#include <string_view>

#include "model/layers.h"

namespace spate {

class gguf_file;

struct arch_def {
  std::string_view name;  // general.architecture
  // Sets the architecture's features in c (model_config.h: RoPE mode, QK-norm,
  // post-norms, sliding layers, ...) from the file, after read_model_config
  // read the common hyper-parameters and before the common optional ones
  // (LongRoPE scaling, pooling, soft-capping). Throws gguf_error on a missing
  // or invalid key.
  void (*configure)(const gguf_file& f, model_config& c);
  // One forward step, embedding to logits, on the blocks of model/layers.h.
  void (*forward)(const forward_step& s);
};

// The registered architecture called `name`; nullptr when there is none.
const arch_def* find_arch(std::string_view name);

// The registered names, comma-separated in registration order ("llama, qwen2, ...").
std::string supported_archs();

}  // namespace spate
