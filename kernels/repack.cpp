// Repacks GGUF weight rows into the 8-column interleaved groups read by the
// AVX2 and AVX-512 matmul kernels. The layout is documented in matmul_internal.h.
#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/quant_blocks.h"

namespace spate::kernels::detail {
namespace {

// The 32 quants of block b (a 32-element slice of the row) of one GGUF row,
// unsigned as stored (Q8_0: signed; IQ4_NL, MXFP4: the 4-bit code book index), plus
// the per-block scale metadata.
struct block_view {
  int q[32];
  uint16_t d = 0, m = 0;    // legacy fp16 scale / min bits (MXFP4 d: bf16 bits of its scale)
  int sc[2] = {0, 0};       // K-quants: 6-bit scale (Q6_K, Q3_K, Q2_K: scale of each 16-half)
  int mn[2] = {0, 0};       // K-quants: 6-bit min (Q2_K: min of each 16-half)
  uint16_t sd = 0, sm = 0;  // K-quants: super-block d / dmin bits
};

void read_block(ggml_type type, const uint8_t* row, int64_t b, block_view& v) {
  switch (type) {
    case ggml_type::q4_0: {
      const auto& blk = reinterpret_cast<const block_q4_0*>(row)[b];
      for (int e = 0; e < 32; ++e) v.q[e] = q4_quant(blk.qs, e);
      v.d = blk.d;
      return;
    }
    case ggml_type::iq4_nl: {
      const auto& blk = reinterpret_cast<const block_iq4_nl*>(row)[b];
      for (int e = 0; e < 32; ++e) v.q[e] = q4_quant(blk.qs, e);
      v.d = blk.d;
      return;
    }
    case ggml_type::mxfp4: {
      const auto& blk = reinterpret_cast<const block_mxfp4*>(row)[b];
      for (int e = 0; e < 32; ++e) v.q[e] = q4_quant(blk.qs, e);
      v.d = e8m0_half_to_bf16(blk.e);
      return;
    }
    case ggml_type::q4_1: {
      const auto& blk = reinterpret_cast<const block_q4_1*>(row)[b];
      for (int e = 0; e < 32; ++e) v.q[e] = q4_quant(blk.qs, e);
      v.d = blk.d;
      v.m = blk.m;
      return;
    }
    case ggml_type::q5_0: {
      const auto& blk = reinterpret_cast<const block_q5_0*>(row)[b];
      for (int e = 0; e < 32; ++e) v.q[e] = q5_quant(blk.qs, blk.qh, e);
      v.d = blk.d;
      return;
    }
    case ggml_type::q5_1: {
      const auto& blk = reinterpret_cast<const block_q5_1*>(row)[b];
      for (int e = 0; e < 32; ++e) v.q[e] = q5_quant(blk.qs, blk.qh, e);
      v.d = blk.d;
      v.m = blk.m;
      return;
    }
    case ggml_type::q8_0: {
      const auto& blk = reinterpret_cast<const block_q8_0*>(row)[b];
      for (int e = 0; e < 32; ++e) v.q[e] = blk.qs[e];
      v.d = blk.d;
      return;
    }
    case ggml_type::q4_k: {
      const auto& blk = reinterpret_cast<const block_q4_k*>(row)[b / 8];
      const int s = int(b % 8);
      for (int e = 0; e < 32; ++e) v.q[e] = q4_k_quant(blk, 32 * s + e);
      unpack_k4_scale_min(blk.scales, s, v.sc[0], v.mn[0]);
      v.sd = blk.d;
      v.sm = blk.dmin;
      return;
    }
    case ggml_type::q5_k: {
      const auto& blk = reinterpret_cast<const block_q5_k*>(row)[b / 8];
      const int s = int(b % 8);
      for (int e = 0; e < 32; ++e) v.q[e] = q5_k_quant(blk, 32 * s + e);
      unpack_k4_scale_min(blk.scales, s, v.sc[0], v.mn[0]);
      v.sd = blk.d;
      v.sm = blk.dmin;
      return;
    }
    case ggml_type::q6_k: {
      const auto& blk = reinterpret_cast<const block_q6_k*>(row)[b / 8];
      const int s = int(b % 8);
      for (int e = 0; e < 32; ++e) v.q[e] = q6_k_quant(blk, 32 * s + e);
      v.sc[0] = blk.scales[2 * s];
      v.sc[1] = blk.scales[2 * s + 1];
      v.sd = blk.d;
      return;
    }
    case ggml_type::q3_k: {
      const auto& blk = reinterpret_cast<const block_q3_k*>(row)[b / 8];
      const int s = int(b % 8);
      for (int e = 0; e < 32; ++e) v.q[e] = q3_k_quant(blk, 32 * s + e);
      v.sc[0] = q3_k_scale(blk.scales, 2 * s) - 32;
      v.sc[1] = q3_k_scale(blk.scales, 2 * s + 1) - 32;
      v.sd = blk.d;
      return;
    }
    case ggml_type::q2_k: {
      const auto& blk = reinterpret_cast<const block_q2_k*>(row)[b / 8];
      const int s = int(b % 8);
      for (int e = 0; e < 32; ++e) v.q[e] = q2_k_quant(blk, 32 * s + e);
      for (int h = 0; h < 2; ++h) {
        v.sc[h] = blk.scales[2 * s + h] & 15;
        v.mn[h] = blk.scales[2 * s + h] >> 4;
      }
      v.sd = blk.d;
      v.sm = blk.dmin;
      return;
    }
    default:
      return;
  }
}

// The quant regions (qs, qh) of block b, column c of the group record g.
void put_quants(ggml_type type, const group_layout& L, const block_view& v, int64_t b, int c, uint8_t* g) {
  uint8_t* qs = g + L.qs + b * L.qs_block;
  if (type == ggml_type::q8_0) {
    for (int j = 0; j < 8; ++j)
      for (int i = 0; i < 4; ++i) qs[32 * j + 4 * c + i] = uint8_t(int8_t(v.q[4 * j + i]));
  } else if (is_k23(type)) {
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < 4; ++t)
        for (int i = 0; i < 4; ++i) qs[32 * h + 4 * c + i] |= uint8_t((v.q[4 * (4 * h + t) + i] & 3) << (2 * t));
  } else {
    for (int p = 0; p < 4; ++p)
      for (int i = 0; i < 4; ++i)
        qs[32 * p + 4 * c + i] = uint8_t((v.q[4 * p + i] & 15) | (v.q[4 * (p + 4) + i] & 15) << 4);
  }
  if (L.qh < 0) return;
  uint8_t* qh = g + L.qh + b * L.qh_block;
  if (type == ggml_type::q6_k) {
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < 4; ++t)
        for (int i = 0; i < 4; ++i)
          qh[32 * h + 4 * c + i] |= uint8_t(((v.q[4 * (4 * h + t) + i] >> 4) & 3) << (2 * t));
    return;
  }
  const int bit = type == ggml_type::q3_k ? 2 : 4;  // the one high bit: Q3_K bit 2, Q5 types bit 4
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 4; ++i) qh[4 * c + i] |= uint8_t(((v.q[4 * j + i] >> bit) & 1) << j);
}

