#include "model/model_weights.h"

#include <algorithm>
#include <string>
#include <thread>

#include "model/gguf_file.h"
#include "kernels/dequant.h"

namespace spate {
namespace {

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

const gguf_tensor_info& need_tensor(const gguf_file& f, const std::string& name, std::vector<int64_t> dims) {
  const gguf_tensor_info* t = f.find_tensor(name);
  if (!t) throw gguf_error("model '" + f.path() + "' lacks tensor '" + name + "'");
  // Trailing 1-dims are equivalent.
  std::vector<int64_t> got = t->dims;
  while (got.size() > dims.size() && got.back() == 1) got.pop_back();
  if (got != dims) {
    throw gguf_error("model '" + f.path() + "': tensor '" + name + "' has shape " + dims_str(t->dims) +
                     ", expected " + dims_str(dims) + " from the architecture's hyper-parameters");
  }
  const auto tr = kernels::traits_of(t->type);
  if (!tr || !tr->supported) {
    throw gguf_error("model '" + f.path() + "': tensor '" + name + "' has type " + kernels::type_name(t->type) +
                     ", which spate does not support (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)");
  }
  return *t;
}

std::vector<float> to_f32(const gguf_tensor_info& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  kernels::dequantize_row(static_cast<kernels::ggml_type>(t.type), t.data, out.data(), t.n_elements());
  return out;
}

std::vector<float> vec_tensor(const gguf_file& f, const std::string& name, int64_t n, size_t& used) {
  const auto& t = need_tensor(f, name, {n});
  used += t.n_bytes;
  return to_f32(t);
}

// An [n x m] tensor (n contiguous) as m rows of n f32: per-expert biases.
std::vector<float> rows_tensor(const gguf_file& f, const std::string& name, int64_t n, int64_t m, size_t& used) {
  const auto& t = need_tensor(f, name, {n, m});
  used += t.n_bytes;
  return to_f32(t);
}

// Rows [row0, row0 + n_out) of a [n_in x n_total] matrix: a part of a fused
// tensor (phi3's QKV and gate|up); the part's bytes count once, with the first part.
kernels::packed_weight mat_part(const gguf_file& f, const std::string& name, int64_t n_in, int64_t n_total, int64_t row0,
                                int64_t n_out, kernels::isa_level level, size_t& used, size_t& owned) {
  const auto& t = need_tensor(f, name, {n_in, n_total});
  if (row0 == 0) used += t.n_bytes;
  const int64_t row_bytes = kernels::row_bytes(*kernels::traits_of(t.type), n_in);
  try {
    auto w = kernels::pack_weight(static_cast<kernels::ggml_type>(t.type), t.data + row0 * row_bytes, n_out, n_in, level);
    owned += w.bytes();
    return w;
  } catch (const std::exception& e) {
    throw gguf_error("model '" + f.path() + "': tensor '" + name + "': " + e.what());
  }
}

kernels::packed_weight mat_tensor(const gguf_file& f, const std::string& name, int64_t n_in, int64_t n_out,
                                  kernels::isa_level level, size_t& used, size_t& owned) {
  const auto& t = need_tensor(f, name, {n_in, n_out});
  used += t.n_bytes;
  try {
    auto w = kernels::pack_weight(static_cast<kernels::ggml_type>(t.type), t.data, n_out, n_in, level);
    owned += w.bytes();
    return w;
  } catch (const std::exception& e) {
    throw gguf_error("model '" + f.path() + "': tensor '" + name + "': " + e.what());
  }
}

// The n_expert [n_out x n_in] slices of a 3-D expert tensor [n_in, n_out, n_expert].
kernels::packed_weight_set expert_tensors(const gguf_file& f, const std::string& name, int64_t n_in, int64_t n_out,
                                          int64_t n_expert, kernels::isa_level level, size_t& used, size_t& owned) {
  const auto& t = need_tensor(f, name, {n_in, n_out, n_expert});
  used += t.n_bytes;
  const int64_t expert_bytes = n_out * kernels::row_bytes(*kernels::traits_of(t.type), n_in);
  kernels::packed_weight_set out;
  try {
    out = kernels::packed_weight_set(static_cast<kernels::ggml_type>(t.type), n_expert, n_out, n_in, level);
  } catch (const std::exception& e) {
    throw gguf_error("model '" + f.path() + "': tensor '" + name + "': " + e.what());
  }
  // Packed on all cores (the loader has the kernel read the layer ahead).
  const int n_threads = static_cast<int>(std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, n_expert));
  auto pack_some = [&](int tid) {
    for (int64_t e = tid; e < n_expert; e += n_threads) out.pack(e, t.data + e * expert_bytes);
  };
  std::vector<std::thread> workers;
  for (int tid = 1; tid < n_threads; ++tid) workers.emplace_back(pack_some, tid);
  pack_some(0);
  for (auto& th : workers) th.join();
  owned += out.bytes();
  // The experts are most of a MoE file: their mapped pages leave the resident
  // set as soon as they are copied, so loading never holds both.
  if (level != kernels::isa_level::scalar) f.release_pages(t.data, t.n_bytes);
  return out;
}

void load_ffn(const gguf_file& f, const model_config& c, const std::string& p, layer_weights& L, kernels::isa_level level,
              size_t& used, size_t& owned) {
  if (c.is_moe()) {
    if (f.find_tensor(p + "ffn_gate.0.weight")) {
      throw gguf_error("model '" + f.path() + "' stores its experts as separate tensors ('" + p +
                       "ffn_gate.0.weight'); convert it with a current llama.cpp, which merges them into '" + p +
                       "ffn_gate_exps.weight'");
    }
    L.router = mat_tensor(f, p + "ffn_gate_inp.weight", c.n_embd, c.n_expert, level, used, owned);
    if (c.moe_biases) {
      L.router_bias = vec_tensor(f, p + "ffn_gate_inp.bias", c.n_expert, used);
      L.exp_gate_bias = rows_tensor(f, p + "ffn_gate_exps.bias", c.n_ff_exp, c.n_expert, used);
      L.exp_up_bias = rows_tensor(f, p + "ffn_up_exps.bias", c.n_ff_exp, c.n_expert, used);
      L.exp_down_bias = rows_tensor(f, p + "ffn_down_exps.bias", c.n_embd, c.n_expert, used);
    }
    L.exp_gate = expert_tensors(f, p + "ffn_gate_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert, level, used, owned);
    L.exp_up = expert_tensors(f, p + "ffn_up_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert, level, used, owned);
    L.exp_down = expert_tensors(f, p + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd, c.n_expert, level, used, owned);
  } else if (c.fused_gate_up) {  // phi3: fused [gate | up] rows in ffn_up
    L.w_gate = mat_part(f, p + "ffn_up.weight", c.n_embd, 2 * int64_t{c.n_ff}, 0, c.n_ff, level, used, owned);
    L.w_up = mat_part(f, p + "ffn_up.weight", c.n_embd, 2 * int64_t{c.n_ff}, c.n_ff, c.n_ff, level, used, owned);
    L.w_down = mat_tensor(f, p + "ffn_down.weight", c.n_ff, c.n_embd, level, used, owned);
  } else {
    L.w_gate = mat_tensor(f, p + "ffn_gate.weight", c.n_embd, c.n_ff, level, used, owned);
    L.w_up = mat_tensor(f, p + "ffn_up.weight", c.n_embd, c.n_ff, level, used, owned);
    L.w_down = mat_tensor(f, p + "ffn_down.weight", c.n_ff, c.n_embd, level, used, owned);
  }
}

}  // namespace

void model_weights::embed(int32_t id, float* out, int32_t n_embd) const {
  kernels::dequantize_row(static_cast<kernels::ggml_type>(tok_embd_type), tok_embd + static_cast<int64_t>(id) * tok_embd_row_bytes,
                          out, n_embd);
}

model_weights load_model_weights(const gguf_file& f, const model_config& c, kernels::isa_level level,
                                 const std::function<void(int32_t, int32_t)>& on_progress) {
  model_weights w;
  size_t& used = w.file_weight_bytes;
  size_t& owned = w.owned_bytes;
  const auto& emb = need_tensor(f, "token_embd.weight", {c.n_embd, c.n_vocab});
  w.tok_embd_type = emb.type;
  w.tok_embd = emb.data;
  w.tok_embd_row_bytes = kernels::row_bytes(*kernels::traits_of(emb.type), c.n_embd);
  used += emb.n_bytes;

  const bool qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  if (c.qkv_bias == qkv_bias_rule::required && !qkv_bias) {
    throw gguf_error("model '" + f.path() + "': " + c.arch + " model lacks 'blk.0.attn_q.bias'");
  }
  if (c.qkv_bias == qkv_bias_rule::forbidden && qkv_bias) {
    throw gguf_error("model '" + f.path() + "': tensor 'blk.0.attn_q.bias' is unexpected for architecture '" + c.arch + "'");
  }
  w.layers.resize(static_cast<size_t>(c.n_layer));
  // The kernel reads layer l+1 from disk while layer l is repacked, so a
  // file that is not in the page cache loads at about the disk's speed or
  // the repacking's, whichever is slower, rather than their sum.
  auto prefetch_layer = [&f](int32_t l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const auto& t : f.tensors()) {
      if (t.name.starts_with(p)) f.prefetch_pages(t.data, t.n_bytes);
    }
  };
  prefetch_layer(0);
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (l + 1 < c.n_layer) {
      prefetch_layer(l + 1);
    } else if (const auto* out = f.find_tensor("output.weight")) {
      f.prefetch_pages(out->data, out->n_bytes);
    }
    layer_weights& L = w.layers[static_cast<size_t>(l)];
    L.attn_norm = vec_tensor(f, p + "attn_norm.weight", c.n_embd, used);
    if (f.find_tensor(p + "attn_qkv.weight")) {  // phi3: fused [q | k | v] rows
      const int64_t n_qkv = c.q_dim() + 2 * int64_t{c.kv_dim()};
      L.wq = mat_part(f, p + "attn_qkv.weight", c.n_embd, n_qkv, 0, c.q_dim(), level, used, owned);
      L.wk = mat_part(f, p + "attn_qkv.weight", c.n_embd, n_qkv, c.q_dim(), c.kv_dim(), level, used, owned);
      L.wv = mat_part(f, p + "attn_qkv.weight", c.n_embd, n_qkv, c.q_dim() + c.kv_dim(), c.kv_dim(), level, used, owned);
    } else {
      L.wq = mat_tensor(f, p + "attn_q.weight", c.n_embd, c.q_dim(), level, used, owned);
      L.wk = mat_tensor(f, p + "attn_k.weight", c.n_embd, c.kv_dim(), level, used, owned);
      L.wv = mat_tensor(f, p + "attn_v.weight", c.n_embd, c.kv_dim(), level, used, owned);
    }
    L.wo = mat_tensor(f, p + "attn_output.weight", c.q_dim(), c.n_embd, level, used, owned);
    if (f.find_tensor(p + "attn_output.bias")) L.bo = vec_tensor(f, p + "attn_output.bias", c.n_embd, used);
    if (c.attn_sinks) L.attn_sinks = vec_tensor(f, p + "attn_sinks.weight", c.n_head, used);
    if (qkv_bias) {
      L.bq = vec_tensor(f, p + "attn_q.bias", c.q_dim(), used);
      L.bk = vec_tensor(f, p + "attn_k.bias", c.kv_dim(), used);
      L.bv = vec_tensor(f, p + "attn_v.bias", c.kv_dim(), used);
    }
    if (c.qk_norm) {
      L.q_norm = vec_tensor(f, p + "attn_q_norm.weight", c.head_dim, used);
      L.k_norm = vec_tensor(f, p + "attn_k_norm.weight", c.head_dim, used);
    }
    L.ffn_norm = vec_tensor(f, p + c.ffn_norm_name + ".weight", c.n_embd, used);
    load_ffn(f, c, p, L, level, used, owned);
    if (c.post_norms) {
      L.post_attn_norm = vec_tensor(f, p + "post_attention_norm.weight", c.n_embd, used);
      L.post_ffn_norm = vec_tensor(f, p + "post_ffw_norm.weight", c.n_embd, used);
    }
    if (on_progress) on_progress(l + 1, c.n_layer + 1);
  }
  w.output_norm = vec_tensor(f, "output_norm.weight", c.n_embd, used);
  if (f.find_tensor("output.weight")) {
    w.output = mat_tensor(f, "output.weight", c.n_embd, c.n_vocab, level, used, owned);
  } else {
    w.tied_output = true;
    try {
      w.output = kernels::pack_weight(static_cast<kernels::ggml_type>(emb.type), emb.data, c.n_vocab, c.n_embd, level);
      owned += w.output.bytes();
    } catch (const std::exception& e) {
      throw gguf_error("model '" + f.path() + "': tied output from 'token_embd.weight': " + e.what());
    }
  }
  if (on_progress) on_progress(c.n_layer + 1, c.n_layer + 1);
  if (f.find_tensor("rope_freqs.weight")) w.rope_freqs = vec_tensor(f, "rope_freqs.weight", c.n_rot / 2, used);
  const bool has_long = f.find_tensor("rope_factors_long.weight") != nullptr;
  if (has_long != (f.find_tensor("rope_factors_short.weight") != nullptr)) {
    throw gguf_error("model '" + f.path() + "' has only one of 'rope_factors_long.weight' and 'rope_factors_short.weight'");
  }
  if (has_long) {
    if (!w.rope_freqs.empty()) throw gguf_error("model '" + f.path() + "' has both rope_freqs and LongRoPE factors");
    w.rope_long = vec_tensor(f, "rope_factors_long.weight", c.n_rot / 2, used);
    w.rope_short = vec_tensor(f, "rope_factors_short.weight", c.n_rot / 2, used);
    for (const auto* v : {&w.rope_long, &w.rope_short}) {
      for (float x : *v) {
        if (!(x > 0.0f && x < 1e6f)) throw gguf_error("model '" + f.path() + "': a LongRoPE factor is not positive and finite");
      }
    }
    w.rope_freqs = w.rope_short;
  }
  // Every tensor now has a copy of its own (matrices repacked, vectors in
  // f32) unless the scalar kernels read the file as is: its mapped pages leave
  // the resident set. token_embd too: its rows are looked up one by one, so
  // only the rows of tokens in use fault back in.
  for (const auto& t : f.tensors()) {
    if (level != kernels::isa_level::scalar || t.dims.size() == 1) f.release_pages(t.data, t.n_bytes);
  }
  return w;
}

void select_rope_factors(model_weights& w, const model_config& c, int32_t max_seq_len) {
  if (w.rope_long.empty()) return;
  w.rope_freqs = max_seq_len > c.n_ctx_orig ? w.rope_long : w.rope_short;
}

}  // namespace spate
