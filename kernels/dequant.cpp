#include "kernels/dequant.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"

namespace spate::kernels {
namespace {

template <class Block>
const Block* blocks(const void* src) { return static_cast<const Block*>(src); }


// Q4_K and Q5_K share the super-block layout: 8 sub-blocks of 32, each with a
// 6-bit scale and min; quant(blk, e) returns element e's unsigned quant.
template <typename Block, typename Quant>
void dequant_k4(const void* src, float* dst, int64_t nb, Quant quant) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto& blk = blocks<Block>(src)[b];
    const float d = fp16_to_f32(blk.d), dmin = fp16_to_f32(blk.dmin);
    for (int s = 0; s < 8; ++s) {
      int sc = 0, mn = 0;
      unpack_k4_scale_min(blk.scales, s, sc, mn);
      const float ds = d * float(sc), ms = dmin * float(mn);
      for (int l = 0; l < 32; ++l) {
        const int e = 32 * s + l;
        dst[b * qk_k + e] = ds * float(quant(blk, e)) - ms;
      }
    }
  }
}

}  // namespace

void dequantize_row(ggml_type type, const void* src, float* dst, int64_t n) {
  const auto traits = traits_of(static_cast<uint32_t>(type));
  if (!traits) throw std::invalid_argument("dequantize_row: unknown type id " + std::to_string(uint32_t(type)));
  if (n < 0 || n % traits->block_elems != 0)
    throw std::invalid_argument(std::string("dequantize_row: n not a multiple of the block size of ") + traits->name);
  const int64_t nb = n / traits->block_elems;
  switch (type) {
    case ggml_type::f32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case ggml_type::f16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(h[i]);
      return;
    }
    case ggml_type::bf16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case ggml_type::q4_0:
      for (int64_t b = 0; b < nb; ++b) {
        const auto& blk = blocks<block_q4_0>(src)[b];
        const float d = fp16_to_f32(blk.d);
        for (int e = 0; e < qk32; ++e) dst[b * qk32 + e] = d * float(q4_quant(blk.qs, e) - 8);
      }
      return;
    case ggml_type::q4_1:
      for (int64_t b = 0; b < nb; ++b) {
        const auto& blk = blocks<block_q4_1>(src)[b];
        const float d = fp16_to_f32(blk.d), m = fp16_to_f32(blk.m);
        for (int e = 0; e < qk32; ++e) dst[b * qk32 + e] = d * float(q4_quant(blk.qs, e)) + m;
      }
      return;
    case ggml_type::q5_0:
      for (int64_t b = 0; b < nb; ++b) {
        const auto& blk = blocks<block_q5_0>(src)[b];
        const float d = fp16_to_f32(blk.d);
        for (int e = 0; e < qk32; ++e) dst[b * qk32 + e] = d * float(q5_quant(blk.qs, blk.qh, e) - 16);
      }
      return;
    case ggml_type::q5_1:
      for (int64_t b = 0; b < nb; ++b) {
        const auto& blk = blocks<block_q5_1>(src)[b];
        const float d = fp16_to_f32(blk.d), m = fp16_to_f32(blk.m);
        for (int e = 0; e < qk32; ++e) dst[b * qk32 + e] = d * float(q5_quant(blk.qs, blk.qh, e)) + m;
      }
      return;
    case ggml_type::q8_0:
      for (int64_t b = 0; b < nb; ++b) {
        const auto& blk = blocks<block_q8_0>(src)[b];
        const float d = fp16_to_f32(blk.d);
        for (int e = 0; e < qk32; ++e) dst[b * qk32 + e] = d * float(blk.qs[e]);
      }
      return;
    case ggml_type::iq4_nl:
      for (int64_t b = 0; b < nb; ++b) {
        const auto& blk = blocks<block_iq4_nl>(src)[b];
        const float d = fp16_to_f32(blk.d);
        for (int e = 0; e < qk32; ++e) dst[b * qk32 + e] = d * float(iq4nl_values[q4_quant(blk.qs, e)]);
      }
      return;
    case ggml_type::mxfp4:  // as ggml's dequantize_row_mxfp4: float(value) * scale, bit for bit
      for (int64_t b = 0; b < nb; ++b) {
        const auto& blk = blocks<block_mxfp4>(src)[b];
        const float d = e8m0_half_to_f32(blk.e);
        for (int e = 0; e < qk32; ++e) dst[b * qk32 + e] = float(mxfp4_values[q4_quant(blk.qs, e)]) * d;
      }
      return;
    case ggml_type::q2_k:
      for (int64_t b = 0; b < nb; ++b) {
        const auto& blk = blocks<block_q2_k>(src)[b];
        const float d = fp16_to_f32(blk.d), dmin = fp16_to_f32(blk.dmin);
        for (int s = 0; s < 16; ++s) {
          const float ds = d * float(blk.scales[s] & 15), ms = dmin * float(blk.scales[s] >> 4);
          for (int l = 0; l < 16; ++l) dst[b * qk_k + 16 * s + l] = ds * float(q2_k_quant(blk, 16 * s + l)) - ms;
        }
      }
      return;
    case ggml_type::q3_k:
      for (int64_t b = 0; b < nb; ++b) {
        const auto& blk = blocks<block_q3_k>(src)[b];
        const float d = fp16_to_f32(blk.d);
        for (int s = 0; s < 16; ++s) {
          const float ds = d * float(q3_k_scale(blk.scales, s) - 32);
          for (int l = 0; l < 16; ++l) dst[b * qk_k + 16 * s + l] = ds * float(q3_k_quant(blk, 16 * s + l) - 4);
        }
      }
      return;
    case ggml_type::q4_k:
      dequant_k4<block_q4_k>(src, dst, nb, [](const block_q4_k& blk, int e) { return q4_k_quant(blk, e); });
      return;
    case ggml_type::q5_k:
      dequant_k4<block_q5_k>(src, dst, nb, [](const block_q5_k& blk, int e) { return q5_k_quant(blk, e); });
      return;
    case ggml_type::q6_k:
      for (int64_t b = 0; b < nb; ++b) {
        const auto& blk = blocks<block_q6_k>(src)[b];
        const float d = fp16_to_f32(blk.d);
        for (int e = 0; e < qk_k; ++e)
          dst[b * qk_k + e] = d * float(blk.scales[e / 16]) * float(q6_k_quant(blk, e) - 32);
      }
      return;
    default:
      throw std::invalid_argument(std::string("dequantize_row: unsupported type ") + traits->name);
  }
}

}  // namespace spate::kernels
