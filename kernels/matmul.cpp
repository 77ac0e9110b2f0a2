// pack_weight validation and the isa dispatch of the matmul entry points.
#include "kernels/matmul.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/matmul_internal.h"

namespace spate::kernels {

void packed_weight::unmap_deleter::operator()(uint8_t* p) const noexcept { ::munmap(p, len); }

namespace {

constexpr size_t k_page_bytes = 4096, k_huge_page_bytes = size_t{2} << 20;

// A zero-filled buffer of at least `bytes` bytes for repacked weights, as its own anonymous
// mapping: page aligned, and from 2 MiB up aligned to 2 MiB and marked MADV_HUGEPAGE, so
// transparent huge pages back every whole 2 MiB of it (the tail stays on 4 KiB pages: no
// resident bytes beyond the buffer). Decode streams every weight once per token; with 4 KiB
// pages that is a TLB miss every 4 KiB, and the hardware prefetchers stop at each page edge.
// Returns the buffer and sets len to the length to unmap; throws std::bad_alloc.
uint8_t* map_packed(size_t bytes, size_t& len) {
  len = (bytes + k_page_bytes - 1) / k_page_bytes * k_page_bytes;
  if (len < k_huge_page_bytes) {
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<uint8_t*>(p);
  }
  // Over-map by 2 MiB, then unmap the unaligned head and the unused tail.
  const size_t span = len + k_huge_page_bytes;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (base + k_huge_page_bytes - 1) / k_huge_page_bytes * k_huge_page_bytes;
  if (aligned > base) ::munmap(p, aligned - base);
  if (const size_t tail = base + span - (aligned + len); tail > 0) ::munmap(reinterpret_cast<void*>(aligned + len), tail);
  ::madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);  // advice only: 4 KiB pages if refused
  return reinterpret_cast<uint8_t*>(aligned);
}

bool supported(ggml_type t) {
  switch (t) {
    case ggml_type::f32: case ggml_type::f16: case ggml_type::bf16: case ggml_type::q8_0:
    case ggml_type::q4_0: case ggml_type::q4_1: case ggml_type::q5_0: case ggml_type::q5_1: case ggml_type::iq4_nl:
    case ggml_type::mxfp4:
    case ggml_type::q2_k: case ggml_type::q3_k: case ggml_type::q4_k: case ggml_type::q5_k: case ggml_type::q6_k:
      return true;
    default:
      return false;
  }
}

}  // namespace

namespace detail {
bool has_avx512_kernel(ggml_type t) {
  return t == ggml_type::q4_0 || t == ggml_type::q4_1 || t == ggml_type::q5_0 || t == ggml_type::q5_1 ||
         t == ggml_type::q8_0 || t == ggml_type::q2_k || t == ggml_type::q3_k || t == ggml_type::q4_k ||
         t == ggml_type::q5_k || t == ggml_type::q6_k || t == ggml_type::iq4_nl || t == ggml_type::mxfp4;
}
}  // namespace detail

namespace {

// The packed layout's group stride and total size of an n_out x n_in matrix (avx2/avx512).
struct packed_shape {
  detail::group_layout L;
  detail::inline_layout I;
  bool in_blocks;
  int64_t n_groups;
  int64_t stride;
  size_t size;
};

packed_shape packed_shape_of(ggml_type type, int64_t n_out, int64_t n_in) {
  // avx2 and avx512 read the same 8-column groups; a quantized type's records are stored
  // inline, block by block (matmul_internal.h).
  packed_shape p{};
  p.L = detail::layout_of(type, n_in);
  p.n_groups = (n_out + detail::group_cols - 1) / detail::group_cols;
  p.in_blocks = detail::is_quantized(type);
  p.I = p.in_blocks ? detail::inline_of(p.L) : detail::inline_layout{};
  p.stride = p.in_blocks ? p.I.stride : p.L.stride;
  p.size = size_t(p.stride) * size_t(p.n_groups);
  return p;
}

// Repacks a GGUF matrix into buf (shape.size zero-filled bytes).
void repack_into(ggml_type type, const void* data, int64_t n_out, int64_t n_in, const packed_shape& shape, uint8_t* buf) {
  if (shape.in_blocks) {
    std::vector<uint8_t> groups(size_t(shape.L.stride) * size_t(shape.n_groups));
    detail::repack_groups(type, data, n_out, n_in, groups.data());
    detail::write_inline(shape.L, shape.I, groups.data(), shape.n_groups, buf);
  } else {
    detail::repack_groups(type, data, n_out, n_in, buf);
  }
}

}  // namespace

