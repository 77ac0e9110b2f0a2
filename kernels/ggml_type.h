// GGML tensor element types as stored in GGUF files, with their block geometry.
//
// Quantized types store a row of n elements as n / block_elems blocks of
// block_bytes each; a row's n must be a multiple of block_elems.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace spate::kernels {

// Values are the on-disk GGUF type ids.
enum class ggml_type : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq4_nl = 20,
  bf16 = 30,
  mxfp4 = 39,  // OCP microscaling FP4 (gpt-oss experts)
};

struct type_traits {
  const char* name;     // "Q4_1", as llama.cpp names it
  int64_t block_elems;  // elements per block (1 for plain floats)
  int64_t block_bytes;  // bytes per block
  bool supported;       // spate can load weights of this type
};

// Traits for a raw GGUF type id; nullopt for ids that are not GGML types at all.
std::optional<type_traits> traits_of(uint32_t raw_type);

// Bytes of one row of n elements. Precondition: n % block_elems == 0.
inline int64_t row_bytes(const type_traits& t, int64_t n) { return n / t.block_elems * t.block_bytes; }

// Human name of a raw type id ("Q4_1", or "type#42" for unknown ids).
const char* type_name(uint32_t raw_type);

}  // namespace spate::kernels
