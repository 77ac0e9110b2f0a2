// Scalar dequantization of one GGUF row to f32 (embedding lookup, test ground truth).
#pragma once

#include <cstdint>

#include "kernels/ggml_type.h"

namespace spate::kernels {

// Writes n floats to dst from one row of type `type` at src.
// Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K.
// Throws std::invalid_argument for other types or if n is not a multiple of
// the type's block size. Pure function, thread-safe.
void dequantize_row(ggml_type type, const void* src, float* dst, int64_t n);

}  // namespace spate::kernels
