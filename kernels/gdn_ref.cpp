// Scalar reference of the Gated DeltaNet kernels (kernels/gdn.h): one column (channel, value dim) at
// a time, in the operation order gdn.h specifies. Multiply-adds are std::fma (exactly rounded, as the
// SIMD levels' FMA instructions), so every level gives the same bits, except the conv's silu, whose exp
// is libm's here.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/gdn.h"
#include "kernels/gdn_internal.h"

namespace spate::kernels {
namespace {

void short_conv_ref(const float* x, int64_t ld_x, const float* w, int32_t kernel, float* state, float* y,
                    int64_t ld_y, int32_t n_tokens, int64_t n_ch, bool silu) {
  if (n_tokens <= 0) return;
  const int32_t n_state = kernel - 1;
  for (int64_t c = 0; c < n_ch; ++c) {
    const float* wc = w + c * kernel;
    // Input row r of x_ext (the state's rows, then x's), channel c.
    auto ext = [&](int64_t r) { return r < n_state ? state[r * n_ch + c] : x[(r - n_state) * ld_x + c]; };
    for (int32_t t = 0; t < n_tokens; ++t) {
      float acc = 0.0f;
      for (int32_t j = 0; j < kernel; ++j) acc = std::fma(wc[j], ext(t + j), acc);
      y[t * ld_y + c] = silu ? acc / (1.0f + std::exp(-acc)) : acc;
    }
    // New state row r = x_ext row n_tokens + r; ascending r reads each old row before overwriting it.
    for (int32_t r = 0; r < n_state; ++r) state[r * n_ch + c] = ext(n_tokens + r);
  }
}

void delta_rule_ref(const delta_rule_args& a) {
  const int32_t dk = a.dk, dv = a.dv;
  for (int32_t t = 0; t < a.n_tokens; ++t) {
    const float* q = a.q + t * a.ld_q;
    const float* k = a.k + t * a.ld_k;
    const float* v = a.v + t * a.ld_v;
    const float decay = std::exp(a.g[t * a.ld_g]);
    const float beta = a.beta[t * a.ld_beta];
    float* out = a.out + t * a.ld_out;
    for (int32_t j = 0; j < dv; ++j) {
      float* col = a.state + j;  // st[i][j] at col[i * dv]
      float acc = 0.0f;
      for (int32_t i = 0; i < dk; ++i) acc = std::fma(k[i], decay * col[static_cast<int64_t>(i) * dv], acc);
      const float delta = (v[j] - acc) * beta;
      acc = 0.0f;
      for (int32_t i = 0; i < dk; ++i) {
        float& st = col[static_cast<int64_t>(i) * dv];
        st = std::fma(k[i], delta, decay * st);
        acc = std::fma(q[i], st, acc);
      }
      out[j] = acc * a.scale;
    }
  }
}

// One chunk [t0, t0 + m) of delta_rule_chunked, with s prepared (chunk_prepare, chunk_scale_aw).
void chunk_columns_ref(const delta_rule_args& a, int32_t t0, int32_t m, const detail::chunk_scratch& s) {
  const int64_t c = k_delta_rule_chunk;
  const int32_t dk = a.dk, dv = a.dv;
  float* sk = s.sk;
  float* sq = s.sq;
  float* d = s.d;
  for (int32_t j = 0; j < dv; ++j) {
    float* col = a.state + j;
    for (int32_t t = 0; t < m; ++t) {
      const float* q = a.q + (t0 + t) * a.ld_q;
      const float* k = a.k + (t0 + t) * a.ld_k;
      float ak = 0.0f, aq = 0.0f;
      for (int32_t i = 0; i < dk; ++i) {
        ak = std::fma(k[i], col[static_cast<int64_t>(i) * dv], ak);
        aq = std::fma(q[i], col[static_cast<int64_t>(i) * dv], aq);
      }
      sk[t] = ak;
      sq[t] = aq;
    }
    for (int32_t t = 0; t < m; ++t) {
      const float v = a.v[(t0 + t) * a.ld_v + j];
      float acc = s.beta[t] * std::fma(-s.eg[t], sk[t], v);
      for (int32_t u = 0; u < t; ++u) acc = std::fma(-s.a[t * c + u], d[u], acc);
      d[t] = acc;
    }
    for (int32_t t = 0; t < m; ++t) {
      float acc = s.eg[t] * sq[t];
      for (int32_t u = 0; u <= t; ++u) acc = std::fma(s.w[t * c + u], d[u], acc);
      a.out[(t0 + t) * a.ld_out + j] = acc * a.scale;
    }
    for (int32_t i = 0; i < dk; ++i) {
      float& st = col[static_cast<int64_t>(i) * dv];
      float acc = s.eg[m - 1] * st;
      for (int32_t u = 0; u < m; ++u) acc = std::fma(s.ku[u * dk + i], d[u], acc);
      st = acc;
    }
  }
}

void delta_rule_chunked_ref(const delta_rule_args& a, float* scratch) {
  const detail::chunk_scratch s = detail::chunk_scratch_at(scratch, a.dk);
  const int64_t c = k_delta_rule_chunk;
  detail::for_each_chunk(a, [&](int32_t t0, int32_t m) {
    detail::chunk_prepare(a, t0, m, s);
    for (int32_t t = 0; t < m; ++t) {
      const float* q = a.q + (t0 + t) * a.ld_q;
      const float* k = a.k + (t0 + t) * a.ld_k;
      for (int32_t u = 0; u <= t; ++u) {
        const float* ku = s.kt + u;  // k_u[i] at ku[i * c]
        float kk = 0.0f, qk = 0.0f;
        for (int32_t i = 0; i < a.dk; ++i) {
          kk = std::fma(k[i], ku[i * c], kk);
          qk = std::fma(q[i], ku[i * c], qk);
        }
        if (u < t) s.a[t * c + u] = kk;
        s.w[t * c + u] = qk;
      }
    }
    detail::chunk_scale_aw(m, s);
    chunk_columns_ref(a, t0, m, s);
  });
}

}  // namespace

namespace detail {

const gdn_table& gdn_ref_table() {
  static const gdn_table table{short_conv_ref, delta_rule_ref, delta_rule_chunked_ref};
  return table;
}

}  // namespace detail
}  // namespace spate::kernels
