// Validation tests for the GGUF reader, the hyper-parameter reader and the
// weight binder, on small images built in memory by tests/model/gguf_builder.h.
//
// Contract under test (model/gguf_file.h): any malformed, truncated or
// hostile input makes gguf_file::parse / read_model_config /
// load_model_weights throw gguf_error with a message naming the problem;
// never a crash, an out-of-bounds read or a huge allocation. No real weights
// are needed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "kernels/isa.h"
#include "gguf_builder.h"

namespace spate {
namespace {

using testing::byte_writer;
using testing::gguf_builder;
using testing::tensor_spec;
using testing::tiny_llama;
using testing::tiny_llama_params;

// Parses a copy of `img` in an exact-size heap buffer, so that any read past the
// end is an out-of-bounds access that AddressSanitizer reports.
std::unique_ptr<gguf_file> parse_copy(const std::vector<uint8_t>& img, size_t n, std::vector<uint8_t>& keep) {
  keep.assign(img.begin(), img.begin() + static_cast<std::ptrdiff_t>(n));
  keep.shrink_to_fit();
  return gguf_file::parse(keep.data(), keep.size(), "test.gguf");
}

// Runs parse on img and returns the gguf_error message; fails the test if parse succeeds
// or throws anything else.
std::string parse_error(const std::vector<uint8_t>& img) {
  std::vector<uint8_t> keep;
  try {
    parse_copy(img, img.size(), keep);
  } catch (const gguf_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected gguf_error, got std::exception: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected gguf_error, parse succeeded";
  return "";
}

// Substring assertion that evaluates its arguments once.
::testing::AssertionResult contains(const std::string& haystack, const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "message: " << haystack << "\nexpected to contain: " << needle;
}
#define EXPECT_HAS(haystack, needle) EXPECT_TRUE(contains((haystack), (needle)))

// A small valid image with one key of every scalar type, string and numeric
// arrays, and two tensors (F32 and Q8_0).
gguf_builder mixed_image(uint32_t version) {
  gguf_builder b(version);
  b.kv_u8("a.u8", 200).kv_i8("a.i8", -5).kv_u16("a.u16", 60000).kv_i16("a.i16", -300)
      .kv_u32("a.u32", 4000000000u).kv_i32("a.i32", -7).kv_f32("a.f32", 0.5f).kv_bool("a.bool", true)
      .kv_u64("a.u64", 1ull << 40).kv_i64("a.i64", -(1ll << 40)).kv_f64("a.f64", 2.25)
      .kv_string("a.str", "hello").kv_string_array("a.strs", {"x", "", "yz"}).kv_i32_array("a.ints", {1, -2, 3})
      .kv_f32_array("a.floats", {0.5f, 1.5f});
  b.tensor_f32("t.f32", {4, 2});
  b.tensor(tensor_spec{"t.q8", {32, 2}, testing::g_q8_0, std::vector<uint8_t>(2 * 34, 1), std::nullopt});
  return b;
}

// A header-only image prefix: magic, version, counts.
byte_writer header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
  byte_writer w;
  w.u32(0x46554747u);
  w.u32(version);
  w.u64(n_tensors);
  w.u64(n_kv);
  return w;
}

// ---------------------------------------------------------------- valid files

class gguf_valid : public ::testing::TestWithParam<uint32_t> {};

TEST_P(gguf_valid, parses_every_value_type_and_tensor) {
  const auto img = mixed_image(GetParam()).build();
  std::vector<uint8_t> keep;
  auto f = parse_copy(img, img.size(), keep);
  EXPECT_EQ(f->version(), GetParam());
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->metadata().size(), 15u);
  EXPECT_EQ(f->get_int("a.u8"), 200);
  EXPECT_EQ(f->get_int("a.i8"), -5);
  EXPECT_EQ(f->get_int("a.u16"), 60000);
  EXPECT_EQ(f->get_int("a.i16"), -300);
  EXPECT_EQ(f->get_u32("a.u32"), 4000000000u);
  EXPECT_EQ(f->get_int("a.i32"), -7);
  EXPECT_EQ(f->get_float("a.f32"), 0.5);
  EXPECT_EQ(f->get_bool("a.bool"), true);
  EXPECT_EQ(f->get_int("a.u64"), 1ll << 40);
  EXPECT_EQ(f->get_int("a.i64"), -(1ll << 40));
  EXPECT_EQ(f->get_float("a.f64"), 2.25);
  EXPECT_EQ(f->get_string("a.str"), "hello");
  ASSERT_NE(f->get_string_array("a.strs"), nullptr);
  EXPECT_EQ(*f->get_string_array("a.strs"), (std::vector<std::string>{"x", "", "yz"}));
  EXPECT_EQ(f->get_number_array("a.ints"), (std::vector<double>{1, -2, 3}));
  EXPECT_EQ(f->get_number_array("a.floats"), (std::vector<double>{0.5, 1.5}));
  EXPECT_FALSE(f->get_int("absent").has_value());

