// Weight-matrix x activation products for the forward pass (all linear layers).
//
//   y[r][c] = sum_k W[c][k] * x[r][k]
//
// W is a GGUF tensor of n_out rows (output columns c) of n_in elements. It is
// prepared once by pack_weight(); activations are converted once per batch by
// quantize_act() into a buffer that every thread and every weight with the
// same act_format_id() and n_in can share; matmul() then computes any column
// range for any number of rows.
//
// Numerics (quantized weight types): activations are quantized per 32-element
// block to int8 with an f32 scale (round-to-nearest-even of x * 127/amax), the
// weight-block x activation-block dot product is exact in int32, and the f32
// accumulation over blocks runs in block order with one fixed sequence of
// multiplies/FMAs per output. Weight scales and their products with d_a may be
// subnormal (MXFP4's 2^-128 and 2^-127): every level computes them as IEEE
// subnormals (the default MXCSR; nothing in spate sets FTZ or DAZ). Float weight
// types (F32/F16/BF16) use f32 activations and one f32 FMA chain per output in k order:
//   acc = 0; for k = 0..n_in-1: acc = fma(float(W[c][k]), x[r][k], acc).
//
// Batch invariance (guaranteed, bitwise): y[r][c] depends only on W, on row r of
// the activations and on the isa_level of the weight; never on n_rows, the
// row's position in the batch, the column split or the thread.
//
// Thread-safety: a packed_weight is immutable after pack_weight(); matmul() and
// quantize_act() may run concurrently on disjoint output ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/ggml_type.h"
#include "kernels/isa.h"

namespace spate::kernels {

// A weight matrix W prepared for matmul: n_out rows, each of n_in elements, in a GGUF type.
// Move-only. May point into the caller's mmap (which must outlive it) or own a repacked copy.
//
// isa_level::scalar        : points at the GGUF data as given (bytes() == 0).
// isa_level::avx2 / avx512 : owns a copy repacked into 8-column interleaved groups (see
//                            matmul_internal.h); a quantized group's record is stored block
//                            by block ("inline records").
class packed_weight {
 public:
  packed_weight() = default;
  packed_weight(packed_weight&&) noexcept = default;
  packed_weight& operator=(packed_weight&&) noexcept = default;
  packed_weight(const packed_weight&) = delete;
  packed_weight& operator=(const packed_weight&) = delete;
  ~packed_weight() = default;

  ggml_type type() const { return type_; }
  int64_t n_out() const { return n_out_; }
  int64_t n_in() const { return n_in_; }
  isa_level isa() const { return isa_; }
  // Resident bytes owned by this object (0 if it only points into the caller's data).
  size_t bytes() const { return bytes_; }

  // Internal (kernels only): the data the kernels read, and the byte stride
  // between consecutive units (GGUF rows for scalar, 8-column groups for avx2/avx512).
  const uint8_t* data() const { return data_; }
  int64_t stride() const { return stride_; }

 private:
  friend packed_weight pack_weight(ggml_type, const void*, int64_t, int64_t, isa_level);
  friend class packed_weight_set;
  // Unmaps a buffer of pack_weight's (an anonymous mapping of len bytes).
  struct unmap_deleter {
    size_t len;  // set whenever the pointer is
    void operator()(uint8_t* p) const noexcept;
  };

