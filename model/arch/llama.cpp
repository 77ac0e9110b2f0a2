// The llama family: llama, and two variants whose difference is in their
// tensors, not their block diagram: qwen2 (Q/K/V biases) and phi3 (fused QKV
// and gate|up tensors, split at load; LongRoPE factors and attention factor,
// applied to the RoPE angles by blocks::embed).
//
//   x = embed(tokens)
//   per layer:
//     q, k, v = Wq, Wk, Wv . RMSNorm(x)         (+ biases, when the file has them)
//     q, k = RoPE(q), RoPE(k); store k, v in the paged KV cache
//     x += Wo . attention(q, K, V)
//     x += W_down . (SiLU(W_gate . RMSNorm(x)) * W_up . RMSNorm(x))
//   logits = W_out . RMSNorm(x)
#include "model/arch/arch.h"

namespace spate {
namespace {

void forward(const forward_step& s) {
  blocks::embed(s, 1.0f);
  blocks::residual ffn_out;  // the previous layer's FFN output, added by the next norm
  for (int32_t l = 0; l < s.cfg.n_layer; ++l) {
    const layer_weights& L = blocks::begin_layer(s, l);
    blocks::qkv_projection(s, ffn_out, L);
    blocks::rope_kv_store(s, l, {.qkv_bias = true, .rope = s.rope});
    blocks::attention(s, l, {});
    blocks::output_projection(s, L);
    blocks::gated_ffn(s, {.pending = true}, L, ffn_activation::silu);
    ffn_out = {.pending = true};
  }
  blocks::residual_add(s, ffn_out);
  blocks::output_head(s, s.cfg.final_logit_softcap);
}

// GGUF llama checkpoints store Q/K permuted for interleaved-pair rotation.
void configure_llama(const gguf_file&, model_config& c) {
  c.rope = kernels::rope_mode::normal;
  c.qkv_bias = qkv_bias_rule::optional;
}

void configure_qwen2(const gguf_file&, model_config& c) {
  c.rope = kernels::rope_mode::neox;
  c.qkv_bias = qkv_bias_rule::required;
}

// phi3's GGUFs carry a sliding window that llama.cpp does not apply (its
// conversion does not say which layers slide); spate follows llama.cpp.
void configure_phi3(const gguf_file&, model_config& c) {
  c.rope = kernels::rope_mode::neox;
  c.fused_gate_up = true;
}

}  // namespace

extern const arch_def arch_llama{"llama", configure_llama, forward};
extern const arch_def arch_qwen2{"qwen2", configure_qwen2, forward};
extern const arch_def arch_phi3{"phi3", configure_phi3, forward};

}  // namespace spate