  ASSERT_EQ(f->tensors().size(), 2u);
  const auto* t = f->find_tensor("t.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dims, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(t->n_elements(), 8);
  EXPECT_EQ(t->n_bytes, 32u);
  EXPECT_EQ(t->offset, 0u);
  const auto* q = f->find_tensor("t.q8");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->n_bytes, 68u);
  EXPECT_EQ(q->offset, 32u);
  EXPECT_EQ(q->data + q->n_bytes, keep.data() + keep.size());  // no trailing padding: ends at the file end
  EXPECT_EQ((t->data - keep.data()) % 32, 0);
}

TEST_P(gguf_valid, metadata_only_file_parses) {
  gguf_builder b(GetParam());
  b.kv_string("general.architecture", "llama");
  const auto img = b.build();
  std::vector<uint8_t> keep;
  auto f = parse_copy(img, img.size(), keep);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
}

TEST_P(gguf_valid, custom_alignment_is_honoured) {
  gguf_builder b(GetParam());
  b.kv_u32("general.alignment", 64).layout_alignment(64);
  b.tensor_f32("a", {3}).tensor_f32("b", {5});
  const auto img = b.build();
  std::vector<uint8_t> keep;
  auto f = parse_copy(img, img.size(), keep);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->find_tensor("b")->offset, 64u);
  EXPECT_EQ((f->find_tensor("a")->data - keep.data()) % 64, 0);
}

INSTANTIATE_TEST_SUITE_P(versions, gguf_valid, ::testing::Values(2u, 3u));

TEST(gguf_file_getters, wrong_type_is_named) {
  const auto img = mixed_image(3).build();
  std::vector<uint8_t> keep;
  auto f = parse_copy(img, img.size(), keep);
  try {
    f->get_string("a.u32");
    FAIL() << "no throw";
  } catch (const gguf_error& e) {
    EXPECT_HAS(e.what(), "'a.u32' should be a string, found u32");
  }
  EXPECT_THROW(f->get_int("a.str"), gguf_error);
  EXPECT_THROW(f->get_u32("a.i32"), gguf_error);  // negative
  EXPECT_THROW(f->get_bool("a.u8"), gguf_error);
  EXPECT_THROW(f->get_string_array("a.ints"), gguf_error);
  EXPECT_THROW(f->get_number_array("a.strs"), gguf_error);
}

// ---------------------------------------------------------------- header

TEST(gguf_file_errors, bad_magic) {
  auto img = mixed_image(3).magic(0x46554746u).build();  // "FGUF"
  EXPECT_HAS(parse_error(img), "bad magic");
  const std::string text = "this is not a gguf file at all, just text\n";
  EXPECT_HAS(parse_error(std::vector<uint8_t>(text.begin(), text.end())), "bad magic");
}

TEST(gguf_file_errors, unsupported_versions) {
  for (uint32_t v : {0u, 1u, 4u, 0xffffffffu}) {
    const auto msg = parse_error(mixed_image(3).version(v).build());
    EXPECT_HAS(msg, "unsupported GGUF version " + std::to_string(v));
    EXPECT_HAS(msg, "supported: 2, 3");
  }
}

TEST(gguf_file_errors, message_names_the_label) {
  EXPECT_HAS(parse_error(mixed_image(3).magic(0).build()), "'test.gguf'");
}

// Every strict prefix of a valid image is rejected with a gguf_error (never a
// crash or an out-of-bounds read: each prefix lives in its own exact-size buffer).
TEST(gguf_file_errors, truncation_at_every_byte_offset) {
  for (uint32_t version : {2u, 3u}) {
    const auto img = mixed_image(version).build();
    std::vector<uint8_t> keep;
    ASSERT_NO_THROW(parse_copy(img, img.size(), keep));
    for (size_t n = 0; n < img.size(); ++n) {
      try {
        parse_copy(img, n, keep);
        ADD_FAILURE() << "prefix of " << n << " / " << img.size() << " bytes parsed";
      } catch (const gguf_error& e) {
        EXPECT_HAS(e.what(), "truncated") << " (prefix " << n << ")";
      } catch (...) {
        ADD_FAILURE() << "prefix " << n << ": exception other than gguf_error";
      }
    }
  }
}

