// Architecture hyper-parameters read once from GGUF metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/moe_routing.h"

namespace spate {

class gguf_file;

// Gate activation of the gated FFN; swiglu_oai is gpt-oss's clamped SwiGLU:
// x = min(gate, 7), y = clamp(up, -7, 7), x * sigmoid(1.702 x) * (y + 1).
enum class ffn_activation { silu, gelu_tanh, swiglu_oai };
inline constexpr float k_swiglu_oai_alpha = 1.702f, k_swiglu_oai_limit = 7.0f;  // gpt-oss's, as llama.cpp

enum class qkv_bias_rule { forbidden, optional, required };  // Q/K/V bias tensors in the file

struct model_config {
  std::string arch;            // a registered architecture (model/arch/arch.h)
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

  // Architecture features, set by the architecture's configure hook
  // (model/arch/<family>.cpp); llama uses none of them.
  qkv_bias_rule qkv_bias = qkv_bias_rule::forbidden;  // llama optional, qwen2 required
  bool fused_gate_up = false;     // one ffn_up tensor holds [gate | up] rows (phi3)
  bool qk_norm = false;           // per-head RMSNorm of Q and K before RoPE (qwen3, gemma3)
  bool post_norms = false;        // RMSNorm of the attention and FFN outputs before each residual add (gemma3)
  ffn_activation ffn_act = ffn_activation::silu;
  float embd_scale = 1.0f;        // token embeddings are multiplied by this (gemma3: sqrt(n_embd))
  float attn_scale = 0.0f;        // attention logit scale, 1/sqrt(head_dim) when the architecture says so
  float final_logit_softcap = 0.0f;  // logits = cap * tanh(logits / cap); 0 = none
  // Sliding-window attention: a sliding layer at position p reads positions
  // (p - n_swa, p] only, and rotates with its own RoPE base. layer_swa[l] != 0
  // marks layer l sliding (empty, or n_swa == 0: no sliding layer).
  int32_t n_swa = 0;
  std::vector<uint8_t> layer_swa;
  float rope_freq_base_swa = 10000.0f;
  // LongRoPE (phi3): the rotary cos/sin are scaled by rope_attn_factor, and
  // the long factors apply when a sequence may exceed n_ctx_orig positions.
  float rope_attn_factor = 1.0f;
  int32_t n_ctx_orig = 0;         // rope.scaling.original_context_length, else n_ctx_train
  // YaRN (rope.scaling.type yarn, gpt-oss): > 0 is the context extension
  // factor; the angles blend interpolation and extrapolation per dimension
  // (kernels::rope_angles_yarn) from n_ctx_orig and the two betas.
  float rope_yarn_factor = 0.0f;
  float rope_yarn_beta_fast = 32.0f, rope_yarn_beta_slow = 1.0f;
  kernels::rope_yarn yarn, yarn_swa;  // from the above, at rope_freq_base and rope_freq_base_swa
  // gpt-oss: a learned logit per query head joins each attention softmax
  // (blk.N.attn_sinks), and the attention output projection has a bias.
  bool attn_sinks = false;
  // The tensor of the norm before the FFN: "ffn_norm", or gpt-oss's
  // "post_attention_norm" (the same role under another name).
  std::string ffn_norm_name = "ffn_norm";
  // Mixture of experts (qwen3moe; llama files with expert_count > 0): each
  // layer's FFN is n_expert gated FFNs of n_ff_exp, of which a router picks
  // n_expert_used per token (softmax over all experts, top-k, weights
  // renormalized over the k when expert_weights_norm). n_expert == 0: dense.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;
  bool expert_weights_norm = true;
  expert_gating moe_gating = expert_gating::softmax_all;
  // gpt-oss: biases on the router (ffn_gate_inp.bias) and on every expert's
  // gate, up and down (ffn_{gate,up,down}_exps.bias).
  bool moe_biases = false;
  // {arch}.pooling_type as llama.cpp numbers it (0 none, 1 mean, 2 cls, 3 last); -1 when absent.
  int32_t gguf_pooling = -1;

  bool is_swa_layer(int32_t l) const { return n_swa > 0 && !layer_swa.empty() && layer_swa[static_cast<size_t>(l)] != 0; }
  bool all_layers_swa() const {
    if (n_swa == 0 || layer_swa.empty()) return false;
    for (uint8_t s : layer_swa) if (!s) return false;
    return true;
  }
  // Positions every layer reads back from a query (n_swa when every layer
  // slides), 0 when some layer reads the whole context.
  int32_t kv_window() const { return all_layers_swa() ? n_swa : 0; }
  bool is_moe() const { return n_expert > 0; }
  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }
  int32_t n_group() const { return n_head / n_head_kv; }
};

// Reads and validates the hyper-parameters; throws gguf_error naming the
// missing or inconsistent key, or the unsupported architecture.
model_config read_model_config(const gguf_file& f);

// Reads {arch}.expert_count, expert_used_count and expert_feed_forward_length
// (else n_ff / expert_used_count, as llama.cpp) into c; for configure hooks of
// architectures with experts. required: a missing expert_count is an error;
// otherwise it leaves c dense. Throws gguf_error naming the key.
void read_moe_config(const gguf_file& f, model_config& c, bool required);

// The integer metadata `key`, required, in [1, max_value]; throws gguf_error
// naming the key when it is missing or out of range. For configure hooks.
int32_t require_positive(const gguf_file& f, const std::string& key, int64_t max_value);

}  // namespace spate
