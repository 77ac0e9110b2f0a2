#include "model/model_runner.h"

#include "model/op_timeline.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace spate {
namespace {

// Ensures v holds at least n elements (grows only).
template <typename T>
void ensure(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

model_runner::model_runner(const model_config& c, const model_weights& w, kv_cache& kv, thread_pool& pool)
    : cfg_(c), w_(w), kv_(kv), pool_(pool) {}

void model_runner::reserve(int64_t max_tokens, int64_t max_logit_rows, int32_t max_ctx) {
  max_tokens = std::max<int64_t>(max_tokens, max_logit_rows);
  if (max_tokens > cap_tokens_) {
    const size_t T = static_cast<size_t>(max_tokens);
    ensure(x_, T * cfg_.n_embd);
    ensure(xn_, T * cfg_.n_embd);
    ensure(tmp_, T * cfg_.n_embd);
    ensure(q_, T * cfg_.q_dim());
    ensure(attn_, T * cfg_.q_dim());
    ensure(k_, T * cfg_.kv_dim());
    ensure(v_, T * cfg_.kv_dim());
    ensure(gate_, T * cfg_.n_ff);
    ensure(up_, T * cfg_.n_ff);
    ensure(rope_, T * static_cast<size_t>(std::max(cfg_.n_rot, 1)));
    if (separate_swa_rope()) ensure(rope_swa_, T * static_cast<size_t>(std::max(cfg_.n_rot, 1)));
    size_t act = 0;
    for (const auto& L : w_.layers) {
      for (const auto* pw : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
        act = std::max(act, kernels::act_bytes(*pw, max_tokens));
      }
    }
    act = std::max(act, kernels::act_bytes(w_.output, max_tokens));
    ensure(act_, act);
    tokens_.reserve(T);
    logit_rows_.reserve(T);
    hidden_rows_.reserve(T);
    cap_tokens_ = max_tokens;
  }
  if (max_ctx > cap_ctx_) {
    scratch_per_thread_ = kernels::attention_scratch_floats(cfg_.n_group(), max_ctx);
    ensure(scratch_, static_cast<size_t>(scratch_per_thread_) * static_cast<size_t>(pool_.n_threads()));
    cap_ctx_ = max_ctx;
  }
}

void model_runner::validate(const forward_batch& batch) const {
  const int32_t window = cfg_.kv_window();
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const forward_seq& q = batch.seqs[s];
    const std::string where = "forward: sequence " + std::to_string(s) + ": ";
    if (q.n_past < 0) throw std::invalid_argument(where + "negative n_past");
    if (q.n_logits < 0 || q.n_logits > static_cast<int32_t>(q.tokens.size())) {
      throw std::invalid_argument(where + "n_logits out of range");
    }
    for (int32_t t : q.tokens) {
      if (t < 0 || t >= cfg_.n_vocab) throw std::invalid_argument(where + "token id " + std::to_string(t) + " out of range");
    }
    const int64_t need = q.n_past + static_cast<int64_t>(q.tokens.size());
    if (static_cast<int64_t>(q.block_table.size()) * kv_.block_size() < need) {
      throw std::invalid_argument(where + "block table covers " +
                                  std::to_string(q.block_table.size() * static_cast<size_t>(kv_.block_size())) +
                                  " positions, needs " + std::to_string(need));
    }
    const int64_t used_blocks = (need + kv_.block_size() - 1) / kv_.block_size();
    // When every layer slides, blocks wholly before the first query's window
    // are never read and may have been released (k_no_block).
    const int64_t first_read = window > 0 ? std::max<int64_t>(0, q.n_past + 1 - window) : 0;
    for (int64_t b = first_read / kv_.block_size(); b < used_blocks; ++b) {
      const int32_t id = q.block_table[static_cast<size_t>(b)];
      if (id < 0 || id >= kv_.n_blocks()) throw std::invalid_argument(where + "block id " + std::to_string(id) + " out of range");
    }
  }
}

void model_runner::quantize(const kernels::packed_weight& w, const float* x, int64_t ldx, int64_t n_rows,
                            row_prologue pro) {
  // Chunks of rows; the activation format is per row, so any split gives the same bytes.
  const int64_t rows_per_task = std::max<int64_t>(1, n_rows / (4 * pool_.n_threads()));
  const int64_t n_tasks = (n_rows + rows_per_task - 1) / rows_per_task;
  uint8_t* act = act_.data();
  pool_.parallel_for(n_tasks, [&](int64_t t, int) {
    const int64_t r0 = t * rows_per_task;
    const int64_t r1 = std::min(n_rows, r0 + rows_per_task);
    if (pro.fn != nullptr) pro.fn(pro.ctx, r0, r1);
    kernels::quantize_act(w, x, ldx, r0, r1, act);
  });
}

void model_runner::project(const float* x, int64_t ldx, int64_t n_rows, std::initializer_list<mm_job> jobs,
                           row_prologue pro) {
  // Weights that share an activation format share one quantized copy of x
  // (e.g. Q/K/V of the same type); a mixed-type file (Q4_K_M) gets one per format.
  mm_job group[4];
  bool done[4] = {false, false, false, false};
  const mm_job* all = jobs.begin();
  const int n_jobs = static_cast<int>(jobs.size());
  for (int i = 0; i < n_jobs; ++i) {
    if (done[i]) continue;
    int n_group = 0;
    const int fmt = kernels::act_format_id(*all[i].w);
    for (int j = i; j < n_jobs; ++j) {
      if (!done[j] && kernels::act_format_id(*all[j].w) == fmt && all[j].w->n_in() == all[i].w->n_in()) {
        group[n_group++] = all[j];
        done[j] = true;
      }
    }
    quantize(*all[i].w, x, ldx, n_rows, pro);
    pro = {};  // the rows are ready for the next format's quantization
    matmuls(group, n_group, n_rows);
  }
}

int64_t model_runner::target_matmul_tasks(const mm_job* jobs, int n_jobs, int64_t n_rows) const {
  const int64_t n_threads = pool_.n_threads();
  if (n_rows > k_stream_max_rows) return 8 * n_threads;  // compute-bound: many tasks balance the threads
  int64_t bytes = 0;
  for (int i = 0; i < n_jobs; ++i) {
    const auto traits = kernels::traits_of(static_cast<uint32_t>(jobs[i].w->type()));
    bytes += traits ? jobs[i].w->n_out() * kernels::row_bytes(*traits, jobs[i].w->n_in()) : 0;
  }
  const int64_t by_bytes = bytes / k_min_stream_task_bytes;
  const int64_t per_thread = std::clamp<int64_t>((by_bytes + n_threads - 1) / n_threads, 1, 8);
  return per_thread * n_threads;
}

void model_runner::matmuls(const mm_job* jobs, int n_jobs, int64_t n_rows) {
  // Split every weight's output columns into chunks (multiples of its granularity),
  // enough chunks for load balance; all chunks of all jobs form one parallel loop.
  struct chunk_plan {
    const mm_job* job;
    int64_t chunk;
    int64_t n_chunks;
  };
  chunk_plan plans[4];
  int64_t total = 0;
  int64_t total_out = 0;
  for (int i = 0; i < n_jobs; ++i) total_out += jobs[i].w->n_out();
  const int64_t target_tasks = target_matmul_tasks(jobs, n_jobs, n_rows);
  for (int i = 0; i < n_jobs; ++i) {
    const mm_job& j = jobs[i];
    const int64_t g = kernels::col_granularity(*j.w);
    const int64_t m = kernels::col_split_multiple(*j.w, n_rows);
    const int64_t n_out = j.w->n_out();
    const int64_t want = std::max<int64_t>(1, target_tasks * n_out / std::max<int64_t>(1, total_out));
    int64_t chunk = (n_out + want - 1) / want;
    // At the kernel's fastest multiple m, the nearest one (576 columns in 16 tasks: 18 chunks
    // of 32, not 15 of 40 whose last group runs alone); otherwise rounded up to g.
    chunk = m > g ? std::max(m, (chunk + m / 2) / m * m) : std::max(g, (chunk + g - 1) / g * g);
    const int64_t n_chunks = (n_out + chunk - 1) / chunk;
    plans[i] = {&j, chunk, n_chunks};
    total += n_chunks;
  }
  const void* act = act_.data();
  pool_.parallel_for(total, [&](int64_t t, int) {
    int p = 0;
    while (t >= plans[p].n_chunks) t -= plans[p++].n_chunks;
    const chunk_plan& pl = plans[p];
    const int64_t c0 = t * pl.chunk;
    const int64_t c1 = std::min(pl.job->w->n_out(), c0 + pl.chunk);
    kernels::matmul(*pl.job->w, act, n_rows, pl.job->y, pl.job->ldy, c0, c1);
  });
}

void model_runner::forward(const forward_batch& batch, float* logits, float* hidden) {
  validate(batch);
  if (hidden == nullptr && batch.n_hidden_rows() > 0) throw std::invalid_argument("forward: hidden rows without a hidden buffer");
  const int64_t T = batch.n_tokens();
  if (T == 0) return;
  int32_t max_ctx = 0;
  for (const auto& s : batch.seqs) max_ctx = std::max<int32_t>(max_ctx, s.n_past + static_cast<int32_t>(s.tokens.size()));
  reserve(T, batch.n_logit_rows(), max_ctx);

  tokens_.clear();
  logit_rows_.clear();
  hidden_rows_.clear();
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const auto& q = batch.seqs[s];
    const int32_t n = static_cast<int32_t>(q.tokens.size());
    for (int32_t i = 0; i < n; ++i) {
      if (i >= n - q.n_logits) logit_rows_.push_back(static_cast<int64_t>(tokens_.size()));
      if (q.hidden) hidden_rows_.push_back(static_cast<int64_t>(tokens_.size()));
      tokens_.push_back({static_cast<int32_t>(s), q.n_past + i});
    }
  }