// The scale regions (sc, mn) of block b, column c of the group record g.
void put_block_scales(ggml_type type, const group_layout& L, const block_view& v, int64_t b, int c, uint8_t* g) {
  if (L.sc >= 0) {
    if (L.sc_block == 16) {  // one byte per 16-half
      for (int h = 0; h < 2; ++h)
        g[L.sc + b * 16 + 8 * h + c] =
            type == ggml_type::q2_k ? uint8_t(v.sc[h] | v.mn[h] << 4) : uint8_t(int8_t(v.sc[h]));
    } else {
      g[L.sc + b * 8 + c] = uint8_t(v.sc[0]);
    }
  }
  if (L.mn >= 0) g[L.mn + b * 8 + c] = uint8_t(v.mn[0]);
}

void put_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// The 16-bit d entry of a 4-bit 32-block: its fp16 d, or MXFP4's scale as an exact bf16.
template <typename Block>
uint16_t d_entry(const Block& blk) {
  if constexpr (requires { blk.e; }) return e8m0_half_to_bf16(blk.e);
  else return blk.d;
}

// Byte-level repacking of one GGUF row into column c of its group record g,
// for the types whose packed bytes are GGUF bytes moved (or nibbles paired)
// without decoding every quant: the bulk of big files (a 30B mixture of
// experts loads 2-3x faster). Returns false for the other types. Writes the
// same bytes as the element-wise path (tests/kernels/test_repack.cpp).
bool repack_row_fast(ggml_type type, const group_layout& L, const uint8_t* row, int c, uint8_t* g) {
  // 4-bit legacy types (and IQ4_NL, MXFP4): packed qs byte 32p + 4c + i = GGUF qs[4p + i] (elements
  // 4p+i and 4p+i+16 in its two nibbles, as the packed vector pair p, p+4 wants).
  auto legacy4 = [&]<typename Block>(const Block* blocks, bool has_min) {
    for (int64_t b = 0; b < L.nb; ++b) {
      const Block& blk = blocks[b];
      uint8_t* qs = g + L.qs + b * L.qs_block + 4 * c;
      for (int p = 0; p < 4; ++p) std::memcpy(qs + 32 * p, blk.qs + 4 * p, 4);
      put_u16(g + L.d + b * 16 + 2 * c, d_entry(blk));
      if constexpr (requires { blk.m; }) {
        if (has_min) put_u16(g + L.m + b * 16 + 2 * c, blk.m);
      }
    }
  };
  switch (type) {
    case ggml_type::q4_0:
      legacy4(reinterpret_cast<const block_q4_0*>(row), false);
      return true;
    case ggml_type::iq4_nl:
      legacy4(reinterpret_cast<const block_iq4_nl*>(row), false);
      return true;
    case ggml_type::mxfp4:
      legacy4(reinterpret_cast<const block_mxfp4*>(row), false);
      return true;
    case ggml_type::q4_1:
      legacy4(reinterpret_cast<const block_q4_1*>(row), true);
      return true;
    case ggml_type::q8_0:  // packed qs byte 32j + 4c + i = GGUF qs[4j + i]
      for (int64_t b = 0; b < L.nb; ++b) {
        const auto& blk = reinterpret_cast<const block_q8_0*>(row)[b];
        uint8_t* qs = g + L.qs + b * L.qs_block + 4 * c;
        for (int j = 0; j < 8; ++j) std::memcpy(qs + 32 * j, blk.qs + 4 * j, 4);
        put_u16(g + L.d + b * 16 + 2 * c, blk.d);
      }
      return true;
    case ggml_type::q4_k:
      for (int64_t b = 0; b < L.nb; ++b) {
        const auto& blk = reinterpret_cast<const block_q4_k*>(row)[b / 8];
        const int s = int(b % 8), shift = 4 * (s % 2);
        // Sub-block s's element e is nibble (shift) of GGUF qs[32 (s/2) + e];
        // packed byte 32p + 4c + i pairs elements 4p+i (low) and 4p+i+16 (high).
        const uint8_t* src = blk.qs + 32 * (s / 2);
        uint8_t* qs = g + L.qs + b * L.qs_block + 4 * c;
        for (int p = 0; p < 4; ++p)
          for (int i = 0; i < 4; ++i)
            qs[32 * p + i] = uint8_t(((src[4 * p + i] >> shift) & 15) | ((src[4 * p + i + 16] >> shift) & 15) << 4);
        int sc = 0, mn = 0;
        unpack_k4_scale_min(blk.scales, s, sc, mn);
        g[L.sc + b * 8 + c] = uint8_t(sc);
        g[L.mn + b * 8 + c] = uint8_t(mn);
        if (s == 0) {
          put_u16(g + L.sd + (b / 8) * 16 + 2 * c, blk.d);
          put_u16(g + L.sm + (b / 8) * 16 + 2 * c, blk.dmin);
        }
      }
      return true;
    default:
      return false;
  }
}

}  // namespace

