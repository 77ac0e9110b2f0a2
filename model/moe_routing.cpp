#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>

namespace spate {

void route_row(const float* logits, int32_t n_expert, int32_t k, bool renormalize, int32_t* ids, float* weights,
               float* scratch) {
  float max_logit = logits[0];
  for (int32_t e = 1; e < n_expert; ++e) max_logit = std::max(max_logit, logits[e]);
  float sum = 0.0f;
  for (int32_t e = 0; e < n_expert; ++e) {
    scratch[e] = std::exp(logits[e] - max_logit);
    sum += scratch[e];
  }
  const float inv = 1.0f / sum;
  for (int32_t e = 0; e < n_expert; ++e) scratch[e] *= inv;
  // Top-k by selection: k is small (8 of 128 for Qwen3-30B-A3B).
  for (int32_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int32_t e = 0; e < n_expert; ++e) {
      if (scratch[e] < 0.0f) continue;  // taken
      if (best < 0 || scratch[e] > scratch[best]) best = e;
    }
    ids[j] = best;
    weights[j] = scratch[best];
    scratch[best] = -1.0f;
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
    g.index[i] = a;
  }
}

}  // namespace spate
