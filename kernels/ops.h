// Non-matmul kernels of the forward pass: normalisation, rotary embedding,
// activation, softmax, paged KV cache store and attention, residual add.
//
// Every op exists as a scalar reference (ops_ref.cpp) and an AVX2+FMA+F16C
// version (ops_avx2.cpp); attention and the gated activations also have AVX-512
// versions (ops_avx512.cpp), which the avx512 level's table uses with the avx2
// versions of the other ops. The quantized KV cache dtypes (kv_dtype q8_0,
// fp8_e5m2) have their conversions, the store every level shares and the
// reference attention in ops_kvq_ref.cpp, and their SIMD attention passes in
// ops_kvq_simd.h (q8_0) and the lane loads of ops_simd_avx2.h / ops_avx512.cpp.
// ops() returns the table for active_isa().
//
// Contracts shared by all ops:
//  * Thread-safety: every function is pure with respect to its arguments (no
//    global or thread-local state); concurrent calls on disjoint outputs are safe.
//  * Batch invariance: a call's result depends only on its arguments' values,
//    never on the calling thread, on buffer alignment, or on other calls.
//    Reductions run in a fixed order that depends only on the sizes.
//  * No alignment is required of any pointer beyond that of its element type.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace spate::kernels {

enum class rope_mode { normal, neox };  // normal: rotate pairs (2i, 2i+1); neox: rotate (i, i + n_rot/2)
// KV cache element types (--kv-cache-dtype). f16 and f32 store elements; the
// quantized types store bytes:
//   q8_0:     groups of 32 consecutive dims of one token's K or V row (llama.cpp's
//             q8_0 rows) as 32 int8 values q and one f16 scale d: value = q * d,
//             quantized as llama.cpp's quantize_row_q8_0_ref (amax = max |x|,
//             d = amax / 127, id = d ? 1 / d : 0, stored scale f16(d), q = roundf(x * id)).
//             Requires head_dim % 32 == 0 (kv_dtype_supports_head_dim).
//   fp8_e5m2: one byte per element, the top byte of an IEEE half: decoded as the
//             f16 (byte << 8). Encoded by rounding the float to f16 (round to
//             nearest even), then that half to its top byte, again to nearest
//             even on the low 8 bits (so a double rounding, as f32 -> f16 -> e5m2
//             casts give); values past 57344 + half an ulp become +-inf, NaN
//             stays a (quiet) NaN.
enum class kv_dtype { f16, f32, q8_0, fp8_e5m2 };

// The --kv-cache-dtype spelling of a dtype: "f16", "f32", "q8_0", "fp8_e5m2".
const char* kv_dtype_name(kv_dtype dt);
// Whether dt can store rows of head_dim values: q8_0 needs head_dim % 32 == 0, the others any head_dim >= 1.
bool kv_dtype_supports_head_dim(kv_dtype dt, int32_t head_dim);
// q8_0's group size (values per scale).
inline constexpr int32_t k_kv_q8_group = 32;

// Bytes of one kv head's part of one block, in the K pool and in the V pool
// alike (see paged_kv_view). Precondition: kv_dtype_supports_head_dim(dt, head_dim), block_size >= 1.
// Inline: the attention kernels call it per block, and a call there would
// make the compiler keep their vector accumulators in memory.
inline int64_t kv_head_block_bytes(kv_dtype dt, int32_t block_size, int32_t head_dim) {
  const int64_t n = static_cast<int64_t>(block_size) * head_dim;
  switch (dt) {
    case kv_dtype::f16: return 2 * n;
    case kv_dtype::f32: return 4 * n;
    case kv_dtype::q8_0: return n + 2 * (n / k_kv_q8_group);  // int8 values, then one f16 scale per 32
    case kv_dtype::fp8_e5m2: return n;
  }
  return 0;
}

// Paged KV cache layout for ONE layer, K and V pools separately. Kv head h of
// block b owns kv_head_block_bytes(dtype, block_size, head_dim) bytes of each
// pool from byte base = (b * n_kv_heads + h) * kv_head_block_bytes(...), so
// block b is the contiguous byte range [b, b + 1) * n_kv_heads * kv_head_block_bytes
// of each pool. Within that part, for f16, f32 and fp8_e5m2 (elements of 2, 4, 1 bytes),
// in elements from base:
//   V (slot-major):            element (s, d) at s * head_dim + d
//   K (dim-major, transposed): element (s, d) at d * block_size + s
// and for q8_0 (G = head_dim / 32 groups per row), in bytes from base:
//   K values (int8, transposed): (s, d) at d * block_size + s
//   K scales (f16, group-major): scale of (s, group g) at block_size * head_dim + 2 * (g * block_size + s)
//   V values (int8, slot-major): (s, d) at s * head_dim + d
//   V scales (f16, slot-major):  scale of (s, group g) at block_size * head_dim + 2 * (s * G + g)
// so attention's score pass reads consecutive slots as vector lanes (one FMA
// chain per score, no horizontal sums; for q8_0 also the slots' scales of a
// group) and its output pass reads V rows.
struct paged_kv_view {
  void* k = nullptr; void* v = nullptr;   // pools for this layer (see above)
  kv_dtype dtype = kv_dtype::f16;
  int32_t block_size = 16, n_kv_heads = 0, head_dim = 0;
};