  const auto& ops = kernels::ops();
  const int32_t D = cfg_.n_embd, QD = cfg_.q_dim(), KD = cfg_.kv_dim(), F = cfg_.n_ff, HD = cfg_.head_dim;
  const int32_t n_kv = cfg_.n_head_kv, n_group = cfg_.n_group();
  const float scale = cfg_.attn_scale > 0.0f ? cfg_.attn_scale : 1.0f / std::sqrt(static_cast<float>(HD));
  const float* freq_factors = w_.rope_freqs.empty() ? nullptr : w_.rope_freqs.data();
  float* x = x_.data();
  float* xn = xn_.data();

  // Embedding, and each token's rotary angles (once per step, used by every layer).
  const int32_t n_rot = cfg_.n_rot;
  float* rope = rope_.data();
  float* rope_swa = separate_swa_rope() ? rope_swa_.data() : rope;  // the sliding layers' angles
  op_timeline timeline(pool_, cfg_.n_layer);
  timeline.mark("embed");
  pool_.parallel_for(T, [&](int64_t t, int) {
    const auto& tr = tokens_[static_cast<size_t>(t)];
    const int32_t id = batch.seqs[static_cast<size_t>(tr.seq)].tokens[static_cast<size_t>(tr.pos - batch.seqs[static_cast<size_t>(tr.seq)].n_past)];
    w_.embed(id, x + t * D, D);
    if (cfg_.embd_scale != 1.0f) {
      for (int32_t d = 0; d < D; ++d) x[t * D + d] *= cfg_.embd_scale;
    }
    kernels::rope_angles(n_rot, tr.pos, cfg_.rope_freq_base, freq_factors, rope + t * n_rot);
    if (cfg_.rope_attn_factor != 1.0f) {
      for (int32_t i = 0; i < n_rot; ++i) rope[t * n_rot + i] *= cfg_.rope_attn_factor;
    }
    if (rope_swa != rope) kernels::rope_angles(n_rot, tr.pos, cfg_.rope_freq_base_swa, freq_factors, rope_swa + t * n_rot);
  });

