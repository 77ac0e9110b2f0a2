// qwen3: llama's block with a per-head RMSNorm of Q and K before RoPE, NeoX
// RoPE, no biases.
//
//   x = embed(tokens)
//   per layer:
//     q, k, v = Wq, Wk, Wv . RMSNorm(x)
//     q, k = RoPE(RMSNorm_head(q)), RoPE(RMSNorm_head(k)); store k, v
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
    blocks::rope_kv_store(s, l, {.qk_norm = true, .rope = s.rope});
    blocks::attention(s, l, {});
    blocks::output_projection(s, L);
    blocks::gated_ffn(s, {.pending = true}, L, ffn_activation::silu);
    ffn_out = {.pending = true};
  }
  blocks::residual_add(s, ffn_out);
  blocks::output_head(s, s.cfg.final_logit_softcap);
}

void configure(const gguf_file&, model_config& c) {
  c.rope = kernels::rope_mode::neox;
  c.qk_norm = true;
}

}  // namespace

extern const arch_def arch_qwen3{"qwen3", configure, forward};

}  // namespace spate
