// Kernels of Gated DeltaNet layers, the recurrent ("linear attention") layers of the hybrid models
// Qwen3-Next (`qwen3next`) and Qwen3.5 (`qwen35`, `qwen35moe`), with llama.cpp 0.3.36's semantics:
// the causal short convolution (ggml_ssm_conv) and the gated delta rule (ggml_gated_delta_net, the fused
// op llama.cpp runs for decode and prefill alike).
//
// Every kernel exists as a scalar reference (gdn_ref.cpp), an AVX2+FMA version (gdn_avx2.cpp) and an
// AVX-512 version (gdn_avx512.cpp); the SIMD versions share gdn_simd.h. gdn_ops() returns the table for
// active_isa(), chosen once from CPUID (SPATE_MAX_ISA / SPATE_FORCE_REFERENCE cap it, kernels/isa.h).
//
// Contracts shared by all kernels here (those of kernels/ops.h):
//  * Thread-safety: pure with respect to the arguments; concurrent calls on disjoint outputs and
//    states are safe (one call per (sequence, head) is the unit of parallelism).
//  * Determinism: a result depends only on the arguments' values and sizes, never on alignment, on
//    the calling thread or on other calls. Unlike kernels/ops.h, every level computes each output by
//    the same operations in the same order (channels and value dims in the SIMD lanes, one FMA chain
//    per output), so all levels give the same bits; only short_conv's silu differs (its exp).
//  * No alignment is required beyond that of float. Kernels never call back.
//
// What the caller does around them (llama.cpp's qwen3next / qwen35 graphs, src/models/*.cpp):
//   conv input = the qkv projection (channels: q of all k-heads, then k, then v), y = silu(conv(x));
//   q, k per k-head L2-normalised: x / sqrt(sum x^2 + eps) with eps = the rms-norm eps, which is
//     ops_table::rms_norm with eps / dk and every weight 1 / sqrt(dk) (llama.cpp's build_gdn_l2_norm);
//   beta = sigmoid(x W_beta), g = softplus(x W_alpha + dt_bias) * ssm_a (ssm_a = -exp(A_log), so g <= 0);
//   v-head h reads k-head h % n_k_heads (ggml's tiled broadcast); scale = 1 / sqrt(dk).
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace spate::kernels {

// Largest kernel size short_conv takes (Qwen3-Next/3.5: 4).
inline constexpr int32_t k_short_conv_max_kernel = 8;
// Chunk size of delta_rule_chunked (llama.cpp's graph form uses 64 too).
inline constexpr int32_t k_delta_rule_chunk = 64;

// One (sequence, head) of the gated delta rule over n_tokens consecutive tokens. All rows are
// token-major; strides (ld_*) are in floats.
//
// State layout: dk rows of dv floats, state[i * dv + j] = S[j][i], where S (dv x dk) maps a query to
// the output, o = S q: row i of the buffer is key dim i, its dv values contiguous. (llama.cpp keeps the
// transpose, dv rows of dk; this layout puts the value dims, which the recurrence treats independently,
// in SIMD lanes, so no level needs a horizontal sum.)
//
// The recurrence, per token t (ggml's fused op; scale on the output where llama.cpp's unfused graph
// scales q instead):
//   S = exp(g_t) S;  delta[j] = (v_t[j] - sum_i S[j][i] k_t[i]) beta_t;  S[j][i] += k_t[i] delta[j];
//   o_t[j] = scale sum_i S[j][i] q_t[i]
// delta_rule computes exactly this, at every level with the same operations in the same order, so
// all levels give the same bits. With st the buffer (st[i][j] = state[i * dv + j]), a = expf(g_t) (the
// scalar libm expf) and each sum one chain of fused multiply-adds over i ascending from +0:
//   acc = sum_i fma(k_t[i], a * st[i][j]);  delta = (v_t[j] - acc) * beta_t;
//   st[i][j] = fma(k_t[i], delta, a * st[i][j]);  o_t[j] = (sum_i fma(q_t[i], st[i][j])) * scale.
struct delta_rule_args {
  const float* q = nullptr;     // token t's query at q + t * ld_q: dk floats, L2-normalised by the caller
  int64_t ld_q = 0;
  const float* k = nullptr;     // token t's key at k + t * ld_k: dk floats, L2-normalised by the caller
  int64_t ld_k = 0;
  const float* v = nullptr;     // token t's value at v + t * ld_v: dv floats
  int64_t ld_v = 0;
  const float* g = nullptr;     // token t's log-decay at g[t * ld_g] (<= 0 in the models; any finite value works)
  int64_t ld_g = 1;
  const float* beta = nullptr;  // token t's write strength at beta[t * ld_beta] (sigmoid already applied)
  int64_t ld_beta = 1;
  float* out = nullptr;         // token t's output at out + t * ld_out: dv floats; must not overlap the inputs
  int64_t ld_out = 0;
  float* state = nullptr;       // dk * dv floats (layout above), read then overwritten with the state after
                                // the last token; zeros before a sequence's first token
  int32_t n_tokens = 0;         // >= 0 (0: nothing is read or written)
  int32_t dk = 0, dv = 0;       // >= 1
  float scale = 1.0f;           // output scale, 1 / sqrt(dk) in the models
  int64_t pos0 = 0;             // delta_rule_chunked only: absolute position of token 0 in its sequence
};

struct gdn_table {
  // Causal depthwise convolution (ggml_ssm_conv) of n_tokens tokens of n_ch channels with its
  // rolling state, kernel size `kernel` (1 .. k_short_conv_max_kernel):
  //   x_ext = the kernel-1 rows of state followed by the n_tokens rows of x
  //   y[t][c] = act(sum_{j < kernel} w[c * kernel + j] * x_ext[t + j][c])
  // the sum one chain of fused multiply-adds over j ascending from +0 (the same bits at every level;
  // llama.cpp rounds each product), act = silu (z / (1 + exp(-z))) if `silu`, else the identity (the
  // SIMD levels' exp differs from libm's by ~1 ulp, so with silu levels agree within float tolerance).
  // Then state = the last kernel-1 rows of x_ext.
  // Layouts: x row t at x + t * ld_x, y row t at y + t * ld_y (n_ch floats each); w: n_ch rows of
  // `kernel` taps, GGUF's ssm_conv1d weight as stored ({kernel, n_ch} in ggml order); state:
  // kernel-1 rows of n_ch floats, oldest first (row kernel-2 = the input of the latest token),
  // zeros at a sequence's start. y must not overlap x, w or state. Any split of a sequence into
  // calls gives the same bits (each output is a function of the same kernel inputs).
  void (*short_conv)(const float* x, int64_t ld_x, const float* w, int32_t kernel, float* state, float* y,
                     int64_t ld_y, int32_t n_tokens, int64_t n_ch, bool silu);

  // The gated delta rule, token by token (delta_rule_args), for decode and prefill alike.
  // Batch invariance: each output element and state element goes through the same arithmetic
  // whatever n_tokens is, so a sequence split into calls at ANY token boundaries (one call of n
  // tokens, n calls of one, a prefill chunked anywhere and then decoded) gives bitwise the same
  // outputs and final state, at every level. Scratch-free.
  void (*delta_rule)(const delta_rule_args& a);

  // The same recurrence in chunked form (the WY form llama.cpp's graph builder uses without the
  // fused op, build_delta_net_chunking), mathematically equal to delta_rule. Per chunk of m tokens
  // (t, s in [0, m) within the chunk; S0 = the state before it; dots are fma chains over i from +0):
  //   G_t = g_0 + ... + g_t (float adds in order); E_ts = expf(G_t - G_s);
  //   A_ts = (beta_t E_ts) (k_t . k_s) for s < t;  W_ts = E_ts (q_t . k_s) for s <= t;
  //   delta_t = fma chain over s < t of -A_ts delta_s, from beta_t * fma(-expf(G_t), S0 k_t, v_t);
  //   o_t = scale * (fma chain over s <= t of W_ts delta_s, from expf(G_t) * S0 q_t);
  //   S = fma chain over s of (k_s expf(G_{m-1} - G_s)) delta_s^T, from expf(G_{m-1}) * S0.
  // The same bits at every level; it rounds differently from delta_rule (tests bound the difference).
  // Batch invariance: chunks are aligned to absolute positions: a chunk covers positions
  // [c * k_delta_rule_chunk, (c + 1) * k_delta_rule_chunk) of the sequence (pos0 = the absolute
  // position of token 0; a call's first and last chunks may be partial). So calls split at multiples
  // of k_delta_rule_chunk give bitwise the results of one call; a split elsewhere cuts a chunk in
  // two and agrees only within tolerance. A caller that cannot align its splits (chunked prefill
  // at any budget, recompute after preemption, speculative verification) uses delta_rule.
  // scratch: delta_rule_chunked_scratch_floats(dk, dv) floats, not shared between concurrent calls.
  void (*delta_rule_chunked)(const delta_rule_args& a, float* scratch);
};

// Floats of scratch that delta_rule_chunked needs (the same at every level).
int64_t delta_rule_chunked_scratch_floats(int32_t dk, int32_t dv);

const gdn_table& gdn_ops();  // for active_isa()
// For tests and benchmarks; requires cpu_supports(level).
const gdn_table& gdn_ops_for(isa_level level);

}  // namespace spate::kernels
