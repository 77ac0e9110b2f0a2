// The architecture table (model/arch/registry.cpp): every supported name
// resolves to its own entry with both hooks, unknown names to none, and
// read_model_config refuses an unregistered architecture naming the table.
#include <gtest/gtest.h>

#include <string>

#include "gguf_builder.h"
#include "model/arch/arch.h"
#include "model/gguf_file.h"
#include "model/model_config.h"

namespace spate {
namespace {

TEST(ArchRegistry, EverySupportedNameResolvesToItsEntry) {
  const std::string list = supported_archs();
  EXPECT_EQ(list, "llama, qwen2, qwen3, qwen3moe, gemma3, gpt-oss, phi3");
  for (const char* name : {"llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "gpt-oss", "phi3"}) {
    const arch_def* a = find_arch(name);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_EQ(a->name, name);
    EXPECT_NE(a->configure, nullptr) << name;
    EXPECT_NE(a->forward, nullptr) << name;
  }
}

TEST(ArchRegistry, UnknownNamesResolveToNone) {
  EXPECT_EQ(find_arch(""), nullptr);
  EXPECT_EQ(find_arch("mamba"), nullptr);
  EXPECT_EQ(find_arch("gpt_oss"), nullptr);  // the GGUF name has a dash
  EXPECT_EQ(find_arch("Llama"), nullptr);  // names are exact
}

// The configure hooks set each family's features (model_config.h).
TEST(ArchRegistry, ConfigureSetsTheFamilysFeatures) {
  auto config_of = [](const std::string& arch) {
    testing::tiny_llama_params p;
    p.arch = arch;
    const auto bytes = testing::tiny_llama(p).build();
    const auto f = gguf_file::parse(bytes.data(), bytes.size(), "test.gguf");
    return read_model_config(*f);
  };
  const auto llama = config_of("llama");
  EXPECT_EQ(llama.rope, kernels::rope_mode::normal);
  EXPECT_EQ(llama.qkv_bias, qkv_bias_rule::optional);
  const auto qwen2 = config_of("qwen2");
  EXPECT_EQ(qwen2.rope, kernels::rope_mode::neox);
  EXPECT_EQ(qwen2.qkv_bias, qkv_bias_rule::required);
  EXPECT_FALSE(qwen2.qk_norm);
  const auto qwen3 = config_of("qwen3");
  EXPECT_EQ(qwen3.rope, kernels::rope_mode::neox);
  EXPECT_EQ(qwen3.qkv_bias, qkv_bias_rule::forbidden);
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_FALSE(qwen3.post_norms);
  const auto phi3 = config_of("phi3");
  EXPECT_TRUE(phi3.fused_gate_up);
  EXPECT_FALSE(llama.fused_gate_up);
}

TEST(ArchRegistry, ReadModelConfigRefusesAnUnregisteredArchitecture) {
  testing::tiny_llama_params p;
  p.arch = "mamba";
  const auto bytes = testing::tiny_llama(p).build();
  const auto f = gguf_file::parse(bytes.data(), bytes.size(), "test.gguf");
  try {
    read_model_config(*f);
    FAIL() << "accepted an unregistered architecture";
  } catch (const gguf_error& e) {
    EXPECT_NE(std::string(e.what()).find("architecture 'mamba'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(supported: " + supported_archs() + ")"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace spate
