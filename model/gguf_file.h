// GGUF v2/v3 reader: parses the header, metadata and tensor infos of a model
// file and maps the tensor data with mmap.
//
// Validation is strict and every read is bounds-checked against the file size,
// so a truncated or hostile file yields a gguf_error naming what is wrong and
// never an out-of-bounds read. Limits (documented interface):
//   - metadata entries     <= 65536          - tensor count     <= 65536
//   - string length        <= 16 MiB         - tensor dims      1..4, each >= 1
//   - array length         <= 16M elements   - nested arrays    not allowed
//   - alignment            power of two in [1, 65536] (general.alignment, default 32)
//   - tensor offset        multiple of the alignment; offset + size inside the file
//
// Thread-safety: immutable after open(); all const members are safe to call
// concurrently. The mapping lives as long as the gguf_file object.
//
// File layout (little-endian):
//   +-------+---------+----------+-------+-------------------+------------------+-----+-----------+
//   | magic | version | n_tensor | n_kv  | kv pairs ...      | tensor infos ... | pad | data ...  |
//   | GGUF  | u32     | u64      | u64   | key,type,value    | name,dims,type,  |     | (aligned) |
//   |       |         | (u32 v1) |       |                   | offset           |     |           |
//   +-------+---------+----------+-------+-------------------+------------------+-----+-----------+
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace spate {

class gguf_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class gguf_value_type : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

const char* gguf_value_type_name(gguf_value_type t);

// One metadata value. Scalars are widened into int_/uint_/float_; strings and
// string arrays are copied; numeric arrays are decoded into the vectors below.
struct gguf_value {
  gguf_value_type type = gguf_value_type::u8;
  gguf_value_type elem_type = gguf_value_type::u8;  // for arrays
  int64_t int_ = 0;       // signed integer types, bool
  uint64_t uint_ = 0;     // unsigned integer types
  double float_ = 0.0;    // f32 / f64
  std::string str_;
  uint64_t n_elems_ = 0;  // arrays
  std::vector<std::string> strs_;   // array of string
  std::vector<double> nums_;        // array of numbers (ints as exact doubles up to 2^53)
  bool is_integer() const;
  bool is_number() const;
};

struct gguf_tensor_info {
  std::string name;
  uint32_t type = 0;             // raw GGML type id (see kernels/ggml_type.h)
  std::vector<int64_t> dims;     // ne[0] is the contiguous (innermost) dimension
  uint64_t offset = 0;           // relative to the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr; // inside the mapping
  int64_t n_elements() const;
};

class gguf_file {
 public:
  // Opens and validates; throws gguf_error with the path and the problem.
  static std::unique_ptr<gguf_file> open(const std::string& path);
  // Parses an in-memory image (tests). The buffer must outlive the object.
  static std::unique_ptr<gguf_file> parse(const uint8_t* data, size_t size, std::string label);
  ~gguf_file();
  gguf_file(const gguf_file&) = delete;
  gguf_file& operator=(const gguf_file&) = delete;

  uint32_t version() const { return version_; }
  const std::string& path() const { return label_; }
  size_t file_bytes() const { return size_; }
  uint64_t alignment() const { return alignment_; }

  const gguf_value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Typed getters: nullopt when absent; gguf_error when present with the wrong type or out of range.
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;  // any integer type
  std::optional<uint32_t> get_u32(std::string_view key) const; // any integer type in [0, 2^32)
  std::optional<double> get_float(std::string_view key) const; // f32/f64 or integer
  std::optional<bool> get_bool(std::string_view key) const;
  const std::vector<std::string>* get_string_array(std::string_view key) const;
  std::optional<std::vector<double>> get_number_array(std::string_view key) const;
  const std::map<std::string, gguf_value, std::less<>>& metadata() const { return kv_; }

  const std::vector<gguf_tensor_info>& tensors() const { return tensors_; }
  const gguf_tensor_info* find_tensor(std::string_view name) const;

  // Drops the mapped pages that lie wholly inside [p, p + n) from the
  // process's resident set (MADV_DONTNEED on the read-only file mapping: the
  // page cache keeps them; a later read faults them back in, unchanged). For
  // tensor data that was copied (repacked, converted) and is no longer read.
  // No-op for a parsed in-memory image.
  void release_pages(const uint8_t* p, size_t n) const;

  // Asks the kernel to start reading [p, p + n) of the file ahead of use
  // (MADV_WILLNEED: asynchronous readahead, no blocking). For tensor data about
  // to be copied, so that disk reads overlap the copying. No-op for an image.
  void prefetch_pages(const uint8_t* p, size_t n) const;

 private:
  gguf_file() = default;
  void parse_all();

  std::string label_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // non-null when we own an mmap
  size_t page_bytes_ = 4096;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, gguf_value, std::less<>> kv_;
  std::vector<gguf_tensor_info> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace spate