TEST(gguf_file_errors, truncation_of_a_tiny_model_at_every_byte_offset) {
  const auto img = tiny_llama().build();
  std::vector<uint8_t> keep;
  ASSERT_NO_THROW(parse_copy(img, img.size(), keep));
  for (size_t n = 0; n < img.size(); ++n) {
    EXPECT_THROW(parse_copy(img, n, keep), gguf_error) << "prefix " << n;
  }
}

// ---------------------------------------------------------------- huge counts

TEST(gguf_file_errors, huge_counts_rejected_before_allocating) {
  {
    auto w = header(0, 1ull << 62);
    EXPECT_HAS(parse_error(w.bytes()), "metadata count 4611686018427387904 exceeds the limit");
  }
  {
    auto w = header(~0ull, 0);
    EXPECT_HAS(parse_error(w.bytes()), "tensor count 18446744073709551615 exceeds the limit");
  }
  {
    // Within the limit but impossible for a file this small: no reserve of 65536 infos.
    auto w = header(65536, 0);
    EXPECT_HAS(parse_error(w.bytes()), "truncated");
  }
  {
    auto w = header(0, 1);
    w.u64(1ull << 60);  // key length
    w.raw("abc", 3);
    EXPECT_HAS(parse_error(w.bytes()), "metadata key length 1152921504606846976 exceeds the limit");
  }
  {
    auto w = header(0, 1);
    w.str("k");
    w.u32(testing::t_string);
    w.u64(~0ull);  // value length
    EXPECT_HAS(parse_error(w.bytes()), "metadata string value length 18446744073709551615 exceeds the limit");
  }
  {
    // A string just under the limit that the file does not hold: truncation, not an allocation.
    auto w = header(0, 1);
    w.str("k");
    w.u32(testing::t_string);
    w.u64(16ull << 20);
    EXPECT_HAS(parse_error(w.bytes()), "truncated");
  }
  for (uint32_t elem : {testing::t_u8, testing::t_u64, testing::t_string}) {
    auto w = header(0, 1);
    w.str("arr");
    w.u32(testing::t_array);
    w.u32(elem);
    w.u64(1ull << 50);
    EXPECT_HAS(parse_error(w.bytes()), "'arr' array length 1125899906842624 exceeds the limit");
  }
  for (uint32_t elem : {testing::t_u8, testing::t_u64, testing::t_string}) {
    // Largest accepted array length in a tiny file: rejected as truncated before reserving.
    auto w = header(0, 1);
    w.str("arr");
    w.u32(testing::t_array);
    w.u32(elem);
    w.u64(16ull << 20);
    w.u64(0);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_HAS(parse_error(w.bytes()), "truncated");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  }
  {
    // Tensor name length.
    auto w = header(1, 0);
    w.u64(~0ull >> 1);
    w.raw(std::string(64, 'x').data(), 64);  // enough bytes for one minimal tensor info
    EXPECT_HAS(parse_error(w.bytes()), "tensor name length");
  }
}

// ---------------------------------------------------------------- value types

TEST(gguf_file_errors, invalid_value_types) {
  for (uint32_t t : {13u, 100u, 0xffffffffu}) {
    auto w = header(0, 1);
    w.str("bad.type");
    w.u32(t);
    w.u64(0);
    EXPECT_HAS(parse_error(w.bytes()), "metadata 'bad.type' has invalid value type " + std::to_string(t));
  }
  {
    auto w = header(0, 1);
    w.str("bad.elem");
    w.u32(testing::t_array);
    w.u32(77);
    w.u64(0);
    EXPECT_HAS(parse_error(w.bytes()), "metadata 'bad.elem' has invalid array element type 77");
  }
}

TEST(gguf_file_errors, nested_arrays_rejected) {
  auto w = header(0, 1);
  w.str("nested");
  w.u32(testing::t_array);
  w.u32(testing::t_array);  // array of arrays
  w.u64(1);
  w.u32(testing::t_u8);
  w.u64(1);
  w.u8(1);
  EXPECT_HAS(parse_error(w.bytes()), "metadata 'nested' has invalid array element type 9");
}

// ---------------------------------------------------------------- duplicates