bool is_quantized(ggml_type t) {
  return t != ggml_type::f32 && t != ggml_type::f16 && t != ggml_type::bf16;
}

void write_inline(const group_layout& L, const inline_layout& I, const uint8_t* groups, int64_t n_groups,
                  uint8_t* dst) {
  const region_list regions = regions_of(L);
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* in = groups + g * L.stride;
    uint8_t* out = dst + g * I.stride;
    for (int k = 0; k < regions.n; ++k) {
      const region_entry& r = regions.at[k];
      const int64_t n = r.per_block ? L.nb : L.nb / 8;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t base = r.per_block ? I.block_offset(i) : I.head_offset(i);
        std::memcpy(out + base + I.at.*r.at, in + L.*r.at + i * r.bytes, size_t(r.bytes));
      }
    }
  }
}

void repack_groups(ggml_type type, const void* src, int64_t n_out, int64_t n_in, uint8_t* dst) {
  const auto traits = *traits_of(uint32_t(type));
  const int64_t rb = row_bytes(traits, n_in);
  const group_layout L = layout_of(type, n_in);
  const auto* in = static_cast<const uint8_t*>(src);

  if (!is_quantized(type)) {
    // Record of group g: [n_in][8] elements (k-major, column c at lane c), raw bits.
    auto transpose = [&]<int ES>() {
      for (int64_t col = 0; col < n_out; ++col) {
        uint8_t* g = dst + (col / 8) * L.stride + int(col % 8) * ES;
        const uint8_t* row = in + col * rb;
        for (int64_t k = 0; k < n_in; ++k) std::memcpy(g + k * 8 * ES, row + k * ES, ES);
      }
    };
    if (type == ggml_type::f32) transpose.template operator()<4>();
    else transpose.template operator()<2>();
    return;
  }

  if (repack_row_fast(type, L, in, 0, dst)) {  // column 0 done; the rest of the columns the same way
    for (int64_t col = 1; col < n_out; ++col) repack_row_fast(type, L, in + col * rb, int(col % 8), dst + (col / 8) * L.stride);
    return;
  }
  repack_groups_elementwise(type, src, n_out, n_in, dst);
}

