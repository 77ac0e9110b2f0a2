#include "model/gguf_file.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/ggml_type.h"
#include "util/regular_file.h"

namespace spate {
namespace {

constexpr uint64_t k_max_kv = 65536;
constexpr uint64_t k_max_tensors = 65536;
constexpr uint64_t k_max_string_bytes = 16ull << 20;
constexpr uint64_t k_max_array_elems = 16ull << 20;
constexpr uint32_t k_max_dims = 4;

std::string fmt_err(const std::string& label, const std::string& what) {
  return "invalid GGUF file '" + label + "': " + what;
}

// Bounds-checked little-endian cursor over the file image.
class cursor {
 public:
  cursor(const uint8_t* base, size_t size, const std::string& label) : base_(base), size_(size), label_(label) {}

  size_t pos() const { return pos_; }

  void need(uint64_t n, const char* what) const {
    if (n > size_ - pos_) {
      throw gguf_error(fmt_err(label_, std::string("truncated while reading ") + what + " at byte " +
                                           std::to_string(pos_) + " (need " + std::to_string(n) +
                                           " bytes, file has " + std::to_string(size_ - pos_) + " left)"));
    }
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    if (n > k_max_string_bytes) {
      throw gguf_error(fmt_err(label_, std::string(what) + " length " + std::to_string(n) + " exceeds the limit of " +
                                           std::to_string(k_max_string_bytes) + " bytes"));
    }
    need(n, what);
    std::string s(reinterpret_cast<const char*>(base_ + pos_), n);
    pos_ += n;
    return s;
  }
  void skip(uint64_t n, const char* what) {
    need(n, what);
    pos_ += n;
  }

