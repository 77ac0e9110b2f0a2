// Per-row helpers shared by the blocks' sources (model/layers.cpp,
// model/moe_ffn.cpp); not part of the blocks' interface.
#pragma once

#include "model/layers.h"

namespace spate::blocks::detail {

// x += r for row t.
inline void add_residual(const forward_step& s, residual r, int64_t t) {
  const auto& ops = kernels::ops();
  const int32_t D = s.cfg.n_embd;
  float* out = s.tmp + t * D;
  if (r.post_norm != nullptr) ops.rms_norm(out, r.post_norm, out, D, s.cfg.rms_eps);
  ops.add(s.x + t * D, out, D);
}

// Rows [r0, r1): x += r, then xn = RMSNorm(x) * norm; the prologue of a projection of xn.
struct residual_norm {
  const forward_step& s;
  residual r;
  const float* norm;
  void operator()(int64_t r0, int64_t r1) const {
    const auto& ops = kernels::ops();
    const int32_t D = s.cfg.n_embd;
    for (int64_t t = r0; t < r1; ++t) {
      if (r.pending) add_residual(s, r, t);
      ops.rms_norm(s.x + t * D, norm, s.xn + t * D, D, s.cfg.rms_eps);
    }
  }
};


}  // namespace spate::blocks::detail
