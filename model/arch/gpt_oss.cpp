// gpt-oss (OpenAI's open-weight mixture of experts), as llama.cpp reads it
// (its LLM_ARCH_OPENAI_MOE, general.architecture "gpt-oss"):
//   - Q/K/V and output projection biases; NeoX RoPE with YaRN scaling;
//   - a learned sink logit per query head in every attention softmax;
//   - layers alternating sliding-window (even layers, window n_swa) and full
//     attention, unless the file sets another period;
//   - a mixture-of-experts FFN with biases on the router and the experts, the
//     softmax taken over the chosen k logits, and a clamped SwiGLU.
//
//   x = embed(tokens)
//   per layer (sliding: window n_swa):
//     q, k, v = Wq, Wk, Wv . RMSNorm(x) + biases
//     q, k = RoPE_yarn(q), RoPE_yarn(k); store k, v
//     x += Wo . attention_with_sinks(q, K, V) + bo
//     x += MoE(RMSNorm(x))        (the norm's tensor is post_attention_norm)
//   logits = W_out . RMSNorm(x)
#include "model/arch/arch.h"

#include "model/gguf_file.h"

namespace spate {
namespace {

void forward(const forward_step& s) {
  blocks::embed(s, 1.0f);
  blocks::residual ffn_out;  // the previous layer's FFN output, added by the next norm
  for (int32_t l = 0; l < s.cfg.n_layer; ++l) {
    const layer_weights& L = blocks::begin_layer(s, l);
    const bool sliding = s.cfg.is_swa_layer(l);
    blocks::qkv_projection(s, ffn_out, L);
    blocks::rope_kv_store(s, l, {.qkv_bias = true, .rope = sliding ? s.rope_swa : s.rope});
    blocks::attention(s, l, {.window = sliding ? s.cfg.n_swa : 0, .sinks = L.attn_sinks.data()});
    blocks::output_projection(s, L);
    blocks::moe_ffn(s, {.pending = true}, L);
    ffn_out = {.pending = true};
  }
  blocks::residual_add(s, ffn_out);
  blocks::output_head(s, 0.0f);
}

void configure(const gguf_file& f, model_config& c) {
  const std::string a = c.arch + ".";
  c.rope = kernels::rope_mode::neox;
  c.qkv_bias = qkv_bias_rule::optional;  // the real files have them; llama.cpp does not require them
  c.attn_sinks = true;
  c.ffn_norm_name = "post_attention_norm";
  read_moe_config(f, c, /*required=*/true);
  // llama.cpp's graph fixes these for the architecture, whatever the file says.
  c.moe_gating = expert_gating::softmax_topk;
  c.expert_weights_norm = false;
  c.moe_biases = true;
  c.ffn_act = ffn_activation::swiglu_oai;
  // Sliding layers: l % period < period - 1 (period 2: the even layers), as
  // llama.cpp's set_swa_pattern; an integer period in the file overrides 2.
  int32_t period = 2;
  if (const std::string key = a + "attention.sliding_window_pattern"; f.has(key)) period = require_positive(f, key, 1024);
  c.n_swa = require_positive(f, a + "attention.sliding_window", 1 << 24);
  c.layer_swa.assign(static_cast<size_t>(c.n_layer), 0);
  for (int32_t l = 0; l < c.n_layer; ++l) c.layer_swa[static_cast<size_t>(l)] = l % period < period - 1;
  c.rope_freq_base_swa = static_cast<float>(f.get_float(a + "rope.freq_base_swa").value_or(c.rope_freq_base));
  if (!(c.rope_freq_base_swa > 1.0f)) throw gguf_error("model '" + f.path() + "': invalid rope.freq_base_swa");
}

}  // namespace

extern const arch_def arch_gpt_oss{"gpt-oss", configure, forward};

}  // namespace spate
