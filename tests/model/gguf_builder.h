// In-memory GGUF writer for tests: builds v2/v3 images with metadata and
// tensors, and lets a test corrupt any field (counts, types, offsets, dims) to
// exercise the reader's validation.
//
// Layout written (little-endian), matching model/gguf_file.h:
//   magic, version, n_tensors (u64), n_kv (u64), kv pairs, tensor infos,
//   zero padding to `alignment`, then each tensor's data at its offset.
// Tensor data is placed in order, each blob starting at a multiple of
// `alignment` relative to the data section; there is no padding after the
// last blob, so the image ends exactly where the last tensor's data ends
// (every strict prefix of an image with tensors is therefore invalid).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spate::testing {

// Append-only little-endian byte writer.
class byte_writer {
 public:
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void i32(int32_t v) { raw(&v, sizeof v); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void i64(int64_t v) { raw(&v, sizeof v); }
  void f32(float v) { raw(&v, sizeof v); }
  void f64(double v) { raw(&v, sizeof v); }
  // GGUF string: u64 length then the bytes (no terminator).
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  void pad_to(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// GGUF metadata value type ids (model/gguf_file.h gguf_value_type).
enum gguf_t : uint32_t {
  t_u8 = 0, t_i8 = 1, t_u16 = 2, t_i16 = 3, t_u32 = 4, t_i32 = 5, t_f32 = 6, t_bool = 7,
  t_string = 8, t_array = 9, t_u64 = 10, t_i64 = 11, t_f64 = 12,
};

// GGML tensor type ids used by the tests.
enum ggml_t : uint32_t {
  g_f32 = 0, g_f16 = 1, g_q4_0 = 2, g_q4_1 = 3, g_q8_0 = 8, g_q2_k = 10, g_iq4_xs = 23, g_mxfp4 = 39
};

struct tensor_spec {
  std::string name;
  std::vector<uint64_t> dims;          // ne[0] first
  uint32_t type = g_f32;
  std::vector<uint8_t> data;           // placed in the data section
  std::optional<uint64_t> offset;      // overrides the computed offset
};

class gguf_builder {
 public:
  explicit gguf_builder(uint32_t version = 3) : version_(version) {}

  // Header overrides for corruption tests.
  gguf_builder& magic(uint32_t m) { magic_ = m; return *this; }
  gguf_builder& version(uint32_t v) { version_ = v; return *this; }
  gguf_builder& n_kv_override(uint64_t n) { n_kv_ = n; return *this; }
  gguf_builder& n_tensors_override(uint64_t n) { n_tensors_ = n; return *this; }
  // Layout alignment only; add a "general.alignment" key separately when it is not 32.
  gguf_builder& layout_alignment(size_t a) { alignment_ = a; return *this; }

  // Metadata. Each adds one entry in order; duplicates are written as given.
  gguf_builder& kv_u8(const std::string& k, uint8_t v) { return scalar(k, t_u8, &v, 1); }
  gguf_builder& kv_i8(const std::string& k, int8_t v) { return scalar(k, t_i8, &v, 1); }
  gguf_builder& kv_u16(const std::string& k, uint16_t v) { return scalar(k, t_u16, &v, 2); }
  gguf_builder& kv_i16(const std::string& k, int16_t v) { return scalar(k, t_i16, &v, 2); }
  gguf_builder& kv_u32(const std::string& k, uint32_t v) { return scalar(k, t_u32, &v, 4); }
  gguf_builder& kv_i32(const std::string& k, int32_t v) { return scalar(k, t_i32, &v, 4); }
  gguf_builder& kv_f32(const std::string& k, float v) { return scalar(k, t_f32, &v, 4); }
  gguf_builder& kv_bool(const std::string& k, bool v) { uint8_t b = v; return scalar(k, t_bool, &b, 1); }
  gguf_builder& kv_u64(const std::string& k, uint64_t v) { return scalar(k, t_u64, &v, 8); }
  gguf_builder& kv_i64(const std::string& k, int64_t v) { return scalar(k, t_i64, &v, 8); }
  gguf_builder& kv_f64(const std::string& k, double v) { return scalar(k, t_f64, &v, 8); }
  gguf_builder& kv_string(const std::string& k, const std::string& v) {
    byte_writer w;
    w.str(k);
    w.u32(t_string);
    w.str(v);
    return kv_raw(k, std::move(w));
  }
  gguf_builder& kv_string_array(const std::string& k, const std::vector<std::string>& v) {
    byte_writer w;
    w.str(k);
    w.u32(t_array);
    w.u32(t_string);
    w.u64(v.size());
    for (const auto& s : v) w.str(s);
    return kv_raw(k, std::move(w));
  }
  gguf_builder& kv_i32_array(const std::string& k, const std::vector<int32_t>& v) {
    byte_writer w;
    w.str(k);
    w.u32(t_array);
    w.u32(t_i32);
    w.u64(v.size());
    for (int32_t x : v) w.i32(x);
    return kv_raw(k, std::move(w));
  }
  gguf_builder& kv_f32_array(const std::string& k, const std::vector<float>& v) {
    byte_writer w;
    w.str(k);
    w.u32(t_array);
    w.u32(t_f32);
    w.u64(v.size());
    for (float x : v) w.f32(x);
    return kv_raw(k, std::move(w));
  }
  // A fully serialized entry (key, type, value) written verbatim; `key` is only for erase_kv().
  gguf_builder& kv_raw(const std::string& key, byte_writer entry) {
    kvs_.emplace_back(key, std::move(entry.bytes()));
    return *this;
  }
  gguf_builder& erase_kv(const std::string& key) {
    std::erase_if(kvs_, [&](const auto& e) { return e.first == key; });
    return *this;
  }

  gguf_builder& tensor(tensor_spec t) {
    tensors_.push_back(std::move(t));
    return *this;
  }
  // An F32 tensor filled with a small deterministic pattern.
  gguf_builder& tensor_f32(const std::string& name, std::vector<uint64_t> dims, float scale = 0.02f) {
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    tensor_spec t{name, std::move(dims), g_f32, std::vector<uint8_t>(n * 4), std::nullopt};
    for (uint64_t i = 0; i < n; ++i) {
      const float v = scale * static_cast<float>(static_cast<int>((i * 7919 + name.size() * 31) % 17) - 8);
      std::memcpy(t.data.data() + i * 4, &v, 4);
    }
    return tensor(std::move(t));
  }
  tensor_spec* find_tensor(const std::string& name) {
    for (auto& t : tensors_) if (t.name == name) return &t;
    return nullptr;
  }
  gguf_builder& erase_tensor(const std::string& name) {
    std::erase_if(tensors_, [&](const tensor_spec& t) { return t.name == name; });
    return *this;
  }

  std::vector<uint8_t> build() const {
    byte_writer w;
    w.u32(magic_);
    w.u32(version_);
    w.u64(n_tensors_.value_or(tensors_.size()));
    w.u64(n_kv_.value_or(kvs_.size()));
    for (const auto& kv : kvs_) w.raw(kv.second.data(), kv.second.size());
    std::vector<uint64_t> offsets;
    uint64_t off = 0;
    for (const auto& t : tensors_) {
      offsets.push_back(off);
      off += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      w.str(t.name);
      w.u32(static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) w.u64(d);
      w.u32(t.type);
      w.u64(t.offset.value_or(offsets[i]));
    }
    if (!tensors_.empty()) w.pad_to(alignment_);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (i > 0) w.pad_to(alignment_);
      w.raw(tensors_[i].data.data(), tensors_[i].data.size());
    }
    return w.bytes();
  }

 private:
  gguf_builder& scalar(const std::string& k, uint32_t type, const void* v, size_t n) {
    byte_writer w;
    w.str(k);
    w.u32(type);
    w.raw(v, n);
    return kv_raw(k, std::move(w));
  }

  uint32_t magic_ = 0x46554747u;  // "GGUF"
  uint32_t version_;
  std::optional<uint64_t> n_kv_;
  std::optional<uint64_t> n_tensors_;
  size_t alignment_ = 32;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> kvs_;
  std::vector<tensor_spec> tensors_;
};

// Hyper-parameters of a tiny llama model that read_model_config and
// load_model_weights accept (all tensors F32, untied output unless tied).
struct tiny_llama_params {
  std::string arch = "llama";
  uint32_t n_embd = 32;
  uint32_t n_ff = 64;
  uint32_t n_head = 4;
  uint32_t n_head_kv = 2;
  uint32_t n_layer = 1;
  uint32_t n_vocab = 8;
  uint32_t n_ctx = 128;
  bool tied_output = true;
};

inline gguf_builder tiny_llama(const tiny_llama_params& p = {}, uint32_t version = 3) {
  gguf_builder b(version);
  const std::string a = p.arch + ".";
  b.kv_string("general.architecture", p.arch)
      .kv_string("general.name", "tiny")
      .kv_u32(a + "block_count", p.n_layer)
      .kv_u32(a + "context_length", p.n_ctx)
      .kv_u32(a + "embedding_length", p.n_embd)
      .kv_u32(a + "feed_forward_length", p.n_ff)
      .kv_u32(a + "attention.head_count", p.n_head)
      .kv_u32(a + "attention.head_count_kv", p.n_head_kv)
      .kv_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f)
      .kv_f32(a + "rope.freq_base", 10000.0f);
  std::vector<std::string> toks;
  for (uint32_t i = 0; i < p.n_vocab; ++i) toks.push_back("t" + std::to_string(i));
  b.kv_string("tokenizer.ggml.model", "llama").kv_string_array("tokenizer.ggml.tokens", toks);
  const uint64_t e = p.n_embd, f = p.n_ff, hd = p.n_embd / p.n_head, kv = hd * p.n_head_kv;
  b.tensor_f32("token_embd.weight", {e, p.n_vocab});
  for (uint32_t l = 0; l < p.n_layer; ++l) {
    const std::string pre = "blk." + std::to_string(l) + ".";
    b.tensor_f32(pre + "attn_norm.weight", {e}, 0.1f)
        .tensor_f32(pre + "attn_q.weight", {e, e})
        .tensor_f32(pre + "attn_k.weight", {e, kv})
        .tensor_f32(pre + "attn_v.weight", {e, kv})
        .tensor_f32(pre + "attn_output.weight", {e, e})
        .tensor_f32(pre + "ffn_norm.weight", {e}, 0.1f)
        .tensor_f32(pre + "ffn_gate.weight", {e, f})
        .tensor_f32(pre + "ffn_up.weight", {e, f})
        .tensor_f32(pre + "ffn_down.weight", {f, e});
  }
  b.tensor_f32("output_norm.weight", {e}, 0.1f);
  if (!p.tied_output) b.tensor_f32("output.weight", {e, p.n_vocab});
  return b;
}

}  // namespace spate::testing