static void validate_pack(ggml_type type, int64_t n_out, int64_t n_in, isa_level level) {
  const std::string name = type_name(static_cast<uint32_t>(type));
  if (!supported(type)) throw std::invalid_argument("pack_weight: unsupported weight type " + name);
  const auto traits = *traits_of(static_cast<uint32_t>(type));
  if (n_in < 1 || n_in % traits.block_elems != 0 || (detail::is_quantized(type) && n_in % 32 != 0))
    throw std::invalid_argument("pack_weight: n_in=" + std::to_string(n_in) + " is not a positive multiple of the " +
                                name + " block size " + std::to_string(traits.block_elems));
  if (n_out < 1) throw std::invalid_argument("pack_weight: n_out must be positive for " + name);
  if (level != isa_level::scalar && level != isa_level::avx2 && level != isa_level::avx512)
    throw std::invalid_argument("pack_weight: unknown isa level for " + name);
  if (!cpu_supports(level))
    throw std::invalid_argument(std::string("pack_weight: ") + isa_name(level) + " kernels requested for " + name +
                                " but the CPU lacks them");
}

packed_weight pack_weight(ggml_type type, const void* data, int64_t n_out, int64_t n_in, isa_level level) {
  validate_pack(type, n_out, n_in, level);
  if (data == nullptr) throw std::invalid_argument(std::string("pack_weight: null data for ") + type_name(static_cast<uint32_t>(type)));
  const auto traits = *traits_of(static_cast<uint32_t>(type));

  packed_weight w;
  w.type_ = type;
  w.n_out_ = n_out;
  w.n_in_ = n_in;
  w.isa_ = level;
  if (level == isa_level::scalar) {
    w.data_ = static_cast<const uint8_t*>(data);
    w.stride_ = row_bytes(traits, n_in);
    w.bytes_ = 0;
    return w;
  }
  const packed_shape shape = packed_shape_of(type, n_out, n_in);
  size_t mapped = 0;
  uint8_t* buf = map_packed(shape.size, mapped);  // zero-filled: padding columns stay zero
  w.owned_ = std::unique_ptr<uint8_t, packed_weight::unmap_deleter>(buf, packed_weight::unmap_deleter{mapped});
  repack_into(type, data, n_out, n_in, shape, buf);
  w.data_ = buf;
  w.stride_ = shape.stride;
  w.bytes_ = shape.size;
  return w;
}

packed_weight_set::packed_weight_set(ggml_type type, int64_t n_mats, int64_t n_out, int64_t n_in, isa_level level) {
  if (n_mats < 1) throw std::invalid_argument("packed_weight_set: n_mats must be positive");
  validate_pack(type, n_out, n_in, level);
  mats_.resize(static_cast<size_t>(n_mats));
  for (auto& m : mats_) {
    m.type_ = type;
    m.n_out_ = n_out;
    m.n_in_ = n_in;
    m.isa_ = level;
  }
  if (level == isa_level::scalar) {
    for (auto& m : mats_) m.stride_ = row_bytes(*traits_of(static_cast<uint32_t>(type)), n_in);
    return;
  }
  const packed_shape shape = packed_shape_of(type, n_out, n_in);
  mat_bytes_ = (shape.size + 63) / 64 * 64;  // each matrix on a cache-line boundary
  size_t mapped = 0;
  uint8_t* buf = map_packed(mat_bytes_ * static_cast<size_t>(n_mats), mapped);
  owned_ = std::unique_ptr<uint8_t, packed_weight::unmap_deleter>(buf, packed_weight::unmap_deleter{mapped});
  bytes_ = mat_bytes_ * static_cast<size_t>(n_mats);
  for (size_t i = 0; i < mats_.size(); ++i) {
    mats_[i].data_ = buf + i * mat_bytes_;
    mats_[i].stride_ = shape.stride;
  }
}

