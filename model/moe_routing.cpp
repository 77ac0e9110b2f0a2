#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace spate {

namespace {

// scratch[0, n) = softmax(x[0, n)), numerically stable.
void softmax_into(const float* x, int32_t n, float* scratch) {
  float max_x = x[0];
  for (int32_t i = 1; i < n; ++i) max_x = std::max(max_x, x[i]);
  float sum = 0.0f;
  for (int32_t i = 0; i < n; ++i) {
    scratch[i] = std::exp(x[i] - max_x);
    sum += scratch[i];
  }
  const float inv = 1.0f / sum;
  for (int32_t i = 0; i < n; ++i) scratch[i] *= inv;
}

// ids[0, k) = the k largest of v[0, n) (ties: lower index first), by
// selection (k is small: 8 of 128 for Qwen3-30B-A3B, 4 of 32 for gpt-oss-20b);
// values[j] = v[ids[j]]. taken: n bytes of scratch.
void top_k(const float* v, int32_t n, int32_t k, int32_t* ids, float* values, std::vector<uint8_t>& taken) {
  taken.assign(static_cast<size_t>(n), 0);
  for (int32_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int32_t e = 0; e < n; ++e) {
      if (taken[static_cast<size_t>(e)]) continue;
      if (best < 0 || v[e] > v[best]) best = e;
    }
    ids[j] = best;
    values[j] = v[best];
    taken[static_cast<size_t>(best)] = 1;
  }
}

}  // namespace

void route_row(const float* logits, int32_t n_expert, int32_t k, expert_gating gating, bool renormalize, int32_t* ids,
               float* weights, float* scratch) {
  thread_local std::vector<uint8_t> taken;
  if (gating == expert_gating::softmax_topk) {
    top_k(logits, n_expert, k, ids, weights, taken);
    softmax_into(weights, k, scratch);
    std::copy(scratch, scratch + k, weights);
  } else {
    softmax_into(logits, n_expert, scratch);
    top_k(scratch, n_expert, k, ids, weights, taken);
  }
  if (renormalize) {
    float chosen = 0.0f;
    for (int32_t j = 0; j < k; ++j) chosen += weights[j];
    // llama.cpp clamps the sum away from zero before dividing.
    const float denom = std::max(chosen, 6.103515625e-5f);
    for (int32_t j = 0; j < k; ++j) weights[j] /= denom;
  }
}

void group_by_expert(const int32_t* ids, int64_t n_rows, int32_t k, int32_t n_expert, expert_groups& g) {
  const size_t n_assign = static_cast<size_t>(n_rows) * static_cast<size_t>(k);
  g.offset.assign(static_cast<size_t>(n_expert) + 1, 0);
  g.row.resize(n_assign);
  g.index.resize(n_assign);
  g.expert.resize(n_assign);
  g.active.clear();
  for (size_t i = 0; i < n_assign; ++i) ++g.offset[static_cast<size_t>(ids[i]) + 1];
  for (int32_t e = 0; e < n_expert; ++e) {
    if (g.offset[static_cast<size_t>(e) + 1] > 0) g.active.push_back(e);
    g.offset[static_cast<size_t>(e) + 1] += g.offset[static_cast<size_t>(e)];
  }
  // Fill in token order: each expert's rows ascend.
  g.cursor.assign(g.offset.begin(), g.offset.end() - 1);
  for (size_t i = 0; i < n_assign; ++i) {
    const int32_t a = g.cursor[static_cast<size_t>(ids[i])]++;
    g.row[static_cast<size_t>(a)] = static_cast<int32_t>(i / static_cast<size_t>(k));
    g.expert[static_cast<size_t>(a)] = ids[i];
    g.index[i] = a;
  }
}

}  // namespace spate
