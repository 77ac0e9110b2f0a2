// gemma3: QK-norm, an RMSNorm of each branch's output before its residual
// add, GELU-tanh FFN, scaled embeddings, and sliding-window layers (every
// layer but each pattern-th reads only the last n_swa positions and rotates
// with its own RoPE base).
//
//   x = sqrt(n_embd) * embed(tokens)
//   per layer (sliding: window n_swa, RoPE base rope_freq_base_swa):
//     q, k, v = Wq, Wk, Wv . RMSNorm(x)
//     q, k = RoPE(RMSNorm_head(q)), RoPE(RMSNorm_head(k)); store k, v
//     x += RMSNorm(Wo . attention(q, K, V))
//     x += RMSNorm(W_down . (GELU(W_gate . RMSNorm(x)) * W_up . RMSNorm(x)))
//   logits = W_out . RMSNorm(x)     (soft-capped when the file sets a cap)
#include "model/arch/arch.h"

#include <cmath>

#include "model/gguf_file.h"

namespace spate {
namespace {

void forward(const forward_step& s) {
  blocks::embed(s, s.cfg.embd_scale);
  blocks::residual ffn_out;  // the previous layer's FFN output, added by the next norm
  for (int32_t l = 0; l < s.cfg.n_layer; ++l) {
    const layer_weights& L = blocks::begin_layer(s, l);
    const bool sliding = s.cfg.is_swa_layer(l);
    blocks::qkv_projection(s, ffn_out, L);
    blocks::rope_kv_store(s, l, {.qk_norm = true, .rope = sliding ? s.rope_swa : s.rope});
    blocks::attention(s, l, {.window = sliding ? s.cfg.n_swa : 0});
    blocks::output_projection(s, L);
    blocks::gated_ffn(s, {.pending = true, .post_norm = L.post_attn_norm.data()}, L, s.cfg.ffn_act);
    ffn_out = {.pending = true, .post_norm = L.post_ffn_norm.data()};
  }
  blocks::residual_add(s, ffn_out);
  blocks::output_head(s, s.cfg.final_logit_softcap);
}

void configure(const gguf_file& f, model_config& c) {
  const std::string a = c.arch + ".";
  c.rope = kernels::rope_mode::neox;
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
  if (!(c.rope_freq_base_swa > 1.0f)) throw gguf_error("model '" + f.path() + "': invalid rope.freq_base_swa");
}

}  // namespace

extern const arch_def arch_gemma3{"gemma3", configure, forward};

}  // namespace spate