void repack_groups_elementwise(ggml_type type, const void* src, int64_t n_out, int64_t n_in, uint8_t* dst) {
  const auto traits = *traits_of(uint32_t(type));
  const int64_t rb = row_bytes(traits, n_in);
  const group_layout L = layout_of(type, n_in);
  const auto* in = static_cast<const uint8_t*>(src);
  block_view v;
  for (int64_t col = 0; col < n_out; ++col) {
    uint8_t* g = dst + (col / 8) * L.stride;
    const int c = int(col % 8);
    const uint8_t* row = in + col * rb;
    for (int64_t b = 0; b < L.nb; ++b) {
      read_block(type, row, b, v);
      put_quants(type, L, v, b, c, g);
      if (L.d >= 0) put_u16(g + L.d + b * 16 + 2 * c, v.d);
      if (L.m >= 0) put_u16(g + L.m + b * 16 + 2 * c, v.m);
      put_block_scales(type, L, v, b, c, g);
      if (L.sd >= 0 && b % 8 == 0) put_u16(g + L.sd + (b / 8) * 16 + 2 * c, v.sd);
      if (L.sm >= 0 && b % 8 == 0) put_u16(g + L.sm + (b / 8) * 16 + 2 * c, v.sm);
    }
  }
}

}  // namespace spate::kernels::detail
