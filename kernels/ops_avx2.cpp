// AVX2+FMA+F16C implementations of the ops in kernels/ops.h.
// Compiled with -mavx2 -mfma -mf16c; only called when cpu_supports(isa_level::avx2).
//
// Determinism: every reduction uses a lane layout and combine order that
// depend only on the element count, so results are bitwise reproducible for
// equal arguments whatever the buffers' alignment (all loads are unaligned,
// tails use masked loads rather than alignment peeling).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "kernels/ops.h"
#include "kernels/ops_internal.h"
#include "kernels/ops_simd_avx2.h"
#include "kernels/ops_kvq_simd.h"
#include "kernels/simd_avx2.h"

namespace spate::kernels::detail {
namespace {

// ---------------------------------------------------------------- rms_norm
void rms_norm_avx2(const float* x, const float* w, float* y, int64_t n, float eps) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
    const __m256 x2 = _mm256_loadu_ps(x + i + 16), x3 = _mm256_loadu_ps(x + i + 24);
    a0 = _mm256_fmadd_ps(x0, x0, a0);
    a1 = _mm256_fmadd_ps(x1, x1, a1);
    a2 = _mm256_fmadd_ps(x2, x2, a2);
    a3 = _mm256_fmadd_ps(x3, x3, a3);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 x0 = _mm256_loadu_ps(x + i);
    a0 = _mm256_fmadd_ps(x0, x0, a0);
  }
  if (i < n) {
    const __m256 x0 = _mm256_maskload_ps(x + i, tail_mask(n - i));
    a1 = _mm256_fmadd_ps(x0, x0, a1);
  }
  const float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  const __m256 inv = _mm256_set1_ps(1.0f / std::sqrt(sum / static_cast<float>(n) + eps));
  // Second pass writes y; reading x[i..i+8) before writing y[i..] keeps aliasing safe.
  for (i = 0; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv), _mm256_loadu_ps(w + i)));
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 r = _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(x + i, m), inv), _mm256_maskload_ps(w + i, m));
    _mm256_maskstore_ps(y + i, m, r);
  }
}

// ---------------------------------------------------------------- rope
// Small-buffer for per-call tables: stack for typical sizes, heap beyond.
struct float_buf {
  float stack_[2048];
  std::unique_ptr<float[]> heap_;
  float* get(int64_t n) {
    if (n <= 2048) return stack_;
    heap_.reset(new float[n]);
    return heap_.get();
  }
};

void rope_avx2(float* x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float* cos_sin, rope_mode mode) {
  const int32_t half = n_rot / 2;
  if (half <= 0) return;
  const float* c = cos_sin;
  const float* s = cos_sin + half;
  if (mode == rope_mode::normal) {
    // Interleaved tables: cc = (c0, c0, c1, c1, ...), ss = (-s0, s0, -s1, s1, ...).
    float_buf buf;
    float* cc = buf.get(2 * static_cast<int64_t>(n_rot));
    float* ss = cc + n_rot;
    for (int32_t i = 0; i < half; ++i) {
      cc[2 * i] = c[i];
      cc[2 * i + 1] = c[i];
      ss[2 * i] = -s[i];
      ss[2 * i + 1] = s[i];
    }
    for (int32_t h = 0; h < n_heads; ++h) {
      float* xh = x + static_cast<int64_t>(h) * head_dim;
      int32_t i = 0;
      for (; i + 8 <= n_rot; i += 8) {
        const __m256 v = _mm256_loadu_ps(xh + i);
        const __m256 sw = _mm256_permute_ps(v, 0xB1);  // swap each pair
        _mm256_storeu_ps(xh + i, _mm256_fmadd_ps(v, _mm256_loadu_ps(cc + i), _mm256_mul_ps(sw, _mm256_loadu_ps(ss + i))));
      }
      if (i < n_rot) {  // n_rot even, so the mask never splits a pair
        const __m256i m = tail_mask(n_rot - i);
        const __m256 v = _mm256_maskload_ps(xh + i, m);
        const __m256 sw = _mm256_permute_ps(v, 0xB1);
        const __m256 r = _mm256_fmadd_ps(v, _mm256_maskload_ps(cc + i, m), _mm256_mul_ps(sw, _mm256_maskload_ps(ss + i, m)));
        _mm256_maskstore_ps(xh + i, m, r);
      }
    }
    return;
  }
  for (int32_t h = 0; h < n_heads; ++h) {
    float* lo = x + static_cast<int64_t>(h) * head_dim;
    float* hi = lo + half;
    int32_t i = 0;
    for (; i + 8 <= half; i += 8) {
      const __m256 a = _mm256_loadu_ps(lo + i), b = _mm256_loadu_ps(hi + i);
      const __m256 cv = _mm256_loadu_ps(c + i), sv = _mm256_loadu_ps(s + i);
      _mm256_storeu_ps(lo + i, _mm256_fmsub_ps(a, cv, _mm256_mul_ps(b, sv)));
      _mm256_storeu_ps(hi + i, _mm256_fmadd_ps(a, sv, _mm256_mul_ps(b, cv)));
    }
    if (i < half) {
      const __m256i m = tail_mask(half - i);
      const __m256 a = _mm256_maskload_ps(lo + i, m), b = _mm256_maskload_ps(hi + i, m);
      const __m256 cv = _mm256_maskload_ps(c + i, m), sv = _mm256_maskload_ps(s + i, m);
      _mm256_maskstore_ps(lo + i, m, _mm256_fmsub_ps(a, cv, _mm256_mul_ps(b, sv)));
      _mm256_maskstore_ps(hi + i, m, _mm256_fmadd_ps(a, sv, _mm256_mul_ps(b, cv)));
    }
  }
}