  // x += [post_ffn_norm] down-projection, for row t after layer L's FFN.
  auto ffn_residual = [&](const layer_weights& L, int64_t t) {
    float* out = tmp_.data() + t * D;
    if (!L.post_ffn_norm.empty()) ops.rms_norm(out, L.post_ffn_norm.data(), out, D, cfg_.rms_eps);
    ops.add(x + t * D, out, D);
  };
  for (int32_t l = 0; l < cfg_.n_layer; ++l) {
    const layer_weights& L = w_.layers[static_cast<size_t>(l)];
    const kernels::paged_kv_view kv = kv_.layer_view(l);
    const bool swa = cfg_.is_swa_layer(l);
    const float* rope_l = swa ? rope_swa : rope;

    timeline.layer(l);
    timeline.mark("qkv_proj");
    // The previous layer's residual, then attn_norm, fused into the quantize loop.
    const layer_weights* prev = l > 0 ? &w_.layers[static_cast<size_t>(l - 1)] : nullptr;
    auto attn_in = [&](int64_t r0, int64_t r1) {
      for (int64_t t = r0; t < r1; ++t) {
        if (prev != nullptr) ffn_residual(*prev, t);
        ops.rms_norm(x + t * D, L.attn_norm.data(), xn + t * D, D, cfg_.rms_eps);
      }
    };
    project(xn, D, T, {{&L.wq, q_.data(), QD}, {&L.wk, k_.data(), KD}, {&L.wv, v_.data(), KD}}, prologue_of(attn_in));
    timeline.mark("rope_kv_store");

    // Bias, RoPE and KV store, per token, in tasks of up to block_size
    // consecutive tokens: the slots of a block share the cache lines of its
    // transposed K (kernels/ops.h), so a prompt's tokens of one block are
    // written by one thread rather than alternating between cores.
    const int64_t store_run = std::clamp<int64_t>(T / (4 * pool_.n_threads()), 1, kv.block_size);
    auto store_token = [&](int64_t t) {
      float* qt = q_.data() + t * QD;
      float* kt = k_.data() + t * KD;
      float* vt = v_.data() + t * KD;
      if (!L.bq.empty()) {
        ops.add(qt, L.bq.data(), QD);
        ops.add(kt, L.bk.data(), KD);
        ops.add(vt, L.bv.data(), KD);
      }
      if (!L.q_norm.empty()) {
        for (int32_t h = 0; h < cfg_.n_head; ++h) ops.rms_norm(qt + h * HD, L.q_norm.data(), qt + h * HD, HD, cfg_.rms_eps);
        for (int32_t h = 0; h < n_kv; ++h) ops.rms_norm(kt + h * HD, L.k_norm.data(), kt + h * HD, HD, cfg_.rms_eps);
      }
      const auto& tr = tokens_[static_cast<size_t>(t)];
      ops.rope(qt, cfg_.n_head, HD, n_rot, rope_l + t * n_rot, cfg_.rope);
      ops.rope(kt, n_kv, HD, n_rot, rope_l + t * n_rot, cfg_.rope);
      const auto& bt = batch.seqs[static_cast<size_t>(tr.seq)].block_table;
      const int32_t block = bt[static_cast<size_t>(tr.pos / kv.block_size)];
      const int32_t slot = tr.pos % kv.block_size;
      for (int32_t h = 0; h < n_kv; ++h) ops.kv_store(kv, block, slot, h, kt + h * HD, vt + h * HD);
    };
    pool_.parallel_for((T + store_run - 1) / store_run, [&](int64_t task, int) {
      for (int64_t t = task * store_run; t < std::min(T, (task + 1) * store_run); ++t) store_token(t);
    });

    // Attention over the (token, kv head) items, in runs of consecutive items per
    // task: each item prefetches the next one's K/V before it computes.
    timeline.mark("attention");
    const int64_t n_items = T * n_kv;
    // At most 8 items per task, so a long prefill (later tokens attend to more
    // positions) still splits into many tasks and balances.
    const int64_t run = std::clamp<int64_t>(n_items / (4 * pool_.n_threads()), 1, 8);
    auto window = [&](int64_t item, int32_t& first, int32_t& end) -> const int32_t* {
      const auto& tr = tokens_[static_cast<size_t>(item / n_kv)];
      first = swa ? std::max(0, tr.pos + 1 - cfg_.n_swa) : 0;
      end = tr.pos + 1;
      return batch.seqs[static_cast<size_t>(tr.seq)].block_table.data();
    };
    pool_.parallel_for((n_items + run - 1) / run, [&](int64_t task, int tid) {
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
        ops.attention(q_.data() + t * QD + h * n_group * HD, n_group, kv, h, bt, first, end, scale,
                      attn_.data() + t * QD + h * n_group * HD, scratch_.data() + tid * scratch_per_thread_);
      }
    });