 private:
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& label_;
};

size_t scalar_size(gguf_value_type t) {
  switch (t) {
    case gguf_value_type::u8: case gguf_value_type::i8: case gguf_value_type::boolean: return 1;
    case gguf_value_type::u16: case gguf_value_type::i16: return 2;
    case gguf_value_type::u32: case gguf_value_type::i32: case gguf_value_type::f32: return 4;
    case gguf_value_type::u64: case gguf_value_type::i64: case gguf_value_type::f64: return 8;
    default: return 0;
  }
}

bool valid_type(uint32_t t) { return t <= 12; }

// Reads one scalar of type t into v (int_/uint_/float_).
void read_scalar(cursor& c, gguf_value_type t, gguf_value& v, const char* what) {
  switch (t) {
    case gguf_value_type::u8: v.uint_ = c.read<uint8_t>(what); break;
    case gguf_value_type::i8: v.int_ = c.read<int8_t>(what); break;
    case gguf_value_type::u16: v.uint_ = c.read<uint16_t>(what); break;
    case gguf_value_type::i16: v.int_ = c.read<int16_t>(what); break;
    case gguf_value_type::u32: v.uint_ = c.read<uint32_t>(what); break;
    case gguf_value_type::i32: v.int_ = c.read<int32_t>(what); break;
    case gguf_value_type::u64: v.uint_ = c.read<uint64_t>(what); break;
    case gguf_value_type::i64: v.int_ = c.read<int64_t>(what); break;
    case gguf_value_type::f32: v.float_ = c.read<float>(what); break;
    case gguf_value_type::f64: v.float_ = c.read<double>(what); break;
    case gguf_value_type::boolean: {
      const uint8_t b = c.read<uint8_t>(what);
      v.int_ = b != 0;
      break;
    }
    default: break;
  }
}

double scalar_as_double(const gguf_value& v) {
  switch (v.type) {
    case gguf_value_type::u8: case gguf_value_type::u16: case gguf_value_type::u32: case gguf_value_type::u64:
      return static_cast<double>(v.uint_);
    case gguf_value_type::f32: case gguf_value_type::f64: return v.float_;
    default: return static_cast<double>(v.int_);
  }
}

}  // namespace

const char* gguf_value_type_name(gguf_value_type t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "invalid";
}

bool gguf_value::is_integer() const {
  switch (type) {
    case gguf_value_type::u8: case gguf_value_type::i8: case gguf_value_type::u16: case gguf_value_type::i16:
    case gguf_value_type::u32: case gguf_value_type::i32: case gguf_value_type::u64: case gguf_value_type::i64:
      return true;
    default: return false;
  }
}

bool gguf_value::is_number() const {
  return is_integer() || type == gguf_value_type::f32 || type == gguf_value_type::f64;
}

int64_t gguf_tensor_info::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::unique_ptr<gguf_file> gguf_file::open(const std::string& path) {
  regular_file rf = open_regular_file(path);  // never blocks on a FIFO or a device
  if (!rf.fd) {
    if (rf.error_errno != 0) throw gguf_error("cannot open model file '" + path + "': " + rf.error);
    throw gguf_error("model path '" + path + "' is not a regular file (" + file_kind_name(rf.mode) + ")");
  }
  const int fd = rf.fd.release();
  const size_t size = static_cast<size_t>(rf.size);
  if (size < 24) {
    ::close(fd);
    throw gguf_error(fmt_err(path, "file is " + std::to_string(size) + " bytes, too small for a GGUF header"));
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int e = errno;
  ::close(fd);
  if (map == MAP_FAILED) {
    throw gguf_error("cannot mmap model file '" + path + "': " + std::strerror(e));
  }
  std::unique_ptr<gguf_file> f(new gguf_file());
  f->label_ = path;
  f->page_bytes_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  f->base_ = static_cast<const uint8_t*>(map);
  f->size_ = size;
  f->map_ = map;
  f->parse_all();
  return f;
}

std::unique_ptr<gguf_file> gguf_file::parse(const uint8_t* data, size_t size, std::string label) {
  std::unique_ptr<gguf_file> f(new gguf_file());
  f->label_ = std::move(label);
  f->base_ = data;
  f->size_ = size;
  f->parse_all();
  return f;
}

gguf_file::~gguf_file() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

void gguf_file::parse_all() {
  cursor c(base_, size_, label_);
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != 0x46554747u) {  // "GGUF" little-endian
    throw gguf_error(fmt_err(label_, "bad magic (not a GGUF file)"));
  }
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    throw gguf_error(fmt_err(label_, "unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)"));
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  if (n_tensors > k_max_tensors) {
    throw gguf_error(fmt_err(label_, "tensor count " + std::to_string(n_tensors) + " exceeds the limit of " + std::to_string(k_max_tensors)));
  }
  if (n_kv > k_max_kv) {
    throw gguf_error(fmt_err(label_, "metadata count " + std::to_string(n_kv) + " exceeds the limit of " + std::to_string(k_max_kv)));
  }

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key");
    const uint32_t raw_type = c.read<uint32_t>("metadata value type");
    if (!valid_type(raw_type)) {
      throw gguf_error(fmt_err(label_, "metadata '" + key + "' has invalid value type " + std::to_string(raw_type)));
    }
    gguf_value v;
    v.type = static_cast<gguf_value_type>(raw_type);
    if (v.type == gguf_value_type::string) {
      v.str_ = c.read_string("metadata string value");
    } else if (v.type == gguf_value_type::array) {
      const uint32_t raw_elem = c.read<uint32_t>("array element type");
      if (!valid_type(raw_elem) || raw_elem == static_cast<uint32_t>(gguf_value_type::array)) {
        throw gguf_error(fmt_err(label_, "metadata '" + key + "' has invalid array element type " + std::to_string(raw_elem)));
      }
      v.elem_type = static_cast<gguf_value_type>(raw_elem);
      v.n_elems_ = c.read<uint64_t>("array length");
      if (v.n_elems_ > k_max_array_elems) {
        throw gguf_error(fmt_err(label_, "metadata '" + key + "' array length " + std::to_string(v.n_elems_) +
                                             " exceeds the limit of " + std::to_string(k_max_array_elems)));
      }
      if (v.elem_type == gguf_value_type::string) {
        // Each string needs at least its 8-byte length: reject impossible counts before reserving.
        c.need(v.n_elems_ * 8, "string array");
        v.strs_.reserve(v.n_elems_);
        for (uint64_t j = 0; j < v.n_elems_; ++j) v.strs_.push_back(c.read_string("array string"));
      } else {
        const size_t es = scalar_size(v.elem_type);
        c.need(v.n_elems_ * es, "numeric array");
        v.nums_.reserve(v.n_elems_);
        for (uint64_t j = 0; j < v.n_elems_; ++j) {
          gguf_value e;
          e.type = v.elem_type;
          read_scalar(c, v.elem_type, e, "array element");
          v.nums_.push_back(scalar_as_double(e));
        }
      }
    } else {
      read_scalar(c, v.type, v, "metadata scalar value");
    }
    if (!kv_.emplace(key, std::move(v)).second) {
      throw gguf_error(fmt_err(label_, "duplicate metadata key '" + key + "'"));
    }
  }