  ggml_type type_ = ggml_type::f32;
  int64_t n_out_ = 0;
  int64_t n_in_ = 0;
  isa_level isa_ = isa_level::scalar;
  size_t bytes_ = 0;
  int64_t stride_ = 0;
  const uint8_t* data_ = nullptr;
  std::unique_ptr<uint8_t, unmap_deleter> owned_;
};

// Throws std::invalid_argument naming the type if unsupported or n_in is not a multiple of the block size
// (also for n_out < 1, n_in < 1 or data == nullptr).
// level picks the kernels used for this weight (normally active_isa()); requires cpu_supports(level).
// Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
// data: n_out * row_bytes(type, n_in) bytes, GGUF layout, rows contiguous.
packed_weight pack_weight(ggml_type type, const void* data, int64_t n_out, int64_t n_in, isa_level level);

// n_mats matrices of one type and shape (a mixture-of-experts layer's 3-D
// tensor), packed side by side into ONE buffer, so that transparent huge pages
// back the experts as they back one big matrix: an expert of Qwen3-30B-A3B is
// under 1 MiB, too small for a 2 MiB page of its own, and streaming it on
// 4 KiB pages costs a TLB miss and a prefetcher stop every 4 KiB.
// Matrix i is (*this)[i], a packed_weight that views the shared buffer; the
// set owns it (bytes() is the whole). Move-only.
// Thread-safety: pack(i) for distinct i may run concurrently; reads after.
class packed_weight_set {
 public:
  packed_weight_set() = default;
  // Throws as pack_weight does for the type and shape; std::bad_alloc when out of memory.
  packed_weight_set(ggml_type type, int64_t n_mats, int64_t n_out, int64_t n_in, isa_level level);
  packed_weight_set(packed_weight_set&&) noexcept = default;
  packed_weight_set& operator=(packed_weight_set&&) noexcept = default;

  // Packs matrix i from data (n_out * row_bytes(type, n_in) bytes, GGUF layout);
  // at the scalar level, matrix i then points at data (which must outlive the set).
  void pack(int64_t i, const void* data);

  const packed_weight& operator[](size_t i) const { return mats_[i]; }
  size_t size() const { return mats_.size(); }
  bool empty() const { return mats_.empty(); }
  auto begin() const { return mats_.begin(); }
  auto end() const { return mats_.end(); }
  size_t bytes() const { return bytes_; }

 private:
  std::unique_ptr<uint8_t, packed_weight::unmap_deleter> owned_;
  std::vector<packed_weight> mats_;
  size_t mat_bytes_ = 0;  // each matrix's packed bytes (its slot in owned_)
  size_t bytes_ = 0;
};

// Activations: x is n_rows rows of n_in floats (row stride ldx floats). They are converted once
// (e.g. quantized to Q8 blocks) into a buffer shared by all threads and by every weight with the same
// activation format (same act_format_id and n_in), e.g. Q/K/V, or gate/up.
//   id 0: f32 rows (F32/F16/BF16 weights); id 1: q8 blocks of 32 (all quantized weights).
// The buffer needs no particular alignment; act_bytes(w, n) is the size for n rows.
int act_format_id(const packed_weight& w);
size_t act_bytes(const packed_weight& w, int64_t n_rows);
// Converts rows [row_begin, row_end) of x into act (row r lands at its own offset in act, so
// disjoint row ranges may be converted by different threads). The bytes produced do not depend
// on the isa_level.
void quantize_act(const packed_weight& w, const float* x, int64_t ldx, int64_t row_begin, int64_t row_end, void* act);

// y[r*ldy + c] = sum_k W[c][k] * x[r][k]  for r in [0,n_rows), c in [col_begin, col_end).
// Thread-splittable by column range; col_begin/col_end are multiples of col_granularity(w), except col_end may equal n_out.
// Only y[r*ldy + c] for c in [col_begin, col_end) are written.
int64_t col_granularity(const packed_weight& w);
// The column-range multiple (of col_granularity) at which matmul of n_rows rows runs fastest:
// 32 where the avx512 kernel tiles two pairs of groups (legacy types, IQ4_NL, MXFP4, Q4_K, Q5_K with
// several rows), else col_granularity(w). Splitting at other multiples gives the same results.
int64_t col_split_multiple(const packed_weight& w, int64_t n_rows);
void matmul(const packed_weight& w, const void* act, int64_t n_rows, float* y, int64_t ldy, int64_t col_begin, int64_t col_end);

}  // namespace spate::kernels