    timeline.mark("o_proj");
    project(attn_.data(), QD, T, {{&L.wo, tmp_.data(), D}});
    timeline.mark("gate_up_proj");
    // The attention residual and ffn_norm, fused into the quantize loop.
    auto ffn_in = [&](int64_t r0, int64_t r1) {
      for (int64_t t = r0; t < r1; ++t) {
        float* out = tmp_.data() + t * D;
        if (!L.post_attn_norm.empty()) ops.rms_norm(out, L.post_attn_norm.data(), out, D, cfg_.rms_eps);
        ops.add(x + t * D, out, D);
        ops.rms_norm(x + t * D, L.ffn_norm.data(), xn + t * D, D, cfg_.rms_eps);
      }
    };
    project(xn, D, T, {{&L.w_gate, gate_.data(), F}, {&L.w_up, up_.data(), F}}, prologue_of(ffn_in));
    timeline.mark("down_proj");
    // The gated activation, fused into the quantize loop.
    const auto act = cfg_.ffn_act == ffn_activation::gelu_tanh ? ops.geglu : ops.swiglu;
    auto down_in = [&](int64_t r0, int64_t r1) {
      for (int64_t t = r0; t < r1; ++t) act(gate_.data() + t * F, up_.data() + t * F, gate_.data() + t * F, F);
    };
    project(gate_.data(), F, T, {{&L.w_down, tmp_.data(), D}}, prologue_of(down_in));
  }
  // The last layer's FFN residual (the others ran in the next layer's quantize loop).
  timeline.mark("residual");
  pool_.parallel_for(T, [&](int64_t t, int) { ffn_residual(w_.layers.back(), t); });

  timeline.end_layers();
  timeline.mark("output");
  // Final-normed hidden states of the hidden rows (embeddings).
  pool_.parallel_for(static_cast<int64_t>(hidden_rows_.size()), [&](int64_t r, int) {
    ops.rms_norm(x + hidden_rows_[static_cast<size_t>(r)] * D, w_.output_norm.data(), hidden + r * D, D, cfg_.rms_eps);
  });
  // Final norm and output projection for the requested rows only.
  const int64_t R = static_cast<int64_t>(logit_rows_.size());
  if (R == 0) return;
  pool_.parallel_for(R, [&](int64_t r, int) {
    ops.rms_norm(x + logit_rows_[static_cast<size_t>(r)] * D, w_.output_norm.data(), xn + r * D, D, cfg_.rms_eps);
  });
  project(xn, D, R, {{&w_.output, logits, cfg_.n_vocab}});
  if (const float cap = cfg_.final_logit_softcap; cap > 0.0f) {
    const int64_t V = cfg_.n_vocab;
    pool_.parallel_for(R, [&](int64_t r, int) {
      for (float* l = logits + r * V; l != logits + (r + 1) * V; ++l) *l = cap * std::tanh(*l / cap);
    });
  }
}

}  // namespace spate