// ---------------------------------------------------------------- swiglu, swiglu_oai, geglu, add
inline __m256 silu_mul(__m256 g, __m256 u) {
  const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, silu_mul(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(out + i, m, silu_mul(_mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m)));
  }
}

void swiglu_oai_avx2(const float* gate, const float* up, float* out, int64_t n, float alpha, float limit) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, swiglu_oai_lanes<lanes8>(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i), alpha, limit));
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 r = swiglu_oai_lanes<lanes8>(_mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m), alpha, limit);
    _mm256_maskstore_ps(out + i, m, r);
  }
}

// gelu_tanh(g) * u as g / (1 + exp(-2 sqrt(2/pi) (g + 0.044715 g^3))) * u.
inline __m256 gelu_mul(__m256 g, __m256 u) {
  const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
  const __m256 inner = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), g3, g));
  const __m256 e = exp_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), inner));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

void geglu_avx2(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, gelu_mul(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(out + i, m, gelu_mul(_mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m)));
  }
}

void add_avx2(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, _mm256_add_ps(_mm256_maskload_ps(y + i, m), _mm256_maskload_ps(x + i, m)));
  }
}

// ---------------------------------------------------------------- lora_expand
// Four 8-column accumulators per pass (each an FMA chain over j, as the
// reference's per column), then a masked tail.
void lora_expand_avx2(float* y, const float* bt, int64_t ld, int32_t rank, const float* t, float scale, int64_t n) {
  const __m256 sv = _mm256_set1_ps(scale);
  int64_t c = 0;
  for (; c + 32 <= n; c += 32) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int32_t j = 0; j < rank; ++j) {
      const __m256 tj = _mm256_set1_ps(t[j]);
      const float* b = bt + j * ld + c;
      a0 = _mm256_fmadd_ps(tj, _mm256_loadu_ps(b), a0);
      a1 = _mm256_fmadd_ps(tj, _mm256_loadu_ps(b + 8), a1);
      a2 = _mm256_fmadd_ps(tj, _mm256_loadu_ps(b + 16), a2);
      a3 = _mm256_fmadd_ps(tj, _mm256_loadu_ps(b + 24), a3);
    }
    _mm256_storeu_ps(y + c, _mm256_fmadd_ps(sv, a0, _mm256_loadu_ps(y + c)));
    _mm256_storeu_ps(y + c + 8, _mm256_fmadd_ps(sv, a1, _mm256_loadu_ps(y + c + 8)));
    _mm256_storeu_ps(y + c + 16, _mm256_fmadd_ps(sv, a2, _mm256_loadu_ps(y + c + 16)));
    _mm256_storeu_ps(y + c + 24, _mm256_fmadd_ps(sv, a3, _mm256_loadu_ps(y + c + 24)));
  }
  for (; c < n; c += 8) {
    const __m256i m = tail_mask(std::min<int64_t>(8, n - c));
    __m256 a = _mm256_setzero_ps();
    for (int32_t j = 0; j < rank; ++j) a = _mm256_fmadd_ps(_mm256_set1_ps(t[j]), _mm256_maskload_ps(bt + j * ld + c, m), a);
    _mm256_maskstore_ps(y + c, m, _mm256_fmadd_ps(sv, a, _mm256_maskload_ps(y + c, m)));
  }
}

// ---------------------------------------------------------------- softmax
void scale_inplace(float* x, int64_t n, float f) {
  const __m256 fv = _mm256_set1_ps(f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), fv));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), fv));
  }
}

