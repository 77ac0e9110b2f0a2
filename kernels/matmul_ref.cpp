// Scalar reference matmul and activation quantization (isa_level::scalar).
// Reads the GGUF layout directly (packed_weight points at the caller's data).
// The per-output math is the one described in matmul_internal.h, in the same
// order as the AVX2 and AVX-512 kernels: per block an exact integer dot product
// (Q4_0 / Q5_0: of q - 8 / q - 16, the offset taken in int32), then
//   acc = fma(float(isum), d_w * d_a, acc);  [acc = fma(m_w, s_a, acc);]  (Q4_1, Q5_1, Q4_K, Q5_K)
// except Q2_K, whose min is per 16-element half: with s_h the exact sum of the
// activation quants of half h, msum = mn_0 * s_0 + mn_1 * s_1 (int32) and
//   acc = fma(float(isum), d_w * d_a, acc);  acc = fma(float(msum), -dmin * d_a, acc);
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/fp16.h"
#include "kernels/matmul_internal.h"
#include "kernels/quant_blocks.h"

namespace spate::kernels::detail {

void quantize_act_q8_ref(const float* x, int64_t ldx, int64_t n_in, int64_t row_begin, int64_t row_end, void* act) {
  const int64_t nb = n_in / 32;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* xr = x + r * ldx;
    const q8_act_row_out out = q8_act_out(act, n_in, r);
    int8_t* qs = out.qs;
    float* d = out.d;
    float* s = out.s;
    for (int64_t b = 0; b < nb; ++b) {
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xr[32 * b + i]));
      const float db = amax / 127.0f;
      const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
      int sum = 0;
      for (int i = 0; i < 32; ++i) {
        int q = static_cast<int>(std::nearbyint(xr[32 * b + i] * id));
        q = std::clamp(q, -127, 127);
        qs[32 * b + i] = static_cast<int8_t>(q);
        sum += q;
      }
      d[b] = db;
      s[b] = db * static_cast<float>(sum);
    }
  }
}