struct ops_table {
  // y = x / sqrt(mean(x^2) + eps) * w ; n floats. x and y may alias. n >= 1.
  void (*rms_norm)(const float* x, const float* w, float* y, int64_t n, float eps);
  // Rotates, in place, n_heads heads of head_dim floats (contiguous) by the angles of one position. Only the
  // first n_rot dims of each head rotate. cos_sin: n_rot floats from rope_angles() below, cos(theta_i) at
  // [0, n_rot/2) and sin(theta_i) at [n_rot/2, n_rot). Preconditions: n_rot even, 0 <= n_rot <= head_dim.
  void (*rope)(float* x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float* cos_sin, rope_mode mode);
  // out[i] = silu(gate[i]) * up[i]
  void (*swiglu)(const float* gate, const float* up, float* out, int64_t n);
  // out[i] = gelu_tanh(gate[i]) * up[i] (Gemma's gated FFN), with
  // gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed as x / (1 + exp(-2 u)).
  void (*geglu)(const float* gate, const float* up, float* out, int64_t n);
  // gpt-oss's clamped SwiGLU (ggml's swiglu_oai): with x = min(gate[i], limit) and
  // y = clamp(up[i], -limit, limit), out[i] = x / (1 + exp(-alpha x)) * (y + 1). gpt-oss: alpha = 1.702,
  // limit = 7. A NaN gate or up gives NaN (as ggml's std::min / std::clamp). out may be gate or up (the
  // same pointer: the MoE block computes in place), but must not otherwise overlap them.
  void (*swiglu_oai)(const float* gate, const float* up, float* out, int64_t n, float alpha, float limit);
  // In-place numerically stable softmax over n floats (n >= 1).
  void (*softmax)(float* x, int64_t n);
  // Writes one token's K and V for kv head h (head_dim floats each) into slot `slot` of block `block`.
  // f16 pools store round-to-nearest-even halves; q8_0 and fp8_e5m2 quantize as kv_dtype states, with
  // the same bytes at every ISA level (one scalar implementation).
  void (*kv_store)(const paged_kv_view& kv, int32_t block, int32_t slot, int32_t kv_head, const float* k, const float* v);
  // Causal attention of n_group query heads sharing kv head `kv_head` (GQA group) for ONE query token that
  // attends to positions [first, n_ctx): first > 0 is a sliding window, whose earlier positions (and the
  // blocks holding only them) are never read. q: n_group * head_dim floats; out: n_group * head_dim floats.
  // Position p lives in block block_table[p / block_size], slot p % block_size. scale = 1/sqrt(head_dim)
  // normally. scratch: at least attention_scratch_floats(n_group, n_ctx) floats.
  // sinks: nullptr, or n_group floats, the attention-sink logit of each head of the group (gpt-oss; the
  // caller offsets it to the group's first head). A sink s joins the softmax's denominator without a value
  // row, and is NOT multiplied by scale (as llama.cpp): with m = max(max_p score_p, s) and
  // w_p = exp(score_p - m), out = sum_p w_p v_p / (sum_p w_p + exp(s - m)). A sink of -inf equals none, and
  // nullptr gives exactly the bits of a call without sinks. Sinks must not be +inf or NaN.
  // q8_0 and fp8_e5m2 are read in place (no dequantized copy of the cache): for q8_0 the score of a slot
  // is sum over groups g of scale_g * (sum over d in g of q[d] * k_int8[d]), and the output sums
  // (w_p * scale_{p,g}) * v_int8 over p.
  // Preconditions: 0 <= first < n_ctx, or n_ctx == 0, which writes zeros. out must not alias q, sinks or
  // scratch; concurrent calls need their own scratch.
  void (*attention)(const float* q, int32_t n_group, const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table,
                    int32_t first, int32_t n_ctx, float scale, const float* sinks, float* out, float* scratch);
  // y[i] += x[i] (residual add)
  void (*add)(float* y, const float* x, int64_t n);
  // A LoRA adapter's expansion into a projection's output row: for c in [0, n),
  //   y[c] = fma(scale, sum over j < rank of t[j] * bt[j * ld + c], y[c])
  // with bt = B transposed (rank rows of ld >= n floats). The sum is one chain
  // of fused multiply-adds per column, j = 0 first, and the add into y one
  // more (std::fma in the reference): every level gives the same bits.
  void (*lora_expand)(float* y, const float* bt, int64_t ld, int32_t rank, const float* t, float scale, int64_t n);
};