TEST(gguf_file_errors, duplicate_metadata_key) {
  gguf_builder b;
  b.kv_u32("dup.key", 1).kv_string("other", "x").kv_string("dup.key", "again");
  EXPECT_HAS(parse_error(b.build()), "duplicate metadata key 'dup.key'");
}

TEST(gguf_file_errors, duplicate_tensor_name) {
  gguf_builder b;
  b.tensor_f32("w", {4}).tensor_f32("v", {4}).tensor_f32("w", {4});
  EXPECT_HAS(parse_error(b.build()), "duplicate tensor name 'w'");
}

// ---------------------------------------------------------------- alignment

TEST(gguf_file_errors, alignment_not_a_power_of_two) {
  for (uint32_t a : {0u, 3u, 48u, 1u << 20}) {
    gguf_builder b;
    b.kv_u32("general.alignment", a).tensor_f32("w", {4});
    const auto msg = parse_error(b.build());
    EXPECT_HAS(msg, "general.alignment " + std::to_string(a) + " is not a power of two");
  }
  {
    gguf_builder b;
    b.kv_i32("general.alignment", -32);
    EXPECT_HAS(parse_error(b.build()), "general.alignment");
  }
  {
    gguf_builder b;
    b.kv_string("general.alignment", "32");
    EXPECT_HAS(parse_error(b.build()), "general.alignment is not an integer");
  }
}

TEST(gguf_file_errors, tensor_offset_not_aligned) {
  gguf_builder b;
  b.tensor_f32("first", {16});
  b.tensor(tensor_spec{"second", {4}, testing::g_f32, std::vector<uint8_t>(16), uint64_t{4}});
  EXPECT_HAS(parse_error(b.build()), "tensor 'second' offset 4 is not aligned to 32");
}

TEST(gguf_file_errors, tensor_data_past_the_end) {
  {
    // Declared size larger than the data present.
    gguf_builder b;
    b.tensor(tensor_spec{"big", {1024}, testing::g_f32, std::vector<uint8_t>(64), std::nullopt});
    const auto msg = parse_error(b.build());
    EXPECT_HAS(msg, "tensor 'big' data [0, 4096) lies outside the file's data section of 64 bytes");
  }
  {
    // Offset far beyond the file, and an offset whose end would wrap around 2^64.
    for (uint64_t off : {1ull << 20, ~0ull - 31}) {
      gguf_builder b;
      b.tensor(tensor_spec{"far", {4}, testing::g_f32, std::vector<uint8_t>(16), off});
      EXPECT_HAS(parse_error(b.build()), "tensor 'far' data [");
    }
  }
}

// ---------------------------------------------------------------- tensor infos

TEST(gguf_file_errors, dimension_count_out_of_range) {
  for (size_t nd : {0u, 5u}) {
    gguf_builder b;
    b.tensor(tensor_spec{"odd", std::vector<uint64_t>(nd, 1), testing::g_f32, std::vector<uint8_t>(4), std::nullopt});
    EXPECT_HAS(parse_error(b.build()), "tensor 'odd' has " + std::to_string(nd) + " dimensions (allowed 1..4)");
  }
  {
    // A hostile dimension count is rejected before reading (or allocating) any dims.
    auto w = header(1, 0);
    w.str("t");
    w.u32(0xffffffffu);
    w.raw(std::string(64, '\0').data(), 64);
    EXPECT_HAS(parse_error(w.bytes()), "tensor 't' has 4294967295 dimensions");
  }
}

TEST(gguf_file_errors, zero_and_huge_dimension) {
  {
    gguf_builder b;
    b.tensor(tensor_spec{"z", {4, 0}, testing::g_f32, {}, std::nullopt});
    EXPECT_HAS(parse_error(b.build()), "tensor 'z' has an invalid dimension 0");
  }
  {
    gguf_builder b;
    b.tensor(tensor_spec{"h", {1ull << 63}, testing::g_f32, {}, std::nullopt});
    EXPECT_HAS(parse_error(b.build()), "tensor 'h' has an invalid dimension 9223372036854775808");
  }
}

TEST(gguf_file_errors, element_count_overflow) {
  for (const auto& dims : std::vector<std::vector<uint64_t>>{
           {1ull << 40, 1ull << 40}, {1ull << 20, 1ull << 20, 1ull << 20}, {65536, 65536, 65536, 65536}}) {
    gguf_builder b;
    b.tensor(tensor_spec{"many", dims, testing::g_f32, {}, std::nullopt});
    EXPECT_HAS(parse_error(b.build()), "tensor 'many' has too many elements");
  }
}