namespace {

// Exact dot of 32 unsigned/signed quants with 32 int8 activations.
inline int dot32(const int* q, const int8_t* a) {
  int s = 0;
  for (int i = 0; i < 32; ++i) s += q[i] * a[i];
  return s;
}

// Exact dot of a 4-bit lookup-table block (IQ4_NL, MXFP4: code book indices qs in the
// Q4_0 nibble order) with 32 int8 activations: the signed code book values fed as Q8_0's q.
inline int code_book_dot(const uint8_t* qs, const int8_t* book, const int8_t* a) {
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = book[q4_quant(qs, e)];
  return dot32(q, a);
}

float dot_row_quant(ggml_type type, const uint8_t* row, const q8_act_row& a, int64_t nb) {
  float acc = 0.0f;
  int q[32];
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* aq = a.qs + 32 * b;
    const float da = a.d[b], sa = a.s[b];
    switch (type) {
      case ggml_type::q4_0: {
        const auto& blk = reinterpret_cast<const block_q4_0*>(row)[b];
        for (int e = 0; e < 32; ++e) q[e] = q4_quant(blk.qs, e) - 8;  // the offset in the exact integer dot
        acc = std::fma(float(dot32(q, aq)), fp16_to_f32(blk.d) * da, acc);
        break;
      }
      case ggml_type::q4_1: {
        const auto& blk = reinterpret_cast<const block_q4_1*>(row)[b];
        for (int e = 0; e < 32; ++e) q[e] = q4_quant(blk.qs, e);
        acc = std::fma(float(dot32(q, aq)), fp16_to_f32(blk.d) * da, acc);
        acc = std::fma(fp16_to_f32(blk.m), sa, acc);
        break;
      }
      case ggml_type::q5_0: {
        const auto& blk = reinterpret_cast<const block_q5_0*>(row)[b];
        for (int e = 0; e < 32; ++e) q[e] = q5_quant(blk.qs, blk.qh, e) - 16;
        acc = std::fma(float(dot32(q, aq)), fp16_to_f32(blk.d) * da, acc);
        break;
      }
      case ggml_type::q5_1: {
        const auto& blk = reinterpret_cast<const block_q5_1*>(row)[b];
        for (int e = 0; e < 32; ++e) q[e] = q5_quant(blk.qs, blk.qh, e);
        acc = std::fma(float(dot32(q, aq)), fp16_to_f32(blk.d) * da, acc);
        acc = std::fma(fp16_to_f32(blk.m), sa, acc);
        break;
      }
      case ggml_type::q8_0: {
        const auto& blk = reinterpret_cast<const block_q8_0*>(row)[b];
        for (int e = 0; e < 32; ++e) q[e] = blk.qs[e];
        acc = std::fma(float(dot32(q, aq)), fp16_to_f32(blk.d) * da, acc);
        break;
      }
      case ggml_type::iq4_nl: {
        const auto& blk = reinterpret_cast<const block_iq4_nl*>(row)[b];
        acc = std::fma(float(code_book_dot(blk.qs, iq4nl_values, aq)), fp16_to_f32(blk.d) * da, acc);
        break;
      }
      case ggml_type::mxfp4: {  // d_w = 2^(e - 128) (subnormal for e < 2): an exact f32, as the SIMD kernels'
        const auto& blk = reinterpret_cast<const block_mxfp4*>(row)[b];
        acc = std::fma(float(code_book_dot(blk.qs, mxfp4_values, aq)), e8m0_half_to_f32(blk.e) * da, acc);
        break;
      }
      case ggml_type::q4_k:
      case ggml_type::q5_k: {
        const int s = int(b % 8);
        int sc = 0, mn = 0;
        uint16_t dbits = 0, mbits = 0;
        if (type == ggml_type::q4_k) {
          const auto& blk = reinterpret_cast<const block_q4_k*>(row)[b / 8];
          for (int e = 0; e < 32; ++e) q[e] = q4_k_quant(blk, 32 * s + e);
          unpack_k4_scale_min(blk.scales, s, sc, mn);
          dbits = blk.d;
          mbits = blk.dmin;
        } else {
          const auto& blk = reinterpret_cast<const block_q5_k*>(row)[b / 8];
          for (int e = 0; e < 32; ++e) q[e] = q5_k_quant(blk, 32 * s + e);
          unpack_k4_scale_min(blk.scales, s, sc, mn);
          dbits = blk.d;
          mbits = blk.dmin;
        }
        const int isum = sc * dot32(q, aq);
        acc = std::fma(float(isum), fp16_to_f32(dbits) * da, acc);
        acc = std::fma(float(mn) * -fp16_to_f32(mbits), sa, acc);
        break;
      }
      case ggml_type::q6_k: {
        const int s = int(b % 8);
        const auto& blk = reinterpret_cast<const block_q6_k*>(row)[b / 8];
        int lo = 0, hi = 0;
        for (int e = 0; e < 16; ++e) lo += (q6_k_quant(blk, 32 * s + e) - 32) * aq[e];
        for (int e = 16; e < 32; ++e) hi += (q6_k_quant(blk, 32 * s + e) - 32) * aq[e];
        const int isum = blk.scales[2 * s] * lo + blk.scales[2 * s + 1] * hi;
        acc = std::fma(float(isum), fp16_to_f32(blk.d) * da, acc);
        break;
      }
      case ggml_type::q3_k: {
        const int s = int(b % 8);
        const auto& blk = reinterpret_cast<const block_q3_k*>(row)[b / 8];
        int isum = 0;
        for (int h = 0; h < 2; ++h) {
          int dot = 0;
          for (int e = 16 * h; e < 16 * h + 16; ++e) dot += (q3_k_quant(blk, 32 * s + e) - 4) * aq[e];
          isum += (q3_k_scale(blk.scales, 2 * s + h) - 32) * dot;
        }
        acc = std::fma(float(isum), fp16_to_f32(blk.d) * da, acc);
        break;
      }
      case ggml_type::q2_k: {
        const int s = int(b % 8);
        const auto& blk = reinterpret_cast<const block_q2_k*>(row)[b / 8];
        int isum = 0, msum = 0;
        for (int h = 0; h < 2; ++h) {
          int dot = 0, asum = 0;
          for (int e = 16 * h; e < 16 * h + 16; ++e) {
            dot += q2_k_quant(blk, 32 * s + e) * aq[e];
            asum += aq[e];
          }
          const uint8_t scm = blk.scales[2 * s + h];
          isum += (scm & 15) * dot;
          msum += (scm >> 4) * asum;
        }
        acc = std::fma(float(isum), fp16_to_f32(blk.d) * da, acc);
        acc = std::fma(float(msum), -fp16_to_f32(blk.dmin) * da, acc);
        break;
      }
      default:
        break;
    }
  }
  return acc;
}

inline float load_weight(ggml_type type, const uint8_t* row, int64_t k) {
  if (type == ggml_type::f32) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, row + 2 * k, 2);
  return type == ggml_type::f16 ? fp16_to_f32(h) : bf16_to_f32(h);
}

}  // namespace

void matmul_ref(const packed_weight& w, const void* act, int64_t n_rows, float* y, int64_t ldy, int64_t col_begin,
                int64_t col_end) {
  const int64_t n_in = w.n_in();
  const ggml_type type = w.type();
  if (is_quantized(type)) {
    const int64_t nb = n_in / 32;
    for (int64_t r = 0; r < n_rows; ++r) {
      const q8_act_row a = q8_act_at(act, n_in, r);
      for (int64_t c = col_begin; c < col_end; ++c)
        y[r * ldy + c] = dot_row_quant(type, w.data() + c * w.stride(), a, nb);
    }
    return;
  }
  // Float weights: one f32 FMA chain in k order (as the AVX2 kernel, per output lane).
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* x = static_cast<const float*>(act) + r * n_in;
    for (int64_t c = col_begin; c < col_end; ++c) {
      const uint8_t* row = w.data() + c * w.stride();
      float acc = 0.0f;
      for (int64_t k = 0; k < n_in; ++k) acc = std::fma(load_weight(type, row, k), x[k], acc);
      y[r * ldy + c] = acc;
    }
  }
}

}  // namespace spate::kernels::detail
