// Dispatch for the non-matmul ops and ISA-independent helpers.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops_internal.h"

namespace spate::kernels {

int64_t attention_scratch_floats(int32_t n_group, int32_t n_ctx) {
  if (n_group <= 0 || n_ctx <= 0) return 8;
  return static_cast<int64_t>(n_group) * detail::attention_scores_stride(n_ctx) + 8;
}

const char* kv_dtype_name(kv_dtype dt) {
  switch (dt) {
    case kv_dtype::f16: return "f16";
    case kv_dtype::f32: return "f32";
    case kv_dtype::q8_0: return "q8_0";
    case kv_dtype::fp8_e5m2: return "fp8_e5m2";
  }
  return "?";
}

bool kv_dtype_supports_head_dim(kv_dtype dt, int32_t head_dim) {
  if (head_dim < 1) return false;
  return dt != kv_dtype::q8_0 || head_dim % k_kv_q8_group == 0;
}

void prefetch_kv(const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table, int32_t first, int32_t n_ctx) {
  if (n_ctx <= first || kv.block_size <= 0) return;
  // One head's part of a block (K or V), values and (q8_0) scales.
  const int64_t bytes = kv_head_block_bytes(kv.dtype, kv.block_size, kv.head_dim);
  const int32_t b0 = first / kv.block_size;
  const int32_t b1 = std::min((n_ctx - 1) / kv.block_size + 1, b0 + k_prefetch_kv_blocks);
  for (int32_t b = b0; b < b1; ++b) {
    const int64_t at = detail::kv_head_base_bytes(kv, block_table[b], kv_head);
    const char* k = static_cast<const char*>(kv.k) + at;
    const char* v = static_cast<const char*>(kv.v) + at;
    for (int64_t o = 0; o < bytes; o += 64) {
      __builtin_prefetch(k + o, 0, 3);
      __builtin_prefetch(v + o, 0, 2);
    }
  }
}

const ops_table& ops_for(isa_level level) {
  switch (level) {
    case isa_level::avx512: return detail::ops_avx512_table();  // avx2 ops + AVX-512 attention, gated activations
    case isa_level::avx2: return detail::ops_avx2_table();
    case isa_level::scalar: break;
  }
  return detail::ops_ref_table();
}

const ops_table& ops() { return ops_for(active_isa()); }

void rope_angles(int32_t n_rot, int32_t pos, float freq_base, const float* freq_factors, float* cos_sin) {
  const int32_t half = n_rot / 2;
  const double base = static_cast<double>(freq_base);
  for (int32_t i = 0; i < half; ++i) {
    double theta = static_cast<double>(pos) * std::pow(base, -2.0 * i / n_rot);
    if (freq_factors) theta /= static_cast<double>(freq_factors[i]);
    cos_sin[i] = static_cast<float>(std::cos(theta));
    cos_sin[half + i] = static_cast<float>(std::sin(theta));
  }
}

namespace {

// ggml_rope_yarn_corr_dim (ggml.c), in float as there: the (fractional) pair index at which the rotation
// frequency base^(-2i/n_dims) makes n_turns turns over n_ctx_orig positions.
float yarn_corr_dim(int32_t n_dims, int32_t n_ctx_orig, float n_turns, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_turns * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}

// llama-context.cpp's get_mscale(scale, mscale = 1).
float yarn_get_mscale(float scale) { return scale <= 1.0f ? 1.0f : 0.1f * std::log(scale) + 1.0f; }

}  // namespace

rope_yarn make_rope_yarn(int32_t n_rot, float factor, int32_t n_ctx_orig, float freq_base, float beta_fast,
                         float beta_slow) {
  rope_yarn y;
  y.freq_scale = 1.0f / factor;  // GGUF's factor becomes freq_scale, and factor is taken back from it
  y.ext_factor = 1.0f;
  const float f = 1.0f / y.freq_scale;
  y.attn_factor = yarn_get_mscale(f) * (1.0f / (1.0f + 0.1f * std::log(f)));
  y.corr_low = std::max(0.0f, std::floor(yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base)));
  y.corr_high = std::min(static_cast<float>(n_rot - 1), std::ceil(yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base)));
  return y;
}

void rope_angles_yarn(int32_t n_rot, int32_t pos, float freq_base, const rope_yarn& yarn, float* cos_sin) {
  const int32_t half = n_rot / 2;
  const double base = static_cast<double>(freq_base);
  float mscale = yarn.attn_factor;
  if (yarn.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / yarn.freq_scale);  // as ggml's rope_yarn
  const double ms = mscale, fs = yarn.freq_scale, ext = yarn.ext_factor, low = yarn.corr_low;
  const double width = std::max<double>(0.001f, static_cast<double>(yarn.corr_high) - low);  // ggml: MAX(0.001f, ..)
  for (int32_t i = 0; i < half; ++i) {
    const double extrap = static_cast<double>(pos) * std::pow(base, -2.0 * i / n_rot);
    double theta = fs * extrap;
    if (ext != 0.0) {
      const double mix = (1.0 - std::min(1.0, std::max(0.0, (i - low) / width))) * ext;
      theta = theta * (1.0 - mix) + extrap * mix;
    }
    cos_sin[i] = static_cast<float>(std::cos(theta) * ms);
    cos_sin[half + i] = static_cast<float>(std::sin(theta) * ms);
  }
}

}  // namespace spate::kernels
