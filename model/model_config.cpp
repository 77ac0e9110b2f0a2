#include "model/model_config.h"

#include "model/gguf_file.h"

namespace spate {
namespace {

int32_t require_positive(const gguf_file& f, const std::string& key, int64_t max_value) {
  const auto v = f.get_int(key);
  if (!v) throw gguf_error("model '" + f.path() + "' lacks required metadata '" + key + "'");
  if (*v <= 0 || *v > max_value) {
    throw gguf_error("model '" + f.path() + "': metadata '" + key + "' = " + std::to_string(*v) +
                     " is out of range [1, " + std::to_string(max_value) + "]");
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

model_config read_model_config(const gguf_file& f) {
  model_config c;
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw gguf_error("model '" + f.path() + "' lacks 'general.architecture'");
  c.arch = *arch;
  if (c.arch != "llama" && c.arch != "qwen2") {
    throw gguf_error("model '" + f.path() + "' has architecture '" + c.arch +
                     "', which spate does not support (supported: llama, qwen2)");
  }
  c.name = f.get_string("general.name").value_or("");
  const std::string a = c.arch + ".";
  c.n_layer = require_positive(f, a + "block_count", 1024);
  c.n_embd = require_positive(f, a + "embedding_length", 1 << 16);
  c.n_ff = require_positive(f, a + "feed_forward_length", 1 << 18);
  c.n_head = require_positive(f, a + "attention.head_count", 1024);
  c.n_head_kv = f.has(a + "attention.head_count_kv") ? require_positive(f, a + "attention.head_count_kv", 1024) : c.n_head;
  c.n_ctx_train = require_positive(f, a + "context_length", 1 << 24);
  if (c.n_head % c.n_head_kv != 0) {
    throw gguf_error("model '" + f.path() + "': head_count " + std::to_string(c.n_head) +
                     " is not a multiple of head_count_kv " + std::to_string(c.n_head_kv));
  }
  if (f.has(a + "attention.key_length")) {
    c.head_dim = require_positive(f, a + "attention.key_length", 1024);
  } else {
    if (c.n_embd % c.n_head != 0) {
      throw gguf_error("model '" + f.path() + "': embedding_length is not a multiple of head_count");
    }
    c.head_dim = c.n_embd / c.n_head;
  }
  if (f.has(a + "attention.value_length") && require_positive(f, a + "attention.value_length", 1024) != c.head_dim) {
    throw gguf_error("model '" + f.path() + "': attention.value_length differs from key_length (unsupported)");
  }
  if (c.head_dim % 2 != 0) throw gguf_error("model '" + f.path() + "': head dimension must be even");
  c.n_rot = f.has(a + "rope.dimension_count") ? require_positive(f, a + "rope.dimension_count", c.head_dim) : c.head_dim;
  if (c.n_rot % 2 != 0) throw gguf_error("model '" + f.path() + "': rope.dimension_count must be even");
  c.rms_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f)) throw gguf_error("model '" + f.path() + "': invalid layer_norm_rms_epsilon");
  c.rope_freq_base = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));
  if (!(c.rope_freq_base > 1.0f)) throw gguf_error("model '" + f.path() + "': invalid rope.freq_base");
  if (const auto st = f.get_string(a + "rope.scaling.type"); st && *st != "none" && *st != "linear") {
    throw gguf_error("model '" + f.path() + "': rope scaling type '" + *st + "' is not supported");
  }
  if (auto fs = f.get_float(a + "rope.scaling.factor"); fs && *fs != 0.0 && *fs != 1.0) {
    throw gguf_error("model '" + f.path() + "': rope scaling factor " + std::to_string(*fs) + " is not supported");
  }
  // GGUF llama checkpoints store Q/K permuted for interleaved-pair rotation; qwen2 uses NeoX halves.
  c.rope = c.arch == "qwen2" ? kernels::rope_mode::neox : kernels::rope_mode::normal;
  if (const auto* toks = f.get_string_array("tokenizer.ggml.tokens")) c.n_vocab = static_cast<int32_t>(toks->size());
  if (f.has(a + "vocab_size")) c.n_vocab = require_positive(f, a + "vocab_size", 1 << 22);
  if (c.n_vocab <= 0) throw gguf_error("model '" + f.path() + "' has no vocabulary (tokenizer.ggml.tokens)");
  return c;
}

}  // namespace spate