void softmax_avx2(float* x, int64_t n) {
  if (n <= 0) return;
  const float mx = max_of(x, n);
  const float sum = exp_shift_sum(x, n, mx, false);
  scale_inplace(x, n, 1.0f / sum);
}

// ---------------------------------------------------------------- f16 rows
inline void f32_row_to_f16(const float* f, uint16_t* h, int64_t n) {
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + d),
                     _mm256_cvtps_ph(_mm256_loadu_ps(f + d), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; d < n; ++d) h[d] = _cvtss_sh(f[d], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

void kv_store_avx2(const paged_kv_view& kv, int32_t block, int32_t slot, int32_t kv_head, const float* k,
                   const float* v) {
  const int64_t v_at = kv_v_row_index(kv, block, kv_head, slot);
  const int64_t k_at = kv_k_index(kv, block, kv_head, slot, 0);  // dim d at k_at + d * block_size
  const int64_t k_step = kv.block_size;
  const int32_t hd = kv.head_dim;
  if (kv.dtype == kv_dtype::q8_0 || kv.dtype == kv_dtype::fp8_e5m2) {
    kv_store_quantized(kv, block, slot, kv_head, k, v);  // one token per step: the shared scalar store
    return;
  }
  if (kv.dtype == kv_dtype::f32) {
    std::memcpy(static_cast<float*>(kv.v) + v_at, v, sizeof(float) * hd);
    float* kf = static_cast<float*>(kv.k) + k_at;
    for (int32_t d = 0; d < hd; ++d) kf[d * k_step] = k[d];
    return;
  }
  f32_row_to_f16(v, static_cast<uint16_t*>(kv.v) + v_at, hd);
  // K: converted 8 dims at a time, then scattered down the slot's column.
  uint16_t* kh = static_cast<uint16_t*>(kv.k) + k_at;
  for (int32_t d0 = 0; d0 < hd; d0 += 8) {
    uint16_t h[8];
    const int32_t n = std::min(8, hd - d0);
    f32_row_to_f16(k + d0, h, n);
    for (int32_t i = 0; i < n; ++i) kh[(d0 + i) * k_step] = h[i];
  }
}

// ---------------------------------------------------------------- attention
// Structure (three passes, no online rescaling, so the result is a fixed
// function of the inputs):
//  1. scores[g][p] = scale * q_g . k_p over the transposed K: 8 slots per
//     vector, one FMA chain per score (scores_transposed, ops_simd_avx2.h);
//     each K vector is loaded and converted once per tile of <= 3 heads.
//  2. per head: max, w = exp(s - max) in place (padded lanes set to 0), sum;
//     the head's sink, if any, joins the max and the sum.
//  3. out_g = (sum_p w[g][p] v_p) / sum_g, computed per tile of <= 3 heads and
//     32 dims so all accumulators stay in registers and each V element is
//     loaded (and converted) once per head tile.
// fp8_e5m2 pools take the same passes with a byte -> f16 -> f32 load; q8_0's
// passes 1 and 3 are those of ops_kvq_simd.h (per-group partial sums times the
// slots' scales; per-slot coefficients w * scale times the int8 V rows).

// Passes 1 and 3 for attention_passes (ops_simd_avx2.h).
struct avx2_attention {
  static constexpr int max_ht = lanes8::max_ht;
  // Pass 2: the 8-lane softmax_heads (ops_simd_avx2.h).
  static void softmax_heads(float* scores, int64_t stride, int32_t n_group, int32_t n_ctx, const float* sinks,
                            float* inv) {
    detail::softmax_heads(scores, stride, n_group, n_ctx, sinks, inv);
  }

  // Pass 1: scores_transposed (ops_simd_avx2.h) in 8-lane chunks.
  template <kv_dtype DT>
  static void scores(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                     const int32_t* block_table, int32_t n_ctx, float scale, float* dst, int64_t stride) {
    if constexpr (DT == kv_dtype::q8_0) {
      q8_scores<lanes8, void>(q, n_group, kv, kv_head, block_table, n_ctx, scale, dst, stride);  // ops_kvq_simd.h
    } else {
      scores_transposed<lanes8, void, DT>(q, n_group, kv, kv_head, block_table, n_ctx, scale, dst, stride);
    }
  }

  // out[h][d0 .. d0 + 8*DC) = inv[h] * sum_p w[h*stride + p] * v_p[d0 ..] for HT heads.
  template <int HT, int DC, kv_dtype DT>
  static void v_tile(const float* w, int64_t stride, const paged_kv_view& kv, int32_t kv_head,
                     const int32_t* block_table, int32_t n_ctx, int32_t d0, const float* inv, float* out) {
    __m256 acc[HT][DC];
    #pragma GCC unroll 16
    for (int h = 0; h < HT; ++h)
      #pragma GCC unroll 16
      for (int c = 0; c < DC; ++c) acc[h][c] = _mm256_setzero_ps();
    const int32_t hd = kv.head_dim;
    for_each_kv_pos(kv, kv_head, block_table, n_ctx, d0, [&](int32_t p, int64_t at) {
      // Weights first, then one V vector at a time: HT*DC + HT + 1 <= 16 registers.
      __m256 wv[HT];
      #pragma GCC unroll 16
      for (int h = 0; h < HT; ++h) wv[h] = _mm256_broadcast_ss(w + h * stride + p);
      #pragma GCC unroll 16
      for (int c = 0; c < DC; ++c) {
        const __m256 v = lanes8::load<DT>(kv.v, at + 8 * c);
        #pragma GCC unroll 16
        for (int h = 0; h < HT; ++h) acc[h][c] = _mm256_fmadd_ps(wv[h], v, acc[h][c]);
      }
    });
    #pragma GCC unroll 16
    for (int h = 0; h < HT; ++h) {
      const __m256 iv = _mm256_set1_ps(inv[h]);
      #pragma GCC unroll 16
      for (int c = 0; c < DC; ++c)
        _mm256_storeu_ps(out + static_cast<int64_t>(h) * hd + d0 + 8 * c, _mm256_mul_ps(acc[h][c], iv));
    }
  }

  // Dims [hdv, hd) that do not fill a vector, scalar, same order as the vector path.
  template <kv_dtype DT>
  static void v_tail(const float* w, int64_t stride, int32_t n_head, const paged_kv_view& kv, int32_t kv_head,
                     const int32_t* block_table, int32_t n_ctx, int32_t d, const float* inv, float* out) {
    const int32_t hd = kv.head_dim;
    for (int32_t h = 0; h < n_head; ++h) {
      float acc = 0.0f;
      for_each_kv_pos(kv, kv_head, block_table, n_ctx, d, [&](int32_t p, int64_t at) {
        acc = std::fma(w[h * stride + p], load_kv1<DT>(kv.v, at), acc);
      });
      out[static_cast<int64_t>(h) * hd + d] = acc * inv[h];
    }
  }

  template <int HT, kv_dtype DT>
  static void v_heads(const float* w, int64_t stride, const paged_kv_view& kv, int32_t kv_head,
                      const int32_t* block_table, int32_t n_ctx, const float* inv, float* out) {
    if constexpr (DT == kv_dtype::q8_0) {
      q8_v_heads<lanes8, HT>(w, stride, kv, kv_head, block_table, n_ctx, inv, out);  // ops_kvq_simd.h
    } else {
      const int32_t hd = kv.head_dim;
      const int32_t hdv = hd & ~7;
      int32_t d = 0;
      for (; d + 32 <= hdv; d += 32) v_tile<HT, 4, DT>(w, stride, kv, kv_head, block_table, n_ctx, d, inv, out);
      for (; d + 8 <= hdv; d += 8) v_tile<HT, 1, DT>(w, stride, kv, kv_head, block_table, n_ctx, d, inv, out);
      for (; d < hd; ++d) v_tail<DT>(w, stride, HT, kv, kv_head, block_table, n_ctx, d, inv, out);
    }
  }
};

void attention_avx2(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                    const int32_t* block_table, int32_t first, int32_t n_ctx, float scale, const float* sinks, float* out,
                    float* scratch) {
  if (n_ctx <= 0) {
    std::memset(out, 0, sizeof(float) * n_group * kv.head_dim);
    return;
  }
  attention_passes<avx2_attention>(q, n_group, kv, kv_head, block_table, first, n_ctx, scale, sinks, out, scratch);
}

}  // namespace

const ops_table& ops_avx2_table() {
  static const ops_table table{rms_norm_avx2, rope_avx2,     swiglu_avx2,    geglu_avx2, swiglu_oai_avx2,
                               softmax_avx2,  kv_store_avx2, attention_avx2, add_avx2, lora_expand_avx2};
  return table;
}

void f16c_to_f32(const uint16_t* h, float* f, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) f[i] = _cvtsh_ss(h[i]);
}

void f16c_from_f32(const float* f, uint16_t* h, int64_t n) { f32_row_to_f16(f, h, n); }

void exp_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp_ps(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, exp_ps(_mm256_maskload_ps(x + i, m)));
  }
}

}  // namespace spate::kernels::detail
