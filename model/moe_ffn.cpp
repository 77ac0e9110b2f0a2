// blocks::moe_ffn (model/layers.h): the mixture-of-experts FFN.
//
// A step's T tokens each pick k experts; the (token, expert) assignments are
// grouped by expert (group_by_expert), and each chosen expert runs once over
// its group's rows: gate and up of every chosen expert form one parallel
// loop of column chunks, down another, so a decode step reads only its k
// experts and a batched step reads each chosen expert once, with 2 threads
// or 64 busy however few experts are hot.
//
// Bitwise batch invariance: the router logits, the route and the combine are
// per row, and a matmul's row depends only on its own activations (kernels/
// matmul.h), so grouping with other rows never changes a row's result.
#include <algorithm>

#include "model/layers.h"
#include "model/layers_internal.h"
#include "model/op_timeline.h"

namespace spate {

void moe_workspace::reserve(const model_config& c, int64_t max_tokens, int n_threads) {
  const size_t T = static_cast<size_t>(max_tokens), E = static_cast<size_t>(c.n_expert);
  const size_t A = T * static_cast<size_t>(c.n_expert_used);  // (token, expert) assignments
  auto ensure = [](auto& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  ensure(logits, T * E);
  ensure(ids, A);
  ensure(weights, A);
  ensure(probs, E * static_cast<size_t>(n_threads));
  ensure(x, A * static_cast<size_t>(c.n_embd));
  ensure(gate, A * static_cast<size_t>(c.n_ff_exp));
  ensure(up, A * static_cast<size_t>(c.n_ff_exp));
  ensure(out, A * static_cast<size_t>(c.n_embd));
  groups.offset.reserve(E + 1);
  groups.cursor.reserve(E);
  groups.active.reserve(E);
  groups.row.reserve(A);
  groups.index.reserve(A);
  jobs.reserve(2 * E);
}

}  // namespace spate

namespace spate::blocks {

void moe_ffn(const forward_step& s, residual r, const layer_weights& L) {
  moe_workspace& ws = *s.moe;
  const auto& ops = kernels::ops();
  const int32_t D = s.cfg.n_embd, F = s.cfg.n_ff_exp, E = s.cfg.n_expert, K = s.cfg.n_expert_used;
  const int64_t T = s.n_tokens;

  s.timeline.mark("moe_router");
  detail::residual_norm pro{s, r, L.ffn_norm.data()};
  s.proj.project(s.xn, D, T, {{&L.router, ws.logits.data(), E}}, prologue_of(pro));
  s.pool.parallel_for(T, [&](int64_t t, int tid) {
    float* logits = ws.logits.data() + t * E;
    if (!L.router_bias.empty()) ops.add(logits, L.router_bias.data(), E);
    route_row(logits, E, K, s.cfg.moe_gating, s.cfg.expert_weights_norm, ws.ids.data() + t * K,
              ws.weights.data() + t * K, ws.probs.data() + static_cast<size_t>(tid) * static_cast<size_t>(E));
  });
  group_by_expert(ws.ids.data(), T, K, E, ws.groups);
  const expert_groups& g = ws.groups;
  const int64_t n_assign = T * K;

  s.timeline.mark("moe_gate_up");
  ws.jobs.clear();
  for (int32_t e : g.active) {
    const int64_t row0 = g.offset[static_cast<size_t>(e)], n = g.n_rows_of(e);
    ws.jobs.push_back({&L.exp_gate[static_cast<size_t>(e)], row0, n, ws.gate.data(), F});
    ws.jobs.push_back({&L.exp_up[static_cast<size_t>(e)], row0, n, ws.up.data(), F});
  }
  // Gathers each assignment's normed token row, fused into the quantize loop.
  auto gather = [&](int64_t a0, int64_t a1) {
    for (int64_t a = a0; a < a1; ++a) {
      const float* src = s.xn + static_cast<int64_t>(g.row[static_cast<size_t>(a)]) * D;
      std::copy(src, src + D, ws.x.data() + a * D);
    }
  };
  s.proj.project_grouped(ws.x.data(), D, n_assign, ws.jobs, prologue_of(gather));

  s.timeline.mark("moe_down");
  ws.jobs.clear();
  for (int32_t e : g.active) {
    ws.jobs.push_back({&L.exp_down[static_cast<size_t>(e)], g.offset[static_cast<size_t>(e)], g.n_rows_of(e),
                       ws.out.data(), D});
  }
  // Each assignment's [biases,] activation, fused into the down projection's quantize loop.
  const bool biases = !L.exp_gate_bias.empty();
  const bool oai = s.cfg.ffn_act == ffn_activation::swiglu_oai;
  auto activate = [&](int64_t a0, int64_t a1) {
    for (int64_t a = a0; a < a1; ++a) {
      float* gate = ws.gate.data() + a * F;
      float* up = ws.up.data() + a * F;
      if (biases) {
        const int64_t e = g.expert[static_cast<size_t>(a)];
        ops.add(gate, L.exp_gate_bias.data() + e * F, F);
        ops.add(up, L.exp_up_bias.data() + e * F, F);
      }
      if (oai) {
        ops.swiglu_oai(gate, up, gate, F, k_swiglu_oai_alpha, k_swiglu_oai_limit);
      } else {
        ops.swiglu(gate, up, gate, F);
      }
    }
  };
  s.proj.project_grouped(ws.gate.data(), F, n_assign, ws.jobs, prologue_of(activate));

  s.timeline.mark("moe_combine");
  s.pool.parallel_for(T, [&](int64_t t, int) {
    float* dst = s.tmp + t * D;
    for (int32_t j = 0; j < K; ++j) {
      const float w = ws.weights[static_cast<size_t>(t * K + j)];
      float* src = ws.out.data() + static_cast<int64_t>(g.index[static_cast<size_t>(t * K + j)]) * D;
      if (!L.exp_down_bias.empty()) ops.add(src, L.exp_down_bias.data() + static_cast<int64_t>(ws.ids[static_cast<size_t>(t * K + j)]) * D, D);
      if (j == 0) {
        for (int32_t d = 0; d < D; ++d) dst[d] = w * src[d];
      } else {
        for (int32_t d = 0; d < D; ++d) dst[d] += w * src[d];
      }
    }
  });
}

}  // namespace spate::blocks
