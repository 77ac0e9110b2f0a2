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

const arch_def& arch_of(const model_config& c) {
  const arch_def* a = find_arch(c.arch);
  if (a == nullptr) throw std::invalid_argument("model_runner: unsupported architecture '" + c.arch + "'");
  return *a;
}

}  // namespace

model_runner::model_runner(const model_config& c, const model_weights& w, kv_cache& kv, thread_pool& pool)
    : cfg_(c), w_(w), kv_(kv), pool_(pool), arch_(arch_of(c)), proj_(pool), lora_(pool) {}

void model_runner::set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter) {
  if (slot < 0 || slot > 1024) throw std::invalid_argument("LoRA slot out of range");
  if (static_cast<size_t>(slot) >= adapters_.size()) adapters_.resize(static_cast<size_t>(slot) + 1);
  adapters_[static_cast<size_t>(slot)] = std::move(adapter);
}

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
      for (const auto* pw : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.router}) {
        act = std::max(act, kernels::act_bytes(*pw, max_tokens));
      }
    }
    if (cfg_.is_moe()) act = std::max(act, reserve_moe(max_tokens));
    act = std::max(act, kernels::act_bytes(w_.output, max_tokens));
    proj_.reserve(act);
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

size_t model_runner::reserve_moe(int64_t max_tokens) {
  moe_.reserve(cfg_, max_tokens, pool_.n_threads());
  const int64_t A = max_tokens * cfg_.n_expert_used;  // (token, expert) assignments
  size_t act = 0;
  for (const auto& L : w_.layers) {
    for (const auto* experts : {&L.exp_gate, &L.exp_up, &L.exp_down}) {
      for (const auto& pw : *experts) act = std::max(act, kernels::act_bytes(pw, A));
    }
  }
  return act;
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

  seq_of_row_.resize(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) seq_of_row_[static_cast<size_t>(t)] = tokens_[static_cast<size_t>(t)].seq;
  const bool lora = lora_.begin_step(batch, seq_of_row_, adapters_);

  op_timeline timeline(pool_, cfg_.n_layer);
  const forward_step step{.cfg = cfg_, .w = w_, .kv = kv_, .pool = pool_, .proj = proj_, .timeline = timeline,
                          .batch = batch, .tokens = tokens_.data(), .n_tokens = T,
                          .logit_rows = logit_rows_.data(), .n_logit_rows = static_cast<int64_t>(logit_rows_.size()),
                          .hidden_rows = hidden_rows_.data(), .n_hidden_rows = static_cast<int64_t>(hidden_rows_.size()),
                          .logits = logits, .hidden = hidden,
                          .x = x_.data(), .xn = xn_.data(), .q = q_.data(), .k = k_.data(), .v = v_.data(),
                          .attn = attn_.data(), .tmp = tmp_.data(), .gate = gate_.data(), .up = up_.data(),
                          .rope = rope_.data(), .rope_swa = separate_swa_rope() ? rope_swa_.data() : rope_.data(),
                          .scratch = scratch_.data(), .scratch_per_thread = scratch_per_thread_,
                          .moe = cfg_.is_moe() ? &moe_ : nullptr, .lora = lora ? &lora_ : nullptr};
  arch_.forward(step);
}

}  // namespace spate
