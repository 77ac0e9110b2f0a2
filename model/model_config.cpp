#include "model/model_config.h"

#include <cmath>

#include "model/arch/arch.h"
#include "model/gguf_file.h"

namespace spate {
namespace {

// YaRN's betas (llama.cpp's defaults 32 and 1) and the angle tables'
// parameters; the keys llama.cpp reads but spate does not apply are refused.
void read_yarn(const gguf_file& f, model_config& c) {
  const std::string a = c.arch + ".rope.scaling.";
  const auto bad = [&](const std::string& what) { return gguf_error("model '" + f.path() + "': " + what); };
  c.rope_yarn_beta_fast = static_cast<float>(f.get_float(a + "yarn_beta_fast").value_or(32.0));
  c.rope_yarn_beta_slow = static_cast<float>(f.get_float(a + "yarn_beta_slow").value_or(1.0));
  if (!(c.rope_yarn_beta_fast > 0.0f && c.rope_yarn_beta_slow > 0.0f && c.rope_yarn_beta_fast < 1e4f &&
        c.rope_yarn_beta_slow < 1e4f)) {
    throw bad("invalid YaRN betas");
  }
  if (f.get_float(a + "yarn_log_multiplier").value_or(0.0) != 0.0) {
    throw bad("metadata '" + a + "yarn_log_multiplier' (DeepSeek's YaRN magnitude rule) is not supported");
  }
  if (const auto ext = f.get_float(a + "yarn_ext_factor"); ext && *ext != 1.0) {
    throw bad("metadata '" + a + "yarn_ext_factor' other than 1 is not supported");
  }
  auto params = [&](float base) {
    kernels::rope_yarn y = kernels::make_rope_yarn(c.n_rot, c.rope_yarn_factor, c.n_ctx_orig, base,
                                                   c.rope_yarn_beta_fast, c.rope_yarn_beta_slow);
    y.attn_factor *= c.rope_attn_factor;  // llama.cpp multiplies rope.scaling.attn_factor in
    return y;
  };
  c.yarn = params(c.rope_freq_base);
  c.yarn_swa = params(c.rope_freq_base_swa);
}

// The architecture's own features (its configure hook), then the optional
// keys any architecture may carry.
void read_arch_features(const gguf_file& f, const arch_def& arch, model_config& c) {
  const std::string a = c.arch + ".";
  const auto bad = [&](const std::string& what) { return gguf_error("model '" + f.path() + "': " + what); };
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  arch.configure(f, c);
  c.n_ctx_orig = c.n_ctx_train;
  if (f.has(a + "rope.scaling.original_context_length")) {
    c.n_ctx_orig = require_positive(f, a + "rope.scaling.original_context_length", 1 << 24);
  }
  if (const auto af = f.get_float(a + "rope.scaling.attn_factor")) {
    if (!(*af > 0.0 && *af < 100.0)) throw bad("invalid rope.scaling.attn_factor " + std::to_string(*af));
    c.rope_attn_factor = static_cast<float>(*af);
  }
  if (c.rope_yarn_factor > 0.0f) read_yarn(f, c);
  if (const std::string key = a + "pooling_type"; f.has(key)) {
    const auto p = f.get_int(key);
    if (!p || *p < 0 || *p > 3) throw bad("metadata '" + key + "' must be 0 (none), 1 (mean), 2 (cls) or 3 (last)");
    c.gguf_pooling = static_cast<int32_t>(*p);
  }
  if (const auto cap = f.get_float(a + "final_logit_softcapping"); cap && *cap != 0.0) {
    if (!(*cap > 0.0 && *cap < 1e6)) throw bad("invalid final_logit_softcapping " + std::to_string(*cap));
    c.final_logit_softcap = static_cast<float>(*cap);
  }
  if (c.n_expert == 0) {
    if (const auto n = f.get_int(a + "expert_count"); n && *n != 0) {
      throw bad("metadata '" + a + "expert_count' = " + std::to_string(*n) + ": architecture '" + c.arch +
                "' has no mixture-of-experts support in spate (supported with experts: qwen3moe, gpt-oss, llama)");
    }
    if (c.n_ff == 0) throw gguf_error("model '" + f.path() + "' lacks required metadata '" + a + "feed_forward_length'");
  }
  if (f.has(a + "attn_logit_softcapping")) throw bad("attention logit soft-capping (attn_logit_softcapping) is not supported");
}

}  // namespace

void read_moe_config(const gguf_file& f, model_config& c, bool required) {
  const std::string a = c.arch + ".";
  if (!required && f.get_int(a + "expert_count").value_or(0) == 0) return;
  c.n_expert = require_positive(f, a + "expert_count", 4096);
  c.n_expert_used = require_positive(f, a + "expert_used_count", c.n_expert);
  if (f.has(a + "expert_feed_forward_length")) {
    c.n_ff_exp = require_positive(f, a + "expert_feed_forward_length", 1 << 18);
  } else if (c.n_ff > 0 && c.n_ff % c.n_expert_used == 0 && c.arch != "llama") {
    c.n_ff_exp = c.n_ff / c.n_expert_used;  // llama.cpp's fallback for qwen3moe
  } else if (c.n_ff > 0 && c.arch == "llama") {
    c.n_ff_exp = c.n_ff;  // Mixtral: feed_forward_length is each expert's
  } else {
    throw gguf_error("model '" + f.path() + "' lacks required metadata '" + a + "expert_feed_forward_length'");
  }
  // llama.cpp's numbering: 1 softmax, 2 sigmoid, 3 softmax over the chosen k (gpt-oss's, set by its architecture).
  if (const std::string key = a + "expert_gating_func"; f.has(key)) {
    const int64_t g = f.get_int(key).value_or(0);
    if (g != 1 && g != 3) {
      throw gguf_error("model '" + f.path() + "': metadata '" + key + "' must be 1 (softmax) or 3 (softmax over the top k)");
    }
    c.moe_gating = g == 3 ? expert_gating::softmax_topk : expert_gating::softmax_all;
  }
  if (const std::string key = a + "expert_shared_count"; f.get_int(key).value_or(0) != 0) {
    throw gguf_error("model '" + f.path() + "': metadata '" + key + "': shared experts are not supported");
  }
}

int32_t require_positive(const gguf_file& f, const std::string& key, int64_t max_value) {
  const auto v = f.get_int(key);
  if (!v) throw gguf_error("model '" + f.path() + "' lacks required metadata '" + key + "'");
  if (*v <= 0 || *v > max_value) {
    throw gguf_error("model '" + f.path() + "': metadata '" + key + "' = " + std::to_string(*v) +
                     " is out of range [1, " + std::to_string(max_value) + "]");
  }
  return static_cast<int32_t>(*v);
}

model_config read_model_config(const gguf_file& f) {
  model_config c;
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw gguf_error("model '" + f.path() + "' lacks 'general.architecture'");
  c.arch = *arch;
  const arch_def* def = find_arch(c.arch);
  if (def == nullptr) {
    throw gguf_error("model '" + f.path() + "' has architecture '" + c.arch +
                     "', which spate does not support (supported: " + supported_archs() + ")");
  }
  c.name = f.get_string("general.name").value_or("");
  const std::string a = c.arch + ".";
  c.n_layer = require_positive(f, a + "block_count", 1024);
  c.n_embd = require_positive(f, a + "embedding_length", 1 << 16);
  // Optional here: a mixture-of-experts file may have only expert_feed_forward_length
  // (read_arch_features requires it of dense models).
  if (f.has(a + "feed_forward_length")) c.n_ff = require_positive(f, a + "feed_forward_length", 1 << 18);
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
  const auto scaling = f.get_string(a + "rope.scaling.type");
  if (scaling && *scaling != "none" && *scaling != "linear" && *scaling != "yarn") {
    throw gguf_error("model '" + f.path() + "': rope scaling type '" + *scaling + "' is not supported (none, yarn)");
  }
  if (auto fs = f.get_float(a + "rope.scaling.factor"); fs && *fs != 0.0 && *fs != 1.0) {
    if (!scaling || *scaling != "yarn") {
      throw gguf_error("model '" + f.path() + "': rope scaling factor " + std::to_string(*fs) + " is not supported");
    }
    if (!(*fs > 1.0 && *fs <= 1024.0)) throw gguf_error("model '" + f.path() + "': invalid YaRN rope.scaling.factor");
    c.rope_yarn_factor = static_cast<float>(*fs);
  }
  if (const auto* toks = f.get_string_array("tokenizer.ggml.tokens")) c.n_vocab = static_cast<int32_t>(toks->size());
  if (f.has(a + "vocab_size")) c.n_vocab = require_positive(f, a + "vocab_size", 1 << 22);
  if (c.n_vocab <= 0) throw gguf_error("model '" + f.path() + "' has no vocabulary (tokenizer.ggml.tokens)");
  read_arch_features(f, *def, c);
  return c;
}

}  // namespace spate
