// The quantized KV cache dtypes q8_0 and fp8_e5m2 (kernels/ops.h kv_dtype):
// their conversions, the kv_store every ISA level shares, and the scalar
// reference attention over them. Baseline code (no ISA flags); pure functions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/fp16.h"
#include "kernels/ops.h"
#include "kernels/ops_internal.h"

namespace spate::kernels::detail {

// llama.cpp's quantize_row_q8_0_ref for one group: amax over the 32 values, d = amax / 127,
// id = d ? 1 / d : 0 (from the float d, not the stored half), q = roundf(x * id).
uint16_t quantize_q8_group(const float* x, int8_t* q, int64_t q_step) {
  float amax = 0.0f;
  for (int32_t i = 0; i < k_kv_q8_group; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int32_t i = 0; i < k_kv_q8_group; ++i) q[i * q_step] = static_cast<int8_t>(std::roundf(x[i] * id));
  return f32_to_fp16(d);
}

// f32 -> f16 (round to nearest even), then the half's top byte, rounding its low byte to nearest even:
// adding 0x7f plus the kept byte's lowest bit carries into the top byte exactly when the low byte is
// above 0x80, or equal to it with an odd top byte. A carry out of the largest finite e5m2 (0x7b) gives
// 0x7c, infinity, as it should (the magnitude stays below 0x8000, so the sign is untouched). Infinities
// pass unchanged; NaNs keep their sign and become the quiet NaN 0x7e (their payload may sit in the low byte).
uint8_t f32_to_e5m2(float x) {
  const uint16_t h = f32_to_fp16(x);
  if ((h & 0x7fffu) > 0x7c00u) return static_cast<uint8_t>((h >> 8) | 0x7eu);
  if ((h & 0x7fffu) == 0x7c00u) return static_cast<uint8_t>(h >> 8);
  const uint32_t r = static_cast<uint32_t>(h) + 0x7fu + ((h >> 8) & 1u);
  return static_cast<uint8_t>(r >> 8);
}

float e5m2_to_f32(uint8_t b) { return fp16_to_f32(static_cast<uint16_t>(b << 8)); }

void kv_store_quantized(const paged_kv_view& kv, int32_t block, int32_t slot, int32_t kv_head, const float* k,
                        const float* v) {
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  if (kv.dtype == kv_dtype::fp8_e5m2) {
    uint8_t* kb = static_cast<uint8_t*>(kv.k) + kv_k_index(kv, block, kv_head, slot, 0);
    uint8_t* vb = static_cast<uint8_t*>(kv.v) + kv_v_row_index(kv, block, kv_head, slot);
    for (int32_t d = 0; d < hd; ++d) {
      kb[static_cast<int64_t>(d) * bs] = f32_to_e5m2(k[d]);
      vb[d] = f32_to_e5m2(v[d]);
    }
    return;
  }
  // q8_0: K groups down the slot's column, V groups along its row.
  const int64_t base = kv_head_base_bytes(kv, block, kv_head);
  auto* kb = static_cast<uint8_t*>(kv.k) + base;
  auto* vb = static_cast<uint8_t*>(kv.v) + base;
  for (int32_t g = 0; g < hd / k_kv_q8_group; ++g) {
    const int32_t d0 = g * k_kv_q8_group;
    const uint16_t ks = quantize_q8_group(k + d0, reinterpret_cast<int8_t*>(kb + static_cast<int64_t>(d0) * bs + slot), bs);
    std::memcpy(kb + kv_q8_k_scale_offset(kv, slot, g), &ks, 2);
    const uint16_t vs = quantize_q8_group(v + d0, reinterpret_cast<int8_t*>(vb + static_cast<int64_t>(slot) * hd + d0), 1);
    std::memcpy(vb + kv_q8_v_scale_offset(kv, slot, g), &vs, 2);
  }
}

namespace {

inline float load_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_f32(h);
}

// Unscaled score q . k of the slot at (block, slot), in the chain every SIMD level computes:
// fp8: acc = fma(q[d], k[d], acc) over d; q8_0: per group, part = fma(q[d], k[d], part) over the
// group's dims, then acc = fma(scale_g, part, acc).
float score_quantized(const float* qg, const paged_kv_view& kv, int32_t block, int32_t kv_head, int32_t slot) {
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  if (kv.dtype == kv_dtype::fp8_e5m2) {
    const uint8_t* kb = static_cast<const uint8_t*>(kv.k) + kv_k_index(kv, block, kv_head, slot, 0);
    float acc = 0.0f;
    for (int32_t d = 0; d < hd; ++d) acc = std::fma(qg[d], e5m2_to_f32(kb[static_cast<int64_t>(d) * bs]), acc);
    return acc;
  }
  const uint8_t* kb = static_cast<const uint8_t*>(kv.k) + kv_head_base_bytes(kv, block, kv_head);
  float acc = 0.0f;
  for (int32_t g = 0; g < hd / k_kv_q8_group; ++g) {
    float part = 0.0f;
    for (int32_t d = g * k_kv_q8_group; d < (g + 1) * k_kv_q8_group; ++d) {
      part = std::fma(qg[d], static_cast<float>(static_cast<int8_t>(kb[static_cast<int64_t>(d) * bs + slot])), part);
    }
    acc = std::fma(load_half(kb + kv_q8_k_scale_offset(kv, slot, g)), part, acc);
  }
  return acc;
}

// og[d] += w * v[d] for the slot's V row: fp8 as fma(w, v, og); q8_0 as fma(w * scale_g, v_int8, og).
void accumulate_v_quantized(float w, const paged_kv_view& kv, int32_t block, int32_t kv_head, int32_t slot, float* og) {
  const int32_t hd = kv.head_dim;
  if (kv.dtype == kv_dtype::fp8_e5m2) {
    const uint8_t* vb = static_cast<const uint8_t*>(kv.v) + kv_v_row_index(kv, block, kv_head, slot);
    for (int32_t d = 0; d < hd; ++d) og[d] = std::fma(w, e5m2_to_f32(vb[d]), og[d]);
    return;
  }
  const uint8_t* vb = static_cast<const uint8_t*>(kv.v) + kv_head_base_bytes(kv, block, kv_head);
  const int8_t* row = reinterpret_cast<const int8_t*>(vb + static_cast<int64_t>(slot) * hd);
  for (int32_t g = 0; g < hd / k_kv_q8_group; ++g) {
    const float c = w * load_half(vb + kv_q8_v_scale_offset(kv, slot, g));
    for (int32_t d = g * k_kv_q8_group; d < (g + 1) * k_kv_q8_group; ++d) og[d] = std::fma(c, static_cast<float>(row[d]), og[d]);
  }
}

}  // namespace

void attention_quantized_ref(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head,
                             const int32_t* block_table, int32_t first, int32_t n_ctx, float scale, const float* sinks,
                             float* out, float* scratch) {
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  if (n_ctx <= 0) {
    std::memset(out, 0, sizeof(float) * n_group * hd);
    return;
  }
  const int64_t stride = attention_scores_stride(n_ctx);
  for (int32_t g = 0; g < n_group; ++g) {
    const float* qg = q + static_cast<int64_t>(g) * hd;
    float* sc = scratch + g * stride;
    for (int32_t p = first; p < n_ctx; ++p) sc[p] = score_quantized(qg, kv, block_table[p / bs], kv_head, p % bs) * scale;
    const float sum = softmax_scores_ref(sc, first, n_ctx, sinks ? sinks + g : nullptr);
    float* og = out + static_cast<int64_t>(g) * hd;
    for (int32_t d = 0; d < hd; ++d) og[d] = 0.0f;
    for (int32_t p = first; p < n_ctx; ++p) accumulate_v_quantized(sc[p], kv, block_table[p / bs], kv_head, p % bs, og);
    const float inv = 1.0f / sum;
    for (int32_t d = 0; d < hd; ++d) og[d] *= inv;
  }
}

}  // namespace spate::kernels::detail
