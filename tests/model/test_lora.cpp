// lora_fits_base: binding start-time adapters by their headers (model/lora.h).
#include <gtest/gtest.h>

#include "gguf_builder.h"
#include "model/gguf_file.h"
#include "model/lora.h"

namespace spate {
namespace {

using testing::gguf_builder;

std::vector<uint8_t> base_image(const std::string& arch, uint64_t n_embd, uint64_t n_q) {
  gguf_builder b;
  b.kv_string("general.architecture", arch);
  b.tensor_f32("blk.0.attn_q.weight", {n_embd, n_q});
  b.tensor_f32("blk.0.ffn_up.weight", {n_embd, 2 * n_embd});
  return b.build();
}

gguf_builder adapter_builder(const std::string& arch, uint64_t n_in, uint64_t n_out, uint64_t rank) {
  gguf_builder b;
  b.kv_string("general.type", "adapter").kv_string("adapter.type", "lora").kv_string("general.architecture", arch);
  b.tensor_f32("blk.0.attn_q.weight.lora_a", {n_in, rank});
  b.tensor_f32("blk.0.attn_q.weight.lora_b", {rank, n_out});
  return b;
}

std::string fits(const std::vector<uint8_t>& adapter, const std::vector<uint8_t>& base, int32_t max_rank = 64) {
  const auto a = gguf_file::parse(adapter.data(), adapter.size(), "adapter");
  const auto b = gguf_file::parse(base.data(), base.size(), "base");
  return lora_fits_base(*a, *b, max_rank);
}

TEST(LoraFitsBase, FitsTheBaseItWasMadeFor) {
  const auto base = base_image("llama", 8, 8);
  EXPECT_EQ(fits(adapter_builder("llama", 8, 8, 2).build(), base), "");
}

TEST(LoraFitsBase, RefusesAnotherArchitecture) {
  EXPECT_EQ(fits(adapter_builder("llama", 8, 8, 2).build(), base_image("gemma3", 8, 8)),
            "its architecture 'llama' is not the base model's 'gemma3'");
}

TEST(LoraFitsBase, RefusesShapesThatDoNotFitNamingTheTensor) {
  const auto base = base_image("llama", 8, 8);
  EXPECT_EQ(fits(adapter_builder("llama", 8, 16, 2).build(), base),
            "'blk.0.attn_q.weight' has lora_a [8, 2] and lora_b [2, 16], which do not fit the base weight [8, 8]");
  EXPECT_NE(fits(adapter_builder("llama", 4, 8, 2).build(), base), "");
}

TEST(LoraFitsBase, RefusesMissingWeightsPairsAndHighRanks) {
  const auto base = base_image("llama", 8, 8);
  auto b = adapter_builder("llama", 8, 8, 2);
  b.tensor_f32("blk.3.attn_q.weight.lora_a", {8, 2}).tensor_f32("blk.3.attn_q.weight.lora_b", {2, 8});
  EXPECT_EQ(fits(b.build(), base), "'blk.3.attn_q.weight': the base model has no such weight");
  auto c = adapter_builder("llama", 8, 8, 2);
  c.erase_tensor("blk.0.attn_q.weight.lora_b");
  EXPECT_EQ(fits(c.build(), base), "'blk.0.attn_q.weight' has lora_a but no lora_b");
  EXPECT_EQ(fits(adapter_builder("llama", 8, 8, 4).build(), base, 2), "'blk.0.attn_q.weight' has rank 4, above --max-lora-rank 2");
}

TEST(LoraFitsBase, RefusesAFileThatIsNotAnAdapter) {
  const auto base = base_image("llama", 8, 8);
  EXPECT_NE(fits(base, base).find("not a LoRA adapter"), std::string::npos);
}

}  // namespace
}  // namespace spate
