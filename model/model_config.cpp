#include "model/model_config.h"

#include <cmath>

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

// The features each architecture adds over llama (see model_config.h).
void read_arch_features(const gguf_file& f, model_config& c) {
  const std::string a = c.arch + ".";
  const auto bad = [&](const std::string& what) { return gguf_error("model '" + f.path() + "': " + what); };
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  // GGUF llama checkpoints store Q/K permuted for interleaved-pair rotation; the others use NeoX halves.
  c.rope = c.arch == "llama" ? kernels::rope_mode::normal : kernels::rope_mode::neox;
  if (c.arch == "qwen3") c.qk_norm = true;
  if (c.arch == "gemma3") {
    c.qk_norm = true;
    c.post_norms = true;
    c.ffn_act = ffn_activation::gelu_tanh;
    c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
    // Gemma 3 scales queries by query_pre_attn_scalar^-1/2: head_dim, except
    // the 27B model (62 layers), whose scalar is n_embd / n_head (as llama.cpp).
    if (c.n_layer == 62) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
    // Every 6th layer is global, the others slide; their RoPE base is 10k.
    // Newer converters may write the period and the base; absent, these defaults apply.
    int32_t pattern = 6;
    // (An integer period; a per-layer list is refused by get_int, naming the key.)
    if (const std::string key = a + "attention.sliding_window_pattern"; f.has(key)) pattern = require_positive(f, key, 1024);
    c.n_swa = require_positive(f, a + "attention.sliding_window", 1 << 24);
    c.layer_swa.assign(static_cast<size_t>(c.n_layer), 0);
    for (int32_t l = 0; l < c.n_layer; ++l) c.layer_swa[static_cast<size_t>(l)] = (l + 1) % pattern != 0;
    c.rope_freq_base_swa = static_cast<float>(f.get_float(a + "rope.freq_base_swa").value_or(10000.0));
    if (!(c.rope_freq_base_swa > 1.0f)) throw bad("invalid rope.freq_base_swa");
  }
  // phi3's GGUFs carry a sliding window that llama.cpp does not apply (its
  // conversion does not say which layers slide); spate follows llama.cpp.
  c.n_ctx_orig = c.n_ctx_train;
  if (f.has(a + "rope.scaling.original_context_length")) {
    c.n_ctx_orig = require_positive(f, a + "rope.scaling.original_context_length", 1 << 24);
  }
  if (const auto af = f.get_float(a + "rope.scaling.attn_factor")) {
    if (!(*af > 0.0 && *af < 100.0)) throw bad("invalid rope.scaling.attn_factor " + std::to_string(*af));
    c.rope_attn_factor = static_cast<float>(*af);
  }
  if (const std::string key = a + "pooling_type"; f.has(key)) {
    const auto p = f.get_int(key);
    if (!p || *p < 0 || *p > 3) throw bad("metadata '" + key + "' must be 0 (none), 1 (mean), 2 (cls) or 3 (last)");
    c.gguf_pooling = static_cast<int32_t>(*p);
  }
  if (const auto cap = f.get_float(a + "final_logit_softcapping"); cap && *cap != 0.0) {
    if (!(*cap > 0.0 && *cap < 1e6)) throw bad("invalid final_logit_softcapping " + std::to_string(*cap));
    c.final_logit_softcap = static_cast<float>(*cap);
  }
  if (f.has(a + "attn_logit_softcapping")) throw bad("attention logit soft-capping (attn_logit_softcapping) is not supported");
}

}  // namespace

model_config read_model_config(const gguf_file& f) {
  model_config c;
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw gguf_error("model '" + f.path() + "' lacks 'general.architecture'");
  c.arch = *arch;
  if (c.arch != "llama" && c.arch != "qwen2" && c.arch != "qwen3" && c.arch != "gemma3" && c.arch != "phi3") {
    throw gguf_error("model '" + f.path() + "' has architecture '" + c.arch +
                     "', which spate does not support (supported: llama, qwen2, qwen3, gemma3, phi3)");
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
  if (const auto* toks = f.get_string_array("tokenizer.ggml.tokens")) c.n_vocab = static_cast<int32_t>(toks->size());
  if (f.has(a + "vocab_size")) c.n_vocab = require_positive(f, a + "vocab_size", 1 << 22);
  if (c.n_vocab <= 0) throw gguf_error("model '" + f.path() + "' has no vocabulary (tokenizer.ggml.tokens)");
  read_arch_features(f, c);
  return c;
}

}  // namespace spate
