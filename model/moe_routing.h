// Mixture-of-experts routing as plain functions (no pool, no weights), so the
// block in model/moe_ffn.cpp and its tests share one definition:
//  - route_row: one token's router logits -> its top-k experts and weights;
//  - group_by_expert: a step's routed rows -> per-expert row groups, so that
//    each chosen expert's weights are read once per step, whatever the number
//    of rows routed to it.
//
// Routing is per row: a row's experts and weights depend only on its own
// logits, never on the other rows of the step. Grouping only reorders rows.
//
// Thread-safety: pure functions; group_by_expert writes only its output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spate {

// How a router turns logits into the k experts' weights (as llama.cpp's
// expert gating functions):
//   softmax_all : softmax over all experts, top-k (Qwen3-MoE, Mixtral);
//   softmax_topk: top-k logits, softmax over those k (gpt-oss).
enum class expert_gating { softmax_all, softmax_topk };

// ids[0, k) = the k experts of the highest logits, highest first (ties: the
// lower id first). softmax_all: weights[j] = softmax(logits)[ids[j]], divided
// by their sum when renormalize (Qwen3-MoE, Mixtral); softmax_topk: weights =
// softmax of the k chosen logits (then renormalize, when asked, changes
// nothing but rounding).
// Preconditions: 1 <= k <= n_expert; logits finite or -inf; scratch holds n_expert floats.
void route_row(const float* logits, int32_t n_expert, int32_t k, expert_gating gating, bool renormalize, int32_t* ids,
               float* weights, float* scratch);

// A step's (token, slot) assignments grouped by expert. The grouped index a
// runs over the n_rows * k assignments; expert e's rows are the grouped
// indices [offset[e], offset[e + 1]), in ascending token order.
struct expert_groups {
  std::vector<int32_t> offset;  // [n_expert + 1]
  std::vector<int32_t> row;     // [n_rows * k]: grouped index -> token row
  std::vector<int32_t> index;   // [n_rows * k]: token row * k + slot -> grouped index
  std::vector<int32_t> active;  // the experts with at least one row, ascending
  std::vector<int32_t> expert;  // [n_rows * k]: grouped index -> its expert
  std::vector<int32_t> cursor;  // group_by_expert's fill position per expert

  int32_t n_rows_of(int32_t e) const { return offset[static_cast<size_t>(e) + 1] - offset[static_cast<size_t>(e)]; }
};

// Groups ids[n_rows x k] (each in [0, n_expert)) by expert into g, reusing g's storage.
void group_by_expert(const int32_t* ids, int64_t n_rows, int32_t k, int32_t n_expert, expert_groups& g);

}  // namespace spate