  if (const gguf_value* a = find("general.alignment")) {
    if (!a->is_integer()) throw gguf_error(fmt_err(label_, "general.alignment is not an integer"));
    const uint64_t al = a->uint_ != 0 ? a->uint_ : static_cast<uint64_t>(a->int_);
    if (al == 0 || al > 65536 || (al & (al - 1)) != 0) {
      throw gguf_error(fmt_err(label_, "general.alignment " + std::to_string(al) + " is not a power of two in [1, 65536]"));
    }
    alignment_ = al;
  }

  // Each tensor info takes at least 33 bytes (name length + 1 byte, n_dims, one dim, type, offset):
  // reject counts the file cannot hold before reserving.
  c.need(n_tensors * 33, "tensor infos");
  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    gguf_tensor_info t;
    t.name = c.read_string("tensor name");
    if (t.name.empty() || t.name.size() > 256) {
      throw gguf_error(fmt_err(label_, "tensor #" + std::to_string(i) + " has an invalid name length " + std::to_string(t.name.size())));
    }
    const uint32_t n_dims = c.read<uint32_t>("tensor dimension count");
    if (n_dims == 0 || n_dims > k_max_dims) {
      throw gguf_error(fmt_err(label_, "tensor '" + t.name + "' has " + std::to_string(n_dims) + " dimensions (allowed 1..4)"));
    }
    int64_t n_elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>("tensor dimension");
      if (ne == 0 || ne > (1ull << 40)) {
        throw gguf_error(fmt_err(label_, "tensor '" + t.name + "' has an invalid dimension " + std::to_string(ne)));
      }
      if (static_cast<uint64_t>(n_elems) > (1ull << 42) / ne) {
        throw gguf_error(fmt_err(label_, "tensor '" + t.name + "' has too many elements"));
      }
      n_elems *= static_cast<int64_t>(ne);
      t.dims.push_back(static_cast<int64_t>(ne));
    }
    t.type = c.read<uint32_t>("tensor type");
    t.offset = c.read<uint64_t>("tensor offset");
    const auto tr = kernels::traits_of(t.type);
    if (!tr) {
      throw gguf_error(fmt_err(label_, "tensor '" + t.name + "' has unknown type id " + std::to_string(t.type)));
    }
    if (t.dims[0] % tr->block_elems != 0) {
      throw gguf_error(fmt_err(label_, "tensor '" + t.name + "' row length " + std::to_string(t.dims[0]) +
                                           " is not a multiple of the " + tr->name + " block size " + std::to_string(tr->block_elems)));
    }
    t.n_bytes = static_cast<uint64_t>(n_elems / tr->block_elems) * static_cast<uint64_t>(tr->block_bytes);
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
      throw gguf_error(fmt_err(label_, "duplicate tensor name '" + t.name + "'"));
    }
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (data_start > size_ && n_tensors > 0) {
    throw gguf_error(fmt_err(label_, "truncated: the tensor data section starts at byte " + std::to_string(data_start) +
                                         " but the file has " + std::to_string(size_) + " bytes"));
  }
  const uint64_t data_bytes = data_start <= size_ ? size_ - data_start : 0;
  for (auto& t : tensors_) {
    if (t.offset % alignment_ != 0) {
      throw gguf_error(fmt_err(label_, "tensor '" + t.name + "' offset " + std::to_string(t.offset) +
                                           " is not aligned to " + std::to_string(alignment_)));
    }
    if (t.offset > data_bytes || t.n_bytes > data_bytes - t.offset) {
      throw gguf_error(fmt_err(label_, "tensor '" + t.name + "' data [" + std::to_string(t.offset) + ", " +
                                           std::to_string(t.offset + t.n_bytes) + ") lies outside the file's data section of " +
                                           std::to_string(data_bytes) + " bytes (truncated file?)"));
    }
    t.data = base_ + data_start + t.offset;
  }
}