// Rotary angles of position pos, shared by every ISA so all see identical values: for i in [0, n_rot/2),
// theta_i = pos * freq_base^(-2i/n_rot) / freq_factors[i] (freq_factors may be null = 1, else n_rot/2
// entries), evaluated in double (precision holds for large pos) and rounded once to float:
// cos_sin[i] = cos(theta_i), cos_sin[n_rot/2 + i] = sin(theta_i). Pure, thread-safe. The forward pass
// computes them once per token and step and reuses them in every layer.
void rope_angles(int32_t n_rot, int32_t pos, float freq_base, const float* freq_factors, float* cos_sin);

// YaRN context extension (gpt-oss), with ggml's parameters (ggml-cpu rope_yarn). Per rotated pair i, the
// extrapolated angle theta_e = pos * freq_base^(-2i/n_rot) (rope_angles') and the interpolated one
// theta_i = freq_scale * theta_e are mixed by a ramp over the pair index: r(i) = 1 - clamp((i - corr_low) /
// max(0.001, corr_high - corr_low), 0, 1), mix = r * ext_factor, theta = theta_i (1 - mix) + theta_e mix. So
// pairs i <= corr_low (high frequencies) keep theta_e (pure extrapolation), pairs i >= corr_high (low
// frequencies) get theta_i (pure interpolation). cos and sin are multiplied by mscale = attn_factor, times
// (1 + 0.1 ln(1/freq_scale)) when ext_factor != 0.
struct rope_yarn {
  float freq_scale = 1.0f;   // 1 / the context-extension factor
  float ext_factor = 0.0f;   // weight of extrapolation on the ramp: 1 = YaRN, 0 = plain interpolation
  float attn_factor = 1.0f;  // magnitude scale of cos and sin (see above)
  float corr_low = 0.0f, corr_high = 0.0f;  // the ramp's ends, in pair indices (whole numbers)
};

// The YaRN parameters llama.cpp uses for a model with rope scaling type yarn, context-extension factor
// `factor` (GGUF rope.scaling.factor), training context n_ctx_orig (rope.scaling.original_context_length)
// and no rope.scaling.yarn_log_multiplier: freq_scale = 1/factor, ext_factor = 1, corr_low/high =
// ggml_rope_yarn_corr_dims (the pair indices whose wavelength makes beta_fast / beta_slow turns over
// n_ctx_orig, floor / ceil, clamped to [0, n_rot - 1]) and attn_factor = get_mscale(factor) / (1 + 0.1 ln
// factor) with get_mscale(f) = 1 + 0.1 ln f for f > 1, else 1 (llama-context.cpp); so the magnitude scale
// rope_angles_yarn applies is get_mscale(factor). All in float as llama.cpp computes them.
// Preconditions: n_rot > 0 even, factor > 0, n_ctx_orig > 0, freq_base > 1.
rope_yarn make_rope_yarn(int32_t n_rot, float factor, int32_t n_ctx_orig, float freq_base, float beta_fast = 32.0f,
                         float beta_slow = 1.0f);

// rope_angles with YaRN (see rope_yarn), same layout: cos_sin[i] = mscale cos(theta_i), cos_sin[n_rot/2 + i] =
// mscale sin(theta_i), i < n_rot/2. theta is evaluated in double and rounded once, after the product with
// mscale (a float computed as ggml does). ggml instead builds its angles in float by the recurrence
// theta *= freq_base^(-2/n_rot) and mixes and takes cos/sin in float, so its values differ from these by
// float roundings that grow with pos: ~1e-7 at pos 1, ~5e-5 at pos 4095 and ~3e-3 at pos 100000 (gpt-oss-20b's
// shape, tests/reference/rope_yarn_values.py --ggml); these are the closer to the exact angles. Pure, thread-safe.
void rope_angles_yarn(int32_t n_rot, int32_t pos, float freq_base, const rope_yarn& yarn, float* cos_sin);

// Issues software prefetches (no effect on results) for the K and V rows that
// attention(..., kv_head, block_table, first, n_ctx, ...) will read, up to the
// first k_prefetch_kv_blocks blocks of the window. Meant for the NEXT attention
// call of a thread: a decode step's KV was written steps ago and has since been
// evicted by the weight stream, and its blocks are scattered in the pool, so
// the hardware prefetcher only finds each block once it is being read.
inline constexpr int32_t k_prefetch_kv_blocks = 16;
void prefetch_kv(const paged_kv_view& kv, int32_t kv_head, const int32_t* block_table, int32_t first, int32_t n_ctx);

// Floats of scratch that attention needs (same for every ISA level).
int64_t attention_scratch_floats(int32_t n_group, int32_t n_ctx);

const ops_table& ops();                       // for active_isa()
// For tests and benchmarks; requires cpu_supports(level). avx512: the avx2 table with the AVX-512
// attention and gated activations.
const ops_table& ops_for(isa_level level);

}  // namespace spate::kernels
