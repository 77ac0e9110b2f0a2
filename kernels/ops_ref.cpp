// Scalar reference implementations of the ops in kernels/ops.h.
// Plain float arithmetic, sequential reductions; the baseline every faster
// version is tested against and the path used when SPATE_FORCE_REFERENCE is set.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/fp16.h"
#include "kernels/ops.h"
#include "kernels/ops_internal.h"

namespace spate::kernels {
namespace {

void rms_norm_ref(const float* x, const float* w, float* y, int64_t n, float eps) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
}

void rope_ref(float* x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float* cos_sin, rope_mode mode) {
  const int32_t half = n_rot / 2;
  if (half <= 0) return;
  const float* c = cos_sin;
  const float* s = cos_sin + half;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      const int32_t i0 = mode == rope_mode::normal ? 2 * i : i;
      const int32_t i1 = mode == rope_mode::normal ? 2 * i + 1 : i + half;
      const float x0 = xh[i0], x1 = xh[i1];
      xh[i0] = x0 * c[i] - x1 * s[i];
      xh[i1] = x0 * s[i] + x1 * c[i];
    }
  }
}

void geglu_ref(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float k_sqrt_2_over_pi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float u = k_sqrt_2_over_pi * (g + 0.044715f * g * g * g);
    out[i] = g / (1.0f + std::exp(-2.0f * u)) * up[i];
  }
}

void swiglu_ref(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

// ggml's swiglu_oai: std::min / std::clamp keep a NaN operand.
void swiglu_oai_ref(const float* gate, const float* up, float* out, int64_t n, float alpha, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(gate[i], limit);
    const float y = std::clamp(up[i], -limit, limit);
    out[i] = x / (1.0f + std::exp(alpha * -x)) * (y + 1.0f);
  }
}

void softmax_ref(float* x, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::fmax(mx, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void kv_store_ref(const paged_kv_view& kv, int32_t block, int32_t slot, int32_t kv_head, const float* k,
                  const float* v) {
  const int64_t v_at = detail::kv_v_row_index(kv, block, kv_head, slot);
  const int64_t k_at = detail::kv_k_index(kv, block, kv_head, slot, 0);  // dim d at k_at + d * block_size
  const int64_t k_step = kv.block_size;
  if (kv.dtype == kv_dtype::q8_0 || kv.dtype == kv_dtype::fp8_e5m2) {
    detail::kv_store_quantized(kv, block, slot, kv_head, k, v);
    return;
  }
  if (kv.dtype == kv_dtype::f32) {
    std::memcpy(static_cast<float*>(kv.v) + v_at, v, sizeof(float) * kv.head_dim);
    for (int32_t d = 0; d < kv.head_dim; ++d) static_cast<float*>(kv.k)[k_at + d * k_step] = k[d];
    return;
  }
  uint16_t* kh = static_cast<uint16_t*>(kv.k) + k_at;
  uint16_t* vh = static_cast<uint16_t*>(kv.v) + v_at;
  for (int32_t d = 0; d < kv.head_dim; ++d) {
    kh[d * k_step] = f32_to_fp16(k[d]);
    vh[d] = f32_to_fp16(v[d]);
  }
}

// Element `at` of a K or V pool (converted to float).
inline float kv_elem(const paged_kv_view& kv, const void* pool, int64_t at) {
  if (kv.dtype == kv_dtype::f32) return static_cast<const float*>(pool)[at];
  return fp16_to_f32(static_cast<const uint16_t*>(pool)[at]);
}

void attention_ref(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                   const int32_t* block_table, int32_t first, int32_t n_ctx, float scale, const float* sinks, float* out,
                   float* scratch) {
  if (kv.dtype == kv_dtype::q8_0 || kv.dtype == kv_dtype::fp8_e5m2) {
    detail::attention_quantized_ref(q, n_group, kv, kv_head, block_table, first, n_ctx, scale, sinks, out, scratch);
    return;
  }
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  if (n_ctx <= 0) {
    std::memset(out, 0, sizeof(float) * n_group * hd);
    return;
  }
  const int64_t stride = detail::attention_scores_stride(n_ctx);
  for (int32_t g = 0; g < n_group; ++g) {
    const float* qg = q + static_cast<int64_t>(g) * hd;
    float* sc = scratch + g * stride;
    for (int32_t p = first; p < n_ctx; ++p) {
      const int64_t k0 = detail::kv_k_index(kv, block_table[p / bs], kv_head, p % bs, 0);
      float dot = 0.0f;
      for (int32_t d = 0; d < hd; ++d) dot += qg[d] * kv_elem(kv, kv.k, k0 + static_cast<int64_t>(d) * bs);
      sc[p] = dot * scale;
    }
    const float sum = detail::softmax_scores_ref(sc, first, n_ctx, sinks ? sinks + g : nullptr);
    float* og = out + static_cast<int64_t>(g) * hd;
    for (int32_t d = 0; d < hd; ++d) og[d] = 0.0f;
    for (int32_t p = first; p < n_ctx; ++p) {
      const int64_t row = detail::kv_v_row_index(kv, block_table[p / bs], kv_head, p % bs);
      for (int32_t d = 0; d < hd; ++d) og[d] += sc[p] * kv_elem(kv, kv.v, row + d);
    }
    const float inv = 1.0f / sum;
    for (int32_t d = 0; d < hd; ++d) og[d] *= inv;
  }
}

void add_ref(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void lora_expand_ref(float* y, const float* bt, int64_t ld, int32_t rank, const float* t, float scale, int64_t n) {
  for (int64_t c = 0; c < n; ++c) {
    float acc = 0.0f;
    for (int32_t j = 0; j < rank; ++j) acc = std::fma(t[j], bt[j * ld + c], acc);
    y[c] = std::fma(scale, acc, y[c]);
  }
}

}  // namespace

namespace detail {

const ops_table& ops_ref_table() {
  static const ops_table table{rms_norm_ref, rope_ref,      swiglu_ref,    geglu_ref, swiglu_oai_ref,
                               softmax_ref,  kv_store_ref, attention_ref, add_ref, lora_expand_ref};
  return table;
}

}  // namespace detail
}  // namespace spate::kernels