TEST(gguf_file_errors, empty_tensor_name) {
  gguf_builder b;
  b.tensor(tensor_spec{"", {4}, testing::g_f32, std::vector<uint8_t>(16), std::nullopt});
  EXPECT_HAS(parse_error(b.build()), "tensor #0 has an invalid name length 0");
}

TEST(gguf_file_errors, unknown_tensor_type) {
  for (uint32_t t : {4u, 5u, 31u, 99u, 0xffffffffu}) {
    gguf_builder b;
    b.tensor(tensor_spec{"mystery", {32}, t, std::vector<uint8_t>(128), std::nullopt});
    EXPECT_HAS(parse_error(b.build()), "tensor 'mystery' has unknown type id " + std::to_string(t));
  }
}

TEST(gguf_file_errors, row_length_not_a_multiple_of_block_size) {
  {
    gguf_builder b;
    b.tensor(tensor_spec{"q", {33, 2}, testing::g_q4_0, std::vector<uint8_t>(64), std::nullopt});
    EXPECT_HAS(parse_error(b.build()), "tensor 'q' row length 33 is not a multiple of the Q4_0 block size 32");
  }
  {
    gguf_builder b;
    b.tensor(tensor_spec{"k", {128}, testing::g_q2_k, std::vector<uint8_t>(84), std::nullopt});
    EXPECT_HAS(parse_error(b.build()), "tensor 'k' row length 128 is not a multiple of the Q2_K block size 256");
  }
}

TEST(gguf_file_open, missing_file_directory_and_tiny_file) {
  try {
    gguf_file::open("/nonexistent/dir/model.gguf");
    FAIL() << "no throw";
  } catch (const gguf_error& e) {
    EXPECT_HAS(e.what(), "cannot open model file '/nonexistent/dir/model.gguf'");
    EXPECT_HAS(e.what(), "No such file or directory");
  }
  try {
    gguf_file::open("/tmp");
    FAIL() << "no throw";
  } catch (const gguf_error& e) {
    EXPECT_HAS(e.what(), "is not a regular file");
  }
  try {
    gguf_file::open("/dev/null");
    FAIL() << "no throw";
  } catch (const gguf_error& e) {
    EXPECT_HAS(e.what(), "is not a regular file");
  }
}

// ---------------------------------------------------------------- model config

std::unique_ptr<gguf_file> parse_owned(const std::vector<uint8_t>& img, std::vector<uint8_t>& keep) {
  return parse_copy(img, img.size(), keep);
}

std::string config_error(const gguf_builder& b) {
  std::vector<uint8_t> keep;
  auto f = parse_owned(b.build(), keep);
  try {
    read_model_config(*f);
  } catch (const gguf_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "read_model_config succeeded";
  return "";
}

TEST(model_config_errors, valid_tiny_config) {
  std::vector<uint8_t> keep;
  auto f = parse_owned(tiny_llama().build(), keep);
  const auto c = read_model_config(*f);
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_layer, 1);
  EXPECT_EQ(c.n_embd, 32);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.n_vocab, 8);
  EXPECT_EQ(c.n_ctx_train, 128);
}

TEST(model_config_errors, unknown_architecture_is_named_with_the_supported_list) {
  tiny_llama_params p;
  p.arch = "gpt2";
  const auto msg = config_error(tiny_llama(p));
  EXPECT_HAS(msg, "architecture 'gpt2'");
  EXPECT_HAS(msg, "supported: llama, qwen2");
}

TEST(model_config_errors, missing_architecture) {
  auto b = tiny_llama();
  b.erase_kv("general.architecture");
  EXPECT_HAS(config_error(b), "lacks 'general.architecture'");
}

TEST(model_config_errors, architecture_of_the_wrong_type) {
  auto b = tiny_llama();
  b.erase_kv("general.architecture").kv_u32("general.architecture", 1);
  EXPECT_HAS(config_error(b), "'general.architecture' should be a string");
}

TEST(model_config_errors, missing_block_count) {
  auto b = tiny_llama();
  b.erase_kv("llama.block_count");
  EXPECT_HAS(config_error(b), "lacks required metadata 'llama.block_count'");
}