const gguf_value* gguf_file::find(std::string_view key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::optional<std::string> gguf_file::get_string(std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != gguf_value_type::string) {
    throw gguf_error(fmt_err(label_, "metadata '" + std::string(key) + "' should be a string, found " + gguf_value_type_name(v->type)));
  }
  return v->str_;
}

std::optional<int64_t> gguf_file::get_int(std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer()) {
    throw gguf_error(fmt_err(label_, "metadata '" + std::string(key) + "' should be an integer, found " + gguf_value_type_name(v->type)));
  }
  switch (v->type) {
    case gguf_value_type::u8: case gguf_value_type::u16: case gguf_value_type::u32: case gguf_value_type::u64:
      if (v->uint_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw gguf_error(fmt_err(label_, "metadata '" + std::string(key) + "' is out of range"));
      }
      return static_cast<int64_t>(v->uint_);
    default: return v->int_;
  }
}

std::optional<uint32_t> gguf_file::get_u32(std::string_view key) const {
  auto i = get_int(key);
  if (!i) return std::nullopt;
  if (*i < 0 || *i > static_cast<int64_t>(std::numeric_limits<uint32_t>::max())) {
    throw gguf_error(fmt_err(label_, "metadata '" + std::string(key) + "' value " + std::to_string(*i) + " is out of range"));
  }
  return static_cast<uint32_t>(*i);
}

std::optional<double> gguf_file::get_float(std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) {
    throw gguf_error(fmt_err(label_, "metadata '" + std::string(key) + "' should be a number, found " + gguf_value_type_name(v->type)));
  }
  const double d = scalar_as_double(*v);
  if (!std::isfinite(d)) throw gguf_error(fmt_err(label_, "metadata '" + std::string(key) + "' is not finite"));
  return d;
}

std::optional<bool> gguf_file::get_bool(std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != gguf_value_type::boolean) {
    throw gguf_error(fmt_err(label_, "metadata '" + std::string(key) + "' should be a bool, found " + gguf_value_type_name(v->type)));
  }
  return v->int_ != 0;
}

const std::vector<std::string>* gguf_file::get_string_array(std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return nullptr;
  if (v->type != gguf_value_type::array || v->elem_type != gguf_value_type::string) {
    throw gguf_error(fmt_err(label_, "metadata '" + std::string(key) + "' should be an array of strings"));
  }
  return &v->strs_;
}

std::optional<std::vector<double>> gguf_file::get_number_array(std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != gguf_value_type::array || v->elem_type == gguf_value_type::string) {
    throw gguf_error(fmt_err(label_, "metadata '" + std::string(key) + "' should be a numeric array"));
  }
  return v->nums_;
}

const gguf_tensor_info* gguf_file::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void gguf_file::release_pages(const uint8_t* p, size_t n) const {
  if (!map_ || n == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + page_bytes_ - 1) / page_bytes_ * page_bytes_;
  const uintptr_t last = (begin + n) / page_bytes_ * page_bytes_;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void gguf_file::prefetch_pages(const uint8_t* p, size_t n) const {
  if (!map_ || n == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(p) / page_bytes_ * page_bytes_;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

}  // namespace spate
