// The decoder adapter over inline records (matmul_internal.h), shared by the SIMD matmul
// kernels (matmul_avx2.cpp, matmul_avx512.cpp). Internal, header-only.
//
// Contracts as simd_avx2.h's: include ONLY from *_avx2.cpp / *_avx512.cpp (after
// simd_avx2.h); unnamed namespace, so each file gets its own copy compiled with its flags.
//
// A kernel's decoders are written against the region layout (block b of a region at
// L->region + bytes * b). inline_dec<Dec> hands each call a Dec whose record starts at the
// block's (or super-block head's) offset inside the inline record and asks for block 0
// (super-block 0) there, with Dec::L = the inline layout's `at`. The inline layout is a
// compile-time constant of Dec::type, so every offset folds into the loads.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_internal.h"

namespace spate::kernels::detail {
namespace {

// A super-block's per-column d (and -dmin), converted once for its 8 blocks (K-quants).
struct sb_scales {
  __m256 d, m;
};

// True for the types whose records carry super-block heads (the K-quants).
constexpr bool has_superblocks(ggml_type t) { return inline_of(layout_of(t, 256)).head_bytes > 0; }

// Decoder Dec over the inline record at `rec`. Dec needs `static constexpr ggml_type type`
// and a constructor Dec{record, layout}. Only the members a kernel calls are instantiated:
// the avx2 kernels call mult, the avx512 ones scale32; both call vec and scales, the
// K-quant kernels superblock, Q2_K's min_pairs. Inherits Dec's traits (has_min, ...).
template <class Dec>
struct inline_dec : Dec {
  static constexpr inline_layout I = inline_of(layout_of(Dec::type, 256));
  static constexpr group_layout block_at = I.at;
  explicit inline_dec(const uint8_t* rec) : Dec{rec, &block_at} {}
  Dec block(int64_t b) const { return Dec{this->g + I.block_offset(b), &block_at}; }
  template <int J>
  __m256i vec(int64_t b) const { return block(b).template vec<J>(0); }
  template <class... A>
  void scales(int64_t b, A&... a) const { block(b).scales(0, a...); }
  __m256i mult(int64_t b, int h) const { return block(b).mult(0, h); }
  __m256i scale32(int64_t b, int h) const { return block(b).scale32(0, h); }
  __m256i min_pairs(int64_t b) const { return block(b).min_pairs(0); }
  sb_scales superblock(int64_t S) const { return Dec{this->g + I.head_offset(S), &block_at}.superblock(0); }
};

}  // namespace
}  // namespace spate::kernels::detail
