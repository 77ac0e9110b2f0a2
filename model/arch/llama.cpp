// The llama family: llama, and the architectures that differ from it in
// their tensors or one traits flag, not in their block diagram:
//   qwen2  Q/K/V biases (in the file; NeoX RoPE)
//   qwen3  per-head RMSNorm of Q and K before RoPE (traits::qk_norm; NeoX RoPE)
//   qwen3moe  qwen3 with a mixture-of-experts FFN (blocks::moe_ffn)
//   llama files with expert_count > 0 (Mixtral): llama with the same MoE FFN
//   phi3   fused QKV and gate|up tensors, split at load; LongRoPE factors and
//          attention factor, applied to the RoPE angles by blocks::embed
//
//   x = embed(tokens)
//   per layer:
//     q, k, v = Wq, Wk, Wv . RMSNorm(x)           (+ biases, when the file has them)
//     q, k = RoPE([RMSNorm_head] q), RoPE([RMSNorm_head] k); store k, v in the paged KV cache
//     x += Wo . attention(q, K, V)
//     x += W_down . (SiLU(W_gate . RMSNorm(x)) * W_up . RMSNorm(x))
//   logits = W_out . RMSNorm(x)
#include "model/arch/arch.h"

namespace spate {
namespace {

// What varies within the family's forward pass.
struct traits {
  bool qk_norm = false;  // RMSNorm_head of q and k (layer's q_norm / k_norm)
};

template <traits T>
void forward(const forward_step& s) {
  blocks::embed(s, 1.0f);
  blocks::residual ffn_out;  // the previous layer's FFN output, added by the next norm
  for (int32_t l = 0; l < s.cfg.n_layer; ++l) {
    const layer_weights& L = blocks::begin_layer(s, l);
    blocks::qkv_projection(s, ffn_out, L);
    blocks::rope_kv_store(s, l, {.qkv_bias = true, .qk_norm = T.qk_norm, .rope = s.rope});
    blocks::attention(s, l, {});
    blocks::output_projection(s, L);
    if (s.cfg.is_moe()) {
      blocks::moe_ffn(s, {.pending = true}, L);
    } else {
      blocks::gated_ffn(s, {.pending = true}, L, ffn_activation::silu);
    }
    ffn_out = {.pending = true};
  }
  blocks::residual_add(s, ffn_out);
  blocks::output_head(s, s.cfg.final_logit_softcap);
}

// GGUF llama checkpoints store Q/K permuted for interleaved-pair rotation.
void configure_llama(const gguf_file& f, model_config& c) {
  c.rope = kernels::rope_mode::normal;
  c.qkv_bias = qkv_bias_rule::optional;
  read_moe_config(f, c, /*required=*/false);  // Mixtral-style files
}

void configure_qwen2(const gguf_file&, model_config& c) {
  c.rope = kernels::rope_mode::neox;
  c.qkv_bias = qkv_bias_rule::required;
}

void configure_qwen3(const gguf_file&, model_config& c) {
  c.rope = kernels::rope_mode::neox;
  c.qk_norm = true;  // loads attn_q_norm / attn_k_norm
}

void configure_qwen3moe(const gguf_file& f, model_config& c) {
  configure_qwen3(f, c);
  read_moe_config(f, c, /*required=*/true);
}

// phi3's GGUFs carry a sliding window that llama.cpp does not apply (its
// conversion does not say which layers slide); spate follows llama.cpp.
void configure_phi3(const gguf_file&, model_config& c) {
  c.rope = kernels::rope_mode::neox;
  c.fused_gate_up = true;
}

}  // namespace

extern const arch_def arch_llama{"llama", configure_llama, forward<traits{}>};
extern const arch_def arch_qwen2{"qwen2", configure_qwen2, forward<traits{}>};
extern const arch_def arch_qwen3{"qwen3", configure_qwen3, forward<traits{.qk_norm = true}>};
extern const arch_def arch_qwen3moe{"qwen3moe", configure_qwen3moe, forward<traits{.qk_norm = true}>};
extern const arch_def arch_phi3{"phi3", configure_phi3, forward<traits{}>};

}  // namespace spate
