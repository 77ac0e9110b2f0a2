// Dispatch of the Gated DeltaNet kernels and the ISA-independent parts of delta_rule_chunked
// (per-chunk decays and betas), shared by every level so that all compute the same bits.
#include "kernels/gdn.h"

#include <cmath>
#include <cstring>

#include "kernels/gdn_internal.h"

namespace spate::kernels {

int64_t delta_rule_chunked_scratch_floats(int32_t dk, int32_t dv) {
  (void)dv;  // column tiles of at most k_gdn_tile_cols
  const int64_t c = k_delta_rule_chunk;
  return 3 * c + 2 * c * c + 2 * c * static_cast<int64_t>(dk) + 3 * c * detail::k_gdn_tile_cols;
}

const gdn_table& gdn_ops_for(isa_level level) {
  switch (level) {
    case isa_level::avx512: return detail::gdn_avx512_table();
    case isa_level::avx2: return detail::gdn_avx2_table();
    case isa_level::scalar: break;
  }
  return detail::gdn_ref_table();
}

const gdn_table& gdn_ops() { return gdn_ops_for(active_isa()); }

namespace detail {

chunk_scratch chunk_scratch_at(float* scratch, int32_t dk) {
  const int64_t c = k_delta_rule_chunk, tc = k_gdn_tile_cols;
  chunk_scratch s;
  float* p = scratch;
  s.cum_g = p; p += c;
  s.eg = p; p += c;
  s.beta = p; p += c;
  s.a = p; p += c * c;
  s.w = p; p += c * c;
  s.ku = p; p += c * dk;
  s.kt = p; p += c * dk;
  s.sk = p; p += c * tc;
  s.sq = p; p += c * tc;
  s.d = p;
  return s;
}

void chunk_prepare(const delta_rule_args& a, int32_t t0, int32_t m, const chunk_scratch& s) {
  const int64_t c = k_delta_rule_chunk;
  float g_sum = 0.0f;
  for (int32_t t = 0; t < m; ++t) {
    const int64_t tt = t0 + t;
    g_sum = t == 0 ? a.g[tt * a.ld_g] : g_sum + a.g[tt * a.ld_g];
    s.cum_g[t] = g_sum;
    s.eg[t] = std::exp(g_sum);
    s.beta[t] = a.beta[tt * a.ld_beta];
  }
  for (int32_t t = 0; t < m; ++t) {
    const float* k = a.k + (t0 + t) * a.ld_k;
    const float u = std::exp(s.cum_g[m - 1] - s.cum_g[t]);
    float* ku = s.ku + static_cast<int64_t>(t) * a.dk;
    for (int32_t i = 0; i < a.dk; ++i) {
      ku[i] = k[i] * u;
      s.kt[i * c + t] = k[i];
    }
  }
  for (int32_t i = 0; i < a.dk; ++i) std::memset(s.kt + i * c + m, 0, sizeof(float) * (c - m));
}

void chunk_scale_aw(int32_t m, const chunk_scratch& s) {
  const int64_t c = k_delta_rule_chunk;
  for (int32_t t = 0; t < m; ++t) {
    for (int32_t j = 0; j <= t; ++j) {
      const float e = std::exp(s.cum_g[t] - s.cum_g[j]);
      if (j < t) s.a[t * c + j] = (s.beta[t] * e) * s.a[t * c + j];
      s.w[t * c + j] = e * s.w[t * c + j];
    }
  }
}

}  // namespace detail
}  // namespace spate::kernels
