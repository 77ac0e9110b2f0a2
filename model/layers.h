// The building blocks of a decoder-only transformer's forward pass, shared by
// the architectures (model/arch/*.cpp): embedding lookup, the attention and
// FFN input projections (with the residual add and RMSNorm fused into them),
// QKV bias / QK-norm / RoPE / paged KV store, paged attention, the gated FFN
// and the output head. An architecture's forward calls them in the order of
// its block diagram.
//
// Every block runs one stage over all T tokens of the step on the thread
// pool, reading and writing the runner's workspaces through forward_step
// (plain data). Each per-row computation reads only that row's data (and its
// own sequence's KV), so a row's result does not depend on what else shares
// the step, nor on how rows are split into tasks.
//
// Residual adds are deferred: a branch (attention or FFN) leaves its output in
// tmp, and the next block that norms x adds it first, inside its own quantize
// loop (a `residual` says whether one is waiting and its post-norm).
//
// Thread-safety: blocks run on the forward's calling thread only (they drive
// the pool); the pool's tasks write disjoint rows.
#pragma once

#include <cstdint>

#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/moe_routing.h"
#include "model/projection.h"
#include "model/thread_pool.h"

namespace spate {

class op_timeline;  // model/op_timeline.h
class lora_runner;  // model/lora.h (includes util/, which model's users do not see)

struct token_ref {
  int32_t seq;  // index into batch.seqs
  int32_t pos;  // absolute position in that sequence
};

// The mixture-of-experts FFN's workspaces (model/moe_ffn.cpp), sized by
// model_runner::reserve for T tokens of k = n_expert_used experts each.
struct moe_workspace {
  std::vector<float> logits;          // [T x n_expert] router logits
  std::vector<int32_t> ids;           // [T x k] chosen experts, most probable first
  std::vector<float> weights;         // [T x k] their weights
  std::vector<float> probs;           // [n_threads x n_expert] route_row scratch
  expert_groups groups;               // the step's rows grouped by expert
  std::vector<float> x, gate, up;     // grouped rows: [T*k x n_embd], [T*k x n_ff_exp] x 2
  std::vector<float> out;             // [T*k x n_embd] each (token, expert)'s output
  std::vector<grouped_job> jobs;      // the grouped projections' jobs