TEST(model_config_errors, out_of_range_values) {
  auto b = tiny_llama();
  b.erase_kv("llama.embedding_length").kv_i32("llama.embedding_length", -32);
  EXPECT_HAS(config_error(b), "'llama.embedding_length' = -32 is out of range");
  auto b2 = tiny_llama();
  b2.erase_kv("llama.block_count").kv_u32("llama.block_count", 0);
  EXPECT_HAS(config_error(b2), "'llama.block_count' = 0 is out of range");
  auto b3 = tiny_llama();
  b3.erase_kv("llama.block_count").kv_u64("llama.block_count", ~0ull);
  EXPECT_HAS(config_error(b3), "'llama.block_count' is out of range");
}

TEST(model_config_errors, head_count_not_a_multiple_of_head_count_kv) {
  tiny_llama_params p;
  p.n_head_kv = 3;
  EXPECT_HAS(config_error(tiny_llama(p)), "head_count 4 is not a multiple of head_count_kv 3");
}

TEST(model_config_errors, no_vocabulary) {
  auto b = tiny_llama();
  b.erase_kv("tokenizer.ggml.tokens");
  EXPECT_HAS(config_error(b), "has no vocabulary");
}

// ---------------------------------------------------------------- model weights

std::string weights_error(const gguf_builder& b) {
  std::vector<uint8_t> keep;
  auto f = parse_owned(b.build(), keep);
  const auto c = read_model_config(*f);
  try {
    load_model_weights(*f, c, kernels::isa_level::scalar);
  } catch (const gguf_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "load_model_weights succeeded";
  return "";
}

TEST(model_weights_errors, valid_tiny_model_loads) {
  for (bool tied : {true, false}) {
    tiny_llama_params p;
    p.tied_output = tied;
    std::vector<uint8_t> keep;
    auto f = parse_owned(tiny_llama(p).build(), keep);
    const auto c = read_model_config(*f);
    const auto w = load_model_weights(*f, c, kernels::isa_level::scalar);
    EXPECT_EQ(w.tied_output, tied);
    ASSERT_EQ(w.layers.size(), 1u);
    EXPECT_EQ(w.layers[0].attn_norm.size(), 32u);
    EXPECT_EQ(w.output_norm.size(), 32u);
    std::vector<float> row(32);
    w.embed(7, row.data(), 32);
    const auto* emb = f->find_tensor("token_embd.weight");
    EXPECT_EQ(std::memcmp(row.data(), emb->data + 7 * 32 * 4, 32 * 4), 0);
  }
}

TEST(model_weights_errors, missing_tensor_is_named) {
  auto b = tiny_llama();
  b.erase_tensor("blk.0.ffn_up.weight");
  EXPECT_HAS(weights_error(b), "lacks tensor 'blk.0.ffn_up.weight'");
  auto b2 = tiny_llama();
  b2.erase_tensor("token_embd.weight");
  EXPECT_HAS(weights_error(b2), "lacks tensor 'token_embd.weight'");
}

TEST(model_weights_errors, wrong_shape_is_named) {
  auto b = tiny_llama();
  b.erase_tensor("blk.0.attn_k.weight").tensor_f32("blk.0.attn_k.weight", {32, 32});
  const auto msg = weights_error(b);
  EXPECT_HAS(msg, "tensor 'blk.0.attn_k.weight' has shape [32, 32], expected [32, 16]");
  auto b2 = tiny_llama();
  b2.erase_tensor("output_norm.weight").tensor_f32("output_norm.weight", {32, 2});
  EXPECT_HAS(weights_error(b2), "tensor 'output_norm.weight' has shape [32, 2], expected [32]");
}

TEST(model_weights_errors, unsupported_tensor_type_is_named) {
  tiny_llama_params p;
  p.n_ff = 256;  // ffn_down rows are n_ff long: one IQ4_XS block each
  auto b = tiny_llama(p);
  b.erase_tensor("blk.0.ffn_down.weight");
  b.tensor(tensor_spec{"blk.0.ffn_down.weight", {256, 32}, testing::g_iq4_xs, std::vector<uint8_t>(32 * 136), std::nullopt});
  const auto msg = weights_error(b);
  EXPECT_HAS(msg, "tensor 'blk.0.ffn_down.weight' has type IQ4_XS");
  EXPECT_HAS(msg, "does not support");
}

TEST(model_weights_errors, qwen2_without_biases) {
  tiny_llama_params p;
  p.arch = "qwen2";
  EXPECT_HAS(weights_error(tiny_llama(p)), "qwen2 model lacks 'blk.0.attn_q.bias'");
}

}  // namespace
}  // namespace spate
