// The model's tensors, bound from a GGUF file and prepared for the kernels.
//
// Matrices become kernels::packed_weight (which may point into the file's
// mmap or own a repacked copy); norm weights and biases are converted to owned
// f32 vectors. The gguf_file must outlive the model_weights.
// Immutable after load; safe to read from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/model_config.h"
#include "kernels/ggml_type.h"
#include "kernels/matmul.h"

namespace spate {

class gguf_file;

struct layer_weights {
  std::vector<float> attn_norm;               // [n_embd]
  kernels::packed_weight wq, wk, wv, wo;      // q: [q_dim x n_embd], k/v: [kv_dim x n_embd], o: [n_embd x q_dim]
  std::vector<float> bq, bk, bv;              // when the file has them (cfg.qkv_bias: qwen2 always, llama maybe); else empty
  std::vector<float> bo;                      // [n_embd] attn_output.bias when the file has it (gpt-oss); else empty
  std::vector<float> attn_sinks;              // [n_head] when cfg.attn_sinks; else empty
  std::vector<float> q_norm, k_norm;          // [head_dim], when cfg.qk_norm; empty otherwise
  std::vector<float> post_attn_norm;          // [n_embd], when cfg.post_norms; empty otherwise
  std::vector<float> ffn_norm;                // [n_embd]
  kernels::packed_weight w_gate, w_up, w_down;  // gate/up: [n_ff x n_embd], down: [n_embd x n_ff]
  std::vector<float> post_ffn_norm;           // [n_embd], when cfg.post_norms; empty otherwise
  // Mixture of experts (cfg.is_moe()), instead of w_gate/w_up/w_down: the
  // router and every expert's matrices, each expert a slice of the file's 3-D
  // *_exps tensor packed as a matrix of its own (in one buffer per tensor), so a
  // step reads only its chosen experts.
  kernels::packed_weight router;                    // [n_expert x n_embd] (ffn_gate_inp)
  kernels::packed_weight_set exp_gate, exp_up;      // n_expert x [n_ff_exp x n_embd]
  kernels::packed_weight_set exp_down;              // n_expert x [n_embd x n_ff_exp]
  // cfg.moe_biases (gpt-oss); else empty.
  std::vector<float> router_bias;                   // [n_expert]
  std::vector<float> exp_gate_bias, exp_up_bias;    // [n_expert x n_ff_exp], expert e's at e * n_ff_exp
  std::vector<float> exp_down_bias;                 // [n_expert x n_embd]
};

struct model_weights {
  // Token embeddings stay in their GGUF type and are dequantized row by row.
  uint32_t tok_embd_type = 0;
  const uint8_t* tok_embd = nullptr;
  int64_t tok_embd_row_bytes = 0;
  std::vector<layer_weights> layers;
  std::vector<float> output_norm;             // [n_embd]
  kernels::packed_weight output;              // [n_vocab x n_embd]; tied to token_embd when the file has no output.weight
  bool tied_output = false;
  std::vector<float> rope_freqs;              // optional per-dimension frequency factors [n_rot / 2]
  std::vector<float> rope_short, rope_long;   // phi3 LongRoPE factor sets [n_rot / 2]; select_rope_factors() picks one
  size_t file_weight_bytes = 0;               // bytes of tensor data used from the file
  size_t owned_bytes = 0;                     // bytes of repacked/converted copies we own

  // Writes the f32 embedding of token id into out[n_embd]. Precondition: 0 <= id < n_vocab.
  void embed(int32_t id, float* out, int32_t n_embd) const;
};

// Binds and validates every tensor; throws gguf_error naming the tensor whose
// shape or type is wrong, missing, or unsupported. on_progress(done, total)
// runs after each of the n_layer + 1 units (the layers, then the output).
model_weights load_model_weights(const gguf_file& f, const model_config& c, kernels::isa_level level,
                                 const std::function<void(int32_t, int32_t)>& on_progress = {});

// LongRoPE (phi3): rope_freqs becomes the long factor set when sequences may
// hold more than cfg.n_ctx_orig positions, else the short one (as llama.cpp
// decides from its context size). load_model_weights() picks the short set;
// call this once more, before any forward pass, with the maximum sequence length.
void select_rope_factors(model_weights& w, const model_config& c, int32_t max_seq_len);

}  // namespace spate