  // Grows the buffers for steps of up to max_tokens tokens on n_threads threads.
  void reserve(const model_config& c, int64_t max_tokens, int n_threads);
};

// One forward step's data, built by model_runner::forward. The pointers are
// the runner's workspaces, valid for the step; row t of a [T x dim] buffer is
// the t-th token of the flattened batch (tokens[t]).
struct forward_step {
  const model_config& cfg;
  const model_weights& w;
  const kv_cache& kv;
  thread_pool& pool;
  projector& proj;
  op_timeline& timeline;
  const forward_batch& batch;
  const token_ref* tokens;    // [n_tokens]
  int64_t n_tokens;
  const int64_t* logit_rows;  // [n_logit_rows] token indices whose logits are returned, in batch order
  int64_t n_logit_rows;
  const int64_t* hidden_rows; // [n_hidden_rows] token indices whose final-normed hidden states are returned
  int64_t n_hidden_rows;
  float* logits;              // [n_logit_rows x n_vocab]
  float* hidden;              // [n_hidden_rows x n_embd]; null when n_hidden_rows == 0
  // Workspaces, [n_tokens x dim] row-major: x the residual stream, xn its
  // normed copy, tmp a branch's output ([n_embd]); q/attn [q_dim], k/v [kv_dim],
  // gate/up [n_ff].
  float *x, *xn, *q, *k, *v, *attn, *tmp, *gate, *up;
  // Per token, n_rot floats of rotary cos | sin (kernels::rope_angles) at
  // cfg.rope_freq_base (scaled by cfg.rope_attn_factor), and at
  // cfg.rope_freq_base_swa for sliding layers; rope_swa == rope when the
  // bases agree. Written by blocks::embed.
  float* rope;
  float* rope_swa;
  float* scratch;             // attention scratch, scratch_per_thread floats per pool thread
  int64_t scratch_per_thread;
  moe_workspace* moe;         // the MoE FFN's buffers; null for dense models
  lora_runner* lora;          // the step's LoRA adapters; null when no row has one
};

namespace blocks {

// A branch output waiting in tmp to join the residual stream:
// x += [RMSNorm(tmp) * post_norm] tmp, row by row.
struct residual {
  bool pending = false;
  const float* post_norm = nullptr;  // [n_embd]: the branch is normed before the add (gemma3); null: none
};

// Layer l's weights; marks the layer's start in the timeline.
const layer_weights& begin_layer(const forward_step& s, int32_t l);

// x = scale * token embedding (scale 1: no multiply); fills s.rope (and
// s.rope_swa when separate). Timeline op "embed".
void embed(const forward_step& s, float scale);

// x += r; xn = RMSNorm(x) * L.attn_norm; q, k, v = xn . Wq^T, Wk^T, Wv^T.
// Timeline op "qkv_proj".
void qkv_projection(const forward_step& s, residual r, const layer_weights& L);

struct qk_options {
  bool qkv_bias = false;       // add the layer's Q/K/V biases when the file has them (qwen2; some llama files)
  bool qk_norm = false;        // per-head RMSNorm of Q and K with L.q_norm / L.k_norm (qwen3, gemma3)
  const float* rope = nullptr; // the angle table (s.rope or s.rope_swa)
};
// Per token: [bias], [QK-norm], RoPE (cfg.rope mode) of q and k, then k and v
// into layer l's paged KV slots of the token's position. Timeline op "rope_kv_store".
void rope_kv_store(const forward_step& s, int32_t l, qk_options o);

struct attention_options {
  int32_t window = 0;          // > 0: a query at p reads positions (p - window, p] only; 0: all of [0, p]
  const float* sinks = nullptr;  // [n_head]: a logit per query head that joins its softmax (gpt-oss); null: none
};
// attn = softmax(q . K^T * scale) . V per query head, over layer l's cache
// (scale cfg.attn_scale, else 1/sqrt(head_dim)). Timeline op "attention".
void attention(const forward_step& s, int32_t l, attention_options o);

// tmp = attn . Wo^T (+ L.bo when the file has it). Timeline op "o_proj".
void output_projection(const forward_step& s, const layer_weights& L);

// x += r; xn = RMSNorm(x) * L.ffn_norm; tmp = (act(xn . W_gate^T) * (xn . W_up^T)) . W_down^T.
// Timeline ops "gate_up_proj", "down_proj".
void gated_ffn(const forward_step& s, residual r, const layer_weights& L, ffn_activation act);

// Mixture of experts: x += r; xn = RMSNorm(x) * L.ffn_norm; each row's router
// logits xn . L.router^T (+ router bias) pick its top cfg.n_expert_used
// experts (route_row, cfg.moe_gating); the step's rows are grouped by expert,
// so each chosen expert's gate, up and down weights stream once per step;
// tmp = sum over the row's experts, most probable first, of weight *
// (W_down_e . act(W_gate_e . xn [+ b], W_up_e . xn [+ b]) [+ b]), act SiLU
// gating or gpt-oss's clamped SwiGLU (cfg.ffn_act), biases with cfg.moe_biases.
// A row's result depends only on its own xn. Timeline ops "moe_router",
// "moe_gate_up", "moe_down", "moe_combine".
void moe_ffn(const forward_step& s, residual r, const layer_weights& L);

// x += r on every row (the last layer's branch). Timeline op "residual".
void residual_add(const forward_step& s, residual r);

// Ends the layers' timeline; hidden rows: RMSNorm(x) * output_norm; logit rows:
// the same, then . output^T, then cap * tanh(logit / cap) when softcap > 0.
// Timeline op "output".
void output_head(const forward_step& s, float softcap);

}  // namespace blocks
}  // namespace spate
