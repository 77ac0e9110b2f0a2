// Internals shared by the Gated DeltaNet kernels (gdn_ref.cpp, gdn_avx2.cpp, gdn_avx512.cpp, gdn.cpp)
// and their tests. Not part of the forward-pass interface. ISA-independent: the functions declared
// here are defined in baseline files (gdn.cpp), and the inline helpers have internal linkage, so an
// ISA file including this header exports no SIMD copy of them (scripts/check_isa_objects.py).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/gdn.h"

namespace spate::kernels::detail {

const gdn_table& gdn_ref_table();
const gdn_table& gdn_avx2_table();    // only call when cpu_supports(isa_level::avx2)
const gdn_table& gdn_avx512_table();  // only call when cpu_supports(isa_level::avx512)

// Widest column tile of delta_rule_chunked at any level (4 vectors of 16 floats at the avx512 level).
inline constexpr int32_t k_gdn_tile_cols = 64;

// delta_rule_chunked's scratch, carved from the caller's floats (C = k_delta_rule_chunk):
struct chunk_scratch {
  float* cum_g;  // [C]      G_t
  float* eg;     // [C]      expf(G_t)
  float* beta;   // [C]      beta_t
  float* a;      // [C * C]  row t: A_ts for s < t (holds k_t . k_s until chunk_scale_aw)
  float* w;      // [C * C]  row t: W_ts for s <= t (holds q_t . k_s until chunk_scale_aw)
  float* ku;     // [C * dk] row s: k_s[i] * expf(G_{m-1} - G_s)
  float* kt;     // [dk * C] k transposed: kt[i * C + s] = k_s[i]; columns [m, C) zero
  float* sk;     // [C * k_gdn_tile_cols] row t: S0 k_t over a column tile
  float* sq;     // [C * k_gdn_tile_cols] row t: S0 q_t over a column tile
  float* d;      // [C * k_gdn_tile_cols] row t: delta_t over a column tile
};
chunk_scratch chunk_scratch_at(float* scratch, int32_t dk);

// Fills cum_g, eg, beta, ku and kt for the m tokens [t0, t0 + m) of a (one chunk). Same bits at every level.
void chunk_prepare(const delta_rule_args& a, int32_t t0, int32_t m, const chunk_scratch& s);
// With the dots in a and w (a[t*C + s] = k_t . k_s for s < t, w[t*C + s] = q_t . k_s for s <= t),
// applies the decays and betas: a = (beta_t E_ts) a, w = E_ts w. Same bits at every level.
void chunk_scale_aw(int32_t m, const chunk_scratch& s);

// Calls f(t0, m) for the chunks of a call, in order: the tokens [t0, t0 + m) of one chunk aligned to
// absolute positions (a.pos0 + t0 .. a.pos0 + t0 + m lie in one [c*C, (c+1)*C)).
template <class F>
static inline void for_each_chunk(const delta_rule_args& a, F&& f) {
  const int64_t chunk = k_delta_rule_chunk;
  int32_t t0 = 0;
  while (t0 < a.n_tokens) {
    const int64_t room = chunk - (a.pos0 + t0) % chunk;
    const int32_t m = static_cast<int32_t>(std::min<int64_t>(room, a.n_tokens - t0));
    f(t0, m);
    t0 += m;
  }
}

}  // namespace spate::kernels::detail
