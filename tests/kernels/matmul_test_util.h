// Helpers shared by the matmul tests (test_matmul.cpp, test_matmul_mxfp4.cpp):
// random GGUF weights and activations, a run through the public interface,
// and error norms against float math. Header-only; test code only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dequant.h"
#include "kernels/fp16.h"
#include "kernels/matmul.h"

namespace spate::kernels::test {

inline const ggml_type k_all_types[] = {ggml_type::f32,  ggml_type::f16,  ggml_type::bf16, ggml_type::q8_0,
                                 ggml_type::q4_0, ggml_type::q4_1, ggml_type::q5_0, ggml_type::q5_1,
                                 ggml_type::iq4_nl, ggml_type::mxfp4, ggml_type::q2_k, ggml_type::q3_k,
                                 ggml_type::q4_k, ggml_type::q5_k, ggml_type::q6_k};

inline const char* tname(ggml_type t) { return type_name(static_cast<uint32_t>(t)); }
inline int64_t block_of(ggml_type t) { return traits_of(uint32_t(t))->block_elems; }
inline bool have_avx2() { return cpu_supports(isa_level::avx2); }
inline bool have_avx512() { return cpu_supports(isa_level::avx512); }

inline void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// Random GGUF rows: random quant bytes, sane random scales.
inline std::vector<uint8_t> random_weight(ggml_type t, int64_t n_out, int64_t n_in, std::mt19937& rng) {
  const auto tr = *traits_of(uint32_t(t));
  const int64_t rb = row_bytes(tr, n_in);
  std::vector<uint8_t> w(size_t(rb * n_out));
  std::uniform_real_distribution<float> uf(-1.0f, 1.0f);
  if (t == ggml_type::f32 || t == ggml_type::f16 || t == ggml_type::bf16) {
    for (int64_t i = 0; i < n_out * n_in; ++i) {
      const float v = uf(rng);
      if (t == ggml_type::f32) std::memcpy(w.data() + 4 * i, &v, 4);
      else {
        const uint16_t h = t == ggml_type::f16 ? f32_to_fp16(v) : f32_to_bf16(v);
        std::memcpy(w.data() + 2 * i, &h, 2);
      }
    }
    return w;
  }
  for (auto& b : w) b = uint8_t(rng());
  std::uniform_real_distribution<float> ud(0.001f, 0.02f);
  const int64_t nblk = n_out * n_in / tr.block_elems;
  for (int64_t i = 0; i < nblk; ++i) {
    uint8_t* b = w.data() + i * tr.block_bytes;
    switch (t) {
      case ggml_type::q4_0: case ggml_type::q5_0: case ggml_type::q8_0: case ggml_type::iq4_nl:
        put_half(b, ud(rng) * (rng() % 2 ? 1.0f : -1.0f));
        break;
      case ggml_type::mxfp4:  // E8M0 exponent 118..125: scales 2^-10 .. 2^-3 (extremes: test_matmul_mxfp4.cpp)
        b[0] = uint8_t(118 + rng() % 8);
        break;
      case ggml_type::q4_1: case ggml_type::q5_1:
        put_half(b, ud(rng));
        put_half(b + 2, -ud(rng) * 8.0f);
        break;
      case ggml_type::q4_k: case ggml_type::q5_k:
        put_half(b, ud(rng) * 0.1f);
        put_half(b + 2, ud(rng) * 0.1f);
        break;
      case ggml_type::q6_k:
        put_half(b + 208, ud(rng) * 0.05f);
        break;
      case ggml_type::q2_k:  // d, dmin after scales[16] and qs[64]
        put_half(b + 80, ud(rng) * 0.5f);
        put_half(b + 82, ud(rng) * 0.5f);
        break;
      case ggml_type::q3_k:  // d after hmask[32], qs[64], scales[12]
        put_half(b + 108, ud(rng) * 0.2f);
        break;
      default: break;
    }
  }
  return w;
}

inline std::vector<float> random_x(int64_t n_rows, int64_t ldx, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n_rows * ldx));
  for (auto& v : x) v = nd(rng);
  return x;
}

// y for all rows and columns through the public interface.
inline std::vector<float> run(const packed_weight& w, const float* x, int64_t ldx, int64_t n_rows, int64_t ldy) {
  std::vector<uint8_t> act(act_bytes(w, n_rows));
  quantize_act(w, x, ldx, 0, n_rows, act.data());
  std::vector<float> y(size_t(n_rows * ldy), -777.0f);
  matmul(w, act.data(), n_rows, y.data(), ldy, 0, w.n_out());
  return y;
}

inline double rel_err(const std::vector<float>& a, const std::vector<double>& ref, int64_t n_rows, int64_t n_out,
               int64_t lda) {
  double num = 0, den = 0;
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t c = 0; c < n_out; ++c) {
      const double d = double(a[r * lda + c]) - ref[r * n_out + c];
      num += d * d;
      den += ref[r * n_out + c] * ref[r * n_out + c];
    }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Float math on dequantized weights (double accumulation). If mag is given it receives
// sum_k |W[c][k] * x[r][k]|, the natural scale of the activation-quantization error.
inline std::vector<double> float_math(ggml_type t, const std::vector<uint8_t>& wq, int64_t n_out, int64_t n_in,
                               const std::vector<float>& x, int64_t ldx, int64_t n_rows,
                               std::vector<double>* mag = nullptr) {
  const int64_t rb = row_bytes(*traits_of(uint32_t(t)), n_in);
  std::vector<float> wrow(static_cast<size_t>(n_in));
  std::vector<double> y(size_t(n_rows * n_out));
  if (mag) mag->assign(size_t(n_rows * n_out), 0.0);
  for (int64_t c = 0; c < n_out; ++c) {
    dequantize_row(t, wq.data() + c * rb, wrow.data(), n_in);
    for (int64_t r = 0; r < n_rows; ++r) {
      double s = 0, m = 0;
      for (int64_t k = 0; k < n_in; ++k) {
        s += double(wrow[k]) * double(x[r * ldx + k]);
        m += std::fabs(double(wrow[k]) * double(x[r * ldx + k]));
      }
      y[r * n_out + c] = s;
      if (mag) (*mag)[r * n_out + c] = m;
    }
  }
  return y;
}

// ||a - ref|| / ||mag||: error relative to the magnitude of the terms summed.
inline double err_vs_mag(const std::vector<float>& a, const std::vector<double>& ref, const std::vector<double>& mag,
                  int64_t n_rows, int64_t n_out, int64_t lda) {
  double num = 0, den = 0;
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t c = 0; c < n_out; ++c) {
      const double d = double(a[r * lda + c]) - ref[r * n_out + c];
      num += d * d;
      den += mag[r * n_out + c] * mag[r * n_out + c];
    }
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace spate::kernels::test