void packed_weight_set::pack(int64_t i, const void* data) {
  packed_weight& m = mats_[static_cast<size_t>(i)];
  if (m.isa_ == isa_level::scalar) {
    m.data_ = static_cast<const uint8_t*>(data);
    return;
  }
  const packed_shape shape = packed_shape_of(m.type_, m.n_out_, m.n_in_);
  repack_into(m.type_, data, m.n_out_, m.n_in_, shape, owned_.get() + static_cast<size_t>(i) * mat_bytes_);
}

int act_format_id(const packed_weight& w) { return detail::is_quantized(w.type()) ? 1 : 0; }

size_t act_bytes(const packed_weight& w, int64_t n_rows) {
  if (n_rows <= 0) return 0;
  if (act_format_id(w) == 1) return size_t(detail::q8_act_row_bytes(w.n_in())) * size_t(n_rows);
  return size_t(w.n_in()) * 4 * size_t(n_rows);
}

void quantize_act(const packed_weight& w, const float* x, int64_t ldx, int64_t row_begin, int64_t row_end, void* act) {
  if (row_end <= row_begin) return;
  if (act_format_id(w) == 0) {
    auto* out = static_cast<float*>(act);
    for (int64_t r = row_begin; r < row_end; ++r)
      std::memcpy(out + r * w.n_in(), x + r * ldx, size_t(w.n_in()) * 4);
    return;
  }
  if (w.isa() == isa_level::avx512)  // the same bytes as the avx2 quantizer, on 16 lanes
    detail::quantize_act_q8_avx512(x, ldx, w.n_in(), row_begin, row_end, act);
  else if (w.isa() == isa_level::avx2)
    detail::quantize_act_q8_avx2(x, ldx, w.n_in(), row_begin, row_end, act);
  else
    detail::quantize_act_q8_ref(x, ldx, w.n_in(), row_begin, row_end, act);
}

int64_t col_granularity(const packed_weight&) { return detail::group_cols; }

int64_t col_split_multiple(const packed_weight& w, int64_t n_rows) {
  const bool two_pairs = w.isa() == isa_level::avx512 && detail::has_avx512_kernel(w.type()) && n_rows > 1 &&
                         detail::avx512_two_pairs(w.type());
  return two_pairs ? 4 * detail::group_cols : detail::group_cols;
}

void matmul(const packed_weight& w, const void* act, int64_t n_rows, float* y, int64_t ldy, int64_t col_begin,
            int64_t col_end) {
  if (n_rows <= 0) return;
  if (col_end > w.n_out()) col_end = w.n_out();
  if (col_begin < 0) col_begin = 0;
  if (col_end <= col_begin) return;
  switch (w.isa()) {
    case isa_level::avx512:
      if (detail::has_avx512_kernel(w.type())) return detail::matmul_avx512(w, act, n_rows, y, ldy, col_begin, col_end);
      return detail::matmul_avx2(w, act, n_rows, y, ldy, col_begin, col_end);  // float types: same layout
    case isa_level::avx2: return detail::matmul_avx2(w, act, n_rows, y, ldy, col_begin, col_end);
    case isa_level::scalar: break;
  }
  detail::matmul_ref(w, act, n_rows, y, ldy, col_begin, col_end);
}

}  // namespace spate::kernels
