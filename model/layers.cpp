#include "model/layers.h"

#include <algorithm>
#include <cmath>

#include "model/layers_internal.h"
#include "model/lora.h"
#include "model/op_timeline.h"

namespace spate::blocks {
using detail::add_residual;
using detail::residual_norm;

// The index of layer L within s.w.layers.
int32_t layer_index(const forward_step& s, const layer_weights& L) {
  return static_cast<int32_t>(&L - s.w.layers.data());
}

const layer_weights& begin_layer(const forward_step& s, int32_t l) {
  s.timeline.layer(l);
  return s.w.layers[static_cast<size_t>(l)];
}

void embed(const forward_step& s, float scale) {
  s.timeline.mark("embed");
  const int32_t D = s.cfg.n_embd, n_rot = s.cfg.n_rot;
  const float* freq_factors = s.w.rope_freqs.empty() ? nullptr : s.w.rope_freqs.data();
  s.pool.parallel_for(s.n_tokens, [&](int64_t t, int) {
    const token_ref& tr = s.tokens[t];
    const forward_seq& q = s.batch.seqs[static_cast<size_t>(tr.seq)];
    const int32_t id = q.tokens[static_cast<size_t>(tr.pos - q.n_past)];
    s.w.embed(id, s.x + t * D, D);
    if (scale != 1.0f) {
      for (int32_t d = 0; d < D; ++d) s.x[t * D + d] *= scale;
    }
    float* rope = s.rope + t * n_rot;
    if (s.cfg.rope_yarn_factor > 0.0f) {  // YaRN (gpt-oss): its own magnitude scale, no LongRoPE factors
      kernels::rope_angles_yarn(n_rot, tr.pos, s.cfg.rope_freq_base, s.cfg.yarn, rope);
      if (s.rope_swa != s.rope) kernels::rope_angles_yarn(n_rot, tr.pos, s.cfg.rope_freq_base_swa, s.cfg.yarn_swa, s.rope_swa + t * n_rot);
      return;
    }
    kernels::rope_angles(n_rot, tr.pos, s.cfg.rope_freq_base, freq_factors, rope);
    if (s.cfg.rope_attn_factor != 1.0f) {
      for (int32_t i = 0; i < n_rot; ++i) rope[i] *= s.cfg.rope_attn_factor;
    }
    if (s.rope_swa != s.rope) {
      kernels::rope_angles(n_rot, tr.pos, s.cfg.rope_freq_base_swa, freq_factors, s.rope_swa + t * n_rot);
    }
  });
}

void qkv_projection(const forward_step& s, residual r, const layer_weights& L) {
  s.timeline.mark("qkv_proj");
  residual_norm pro{s, r, L.attn_norm.data()};
  s.proj.project(s.xn, s.cfg.n_embd, s.n_tokens,
                 {{&L.wq, s.q, s.cfg.q_dim()}, {&L.wk, s.k, s.cfg.kv_dim()}, {&L.wv, s.v, s.cfg.kv_dim()}},
                 prologue_of(pro));
  if (s.lora) {
    s.lora->apply(layer_index(s, L), s.xn, s.cfg.n_embd,
                  {{lora_target::q, s.q, s.cfg.q_dim()}, {lora_target::k, s.k, s.cfg.kv_dim()}, {lora_target::v, s.v, s.cfg.kv_dim()}});
  }
}

void rope_kv_store(const forward_step& s, int32_t l, qk_options o) {
  s.timeline.mark("rope_kv_store");
  const auto& ops = kernels::ops();
  const layer_weights& L = s.w.layers[static_cast<size_t>(l)];
  const kernels::paged_kv_view kv = s.kv.layer_view(l);
  const int32_t QD = s.cfg.q_dim(), KD = s.cfg.kv_dim(), HD = s.cfg.head_dim, n_rot = s.cfg.n_rot;
  const int32_t n_head = s.cfg.n_head, n_kv = s.cfg.n_head_kv;
  const bool bias = o.qkv_bias && !L.bq.empty();
  const int64_t T = s.n_tokens;
  // In tasks of up to block_size consecutive tokens: the slots of a block
  // share the cache lines of its transposed K (kernels/ops.h), so a prompt's
  // tokens of one block are written by one thread rather than alternating
  // between cores.
  const int64_t store_run = std::clamp<int64_t>(T / (4 * s.pool.n_threads()), 1, kv.block_size);
  auto store_token = [&](int64_t t) {
    float* qt = s.q + t * QD;
    float* kt = s.k + t * KD;
    float* vt = s.v + t * KD;
    if (bias) {
      ops.add(qt, L.bq.data(), QD);
      ops.add(kt, L.bk.data(), KD);
      ops.add(vt, L.bv.data(), KD);
    }
    if (o.qk_norm) {
      for (int32_t h = 0; h < n_head; ++h) ops.rms_norm(qt + h * HD, L.q_norm.data(), qt + h * HD, HD, s.cfg.rms_eps);
      for (int32_t h = 0; h < n_kv; ++h) ops.rms_norm(kt + h * HD, L.k_norm.data(), kt + h * HD, HD, s.cfg.rms_eps);
    }
    const token_ref& tr = s.tokens[t];
    ops.rope(qt, n_head, HD, n_rot, o.rope + t * n_rot, s.cfg.rope);
    ops.rope(kt, n_kv, HD, n_rot, o.rope + t * n_rot, s.cfg.rope);
    const auto& bt = s.batch.seqs[static_cast<size_t>(tr.seq)].block_table;
    const int32_t block = bt[static_cast<size_t>(tr.pos / kv.block_size)];
    const int32_t slot = tr.pos % kv.block_size;
    for (int32_t h = 0; h < n_kv; ++h) ops.kv_store(kv, block, slot, h, kt + h * HD, vt + h * HD);
  };
  s.pool.parallel_for((T + store_run - 1) / store_run, [&](int64_t task, int) {
    for (int64_t t = task * store_run; t < std::min(T, (task + 1) * store_run); ++t) store_token(t);
  });
}

void attention(const forward_step& s, int32_t l, attention_options o) {
  s.timeline.mark("attention");
  const auto& ops = kernels::ops();
  const kernels::paged_kv_view kv = s.kv.layer_view(l);
  const int32_t QD = s.cfg.q_dim(), HD = s.cfg.head_dim, n_kv = s.cfg.n_head_kv, n_group = s.cfg.n_group();
  const float scale = s.cfg.attn_scale > 0.0f ? s.cfg.attn_scale : 1.0f / std::sqrt(static_cast<float>(HD));
  // The (token, kv head) items, in runs of consecutive items per task: each
  // item prefetches the next one's K/V before it computes. At most 8 items per
  // task, so a long prefill (later tokens attend to more positions) still
  // splits into many tasks and balances.
  const int64_t n_items = s.n_tokens * n_kv;
  const int64_t run = std::clamp<int64_t>(n_items / (4 * s.pool.n_threads()), 1, 8);
  auto window = [&](int64_t item, int32_t& first, int32_t& end) -> const int32_t* {
    const token_ref& tr = s.tokens[item / n_kv];
    first = o.window > 0 ? std::max(0, tr.pos + 1 - o.window) : 0;
    end = tr.pos + 1;
    return s.batch.seqs[static_cast<size_t>(tr.seq)].block_table.data();
  };
  s.pool.parallel_for((n_items + run - 1) / run, [&](int64_t task, int tid) {
    const int64_t i1 = std::min(n_items, (task + 1) * run);
    for (int64_t i = task * run; i < i1; ++i) {
      int32_t first = 0, end = 0;
      if (i + 1 < i1) {
        const int32_t* nbt = window(i + 1, first, end);
        kernels::prefetch_kv(kv, static_cast<int32_t>((i + 1) % n_kv), nbt, first, end);
      }
      const int32_t* bt = window(i, first, end);
      const int64_t t = i / n_kv;
      const int32_t h = static_cast<int32_t>(i % n_kv);
      ops.attention(s.q + t * QD + h * n_group * HD, n_group, kv, h, bt, first, end, scale,
                    o.sinks ? o.sinks + h * n_group : nullptr, s.attn + t * QD + h * n_group * HD,
                    s.scratch + tid * s.scratch_per_thread);
    }
  });
}

void output_projection(const forward_step& s, const layer_weights& L) {
  s.timeline.mark("o_proj");
  s.proj.project(s.attn, s.cfg.q_dim(), s.n_tokens, {{&L.wo, s.tmp, s.cfg.n_embd}});
  if (s.lora) s.lora->apply(layer_index(s, L), s.attn, s.cfg.q_dim(), {{lora_target::o, s.tmp, s.cfg.n_embd}});
  if (L.bo.empty()) return;
  const auto& ops = kernels::ops();
  const int32_t D = s.cfg.n_embd;
  s.pool.parallel_for(s.n_tokens, [&](int64_t t, int) { ops.add(s.tmp + t * D, L.bo.data(), D); });
}

void gated_ffn(const forward_step& s, residual r, const layer_weights& L, ffn_activation act) {
  const int32_t D = s.cfg.n_embd, F = s.cfg.n_ff;
  s.timeline.mark("gate_up_proj");
  residual_norm pro{s, r, L.ffn_norm.data()};
  s.proj.project(s.xn, D, s.n_tokens, {{&L.w_gate, s.gate, F}, {&L.w_up, s.up, F}}, prologue_of(pro));
  if (s.lora) s.lora->apply(layer_index(s, L), s.xn, D, {{lora_target::gate, s.gate, F}, {lora_target::up, s.up, F}});
  s.timeline.mark("down_proj");
  // The gated activation, fused into the down projection's quantize loop.
  const auto& ops = kernels::ops();
  const auto gated = act == ffn_activation::gelu_tanh ? ops.geglu : ops.swiglu;
  auto down_in = [&](int64_t r0, int64_t r1) {
    for (int64_t t = r0; t < r1; ++t) gated(s.gate + t * F, s.up + t * F, s.gate + t * F, F);
  };
  s.proj.project(s.gate, F, s.n_tokens, {{&L.w_down, s.tmp, D}}, prologue_of(down_in));
  if (s.lora) s.lora->apply(layer_index(s, L), s.gate, F, {{lora_target::down, s.tmp, D}});
}

void residual_add(const forward_step& s, residual r) {
  s.timeline.mark("residual");
  if (!r.pending) return;
  s.pool.parallel_for(s.n_tokens, [&](int64_t t, int) { add_residual(s, r, t); });
}

void output_head(const forward_step& s, float softcap) {
  s.timeline.end_layers();
  s.timeline.mark("output");
  const auto& ops = kernels::ops();
  const int32_t D = s.cfg.n_embd;
  const float* norm = s.w.output_norm.data();
  s.pool.parallel_for(s.n_hidden_rows, [&](int64_t r, int) {
    ops.rms_norm(s.x + s.hidden_rows[r] * D, norm, s.hidden + r * D, D, s.cfg.rms_eps);
  });
  // Final norm and output projection for the requested rows only.
  const int64_t R = s.n_logit_rows;
  if (R == 0) return;
  s.pool.parallel_for(R, [&](int64_t r, int) {
    ops.rms_norm(s.x + s.logit_rows[r] * D, norm, s.xn + r * D, D, s.cfg.rms_eps);
  });
  s.proj.project(s.xn, D, R, {{&s.w.output, s.logits, s.cfg.n_vocab}});
  if (softcap > 0.0f) {
    const int64_t V = s.cfg.n_vocab;
    s.pool.parallel_for(R, [&](int64_t r, int) {
      for (float* l = s.logits + r * V; l != s.logits + (r + 1) * V; ++l) *l = softcap * std::tanh(*l / softcap);
    });
  }
}

}  // namespace spate::blocks
