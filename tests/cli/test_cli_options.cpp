// cli::parse_isa_env / init_kernels: SPATE_FORCE_REFERENCE and SPATE_MAX_ISA,
// read once at start-up into isa_options, and the "Kernels: ..." description.
#include <gtest/gtest.h>

#include "cli/cli_options.h"
#include "kernels/isa.h"

namespace spate::cli {
namespace {

using kernels::isa_level;

TEST(IsaEnv, UnsetOrEmptyIsNoCapAndNoReference) {
  isa_options o;
  o.force_reference = true;
  o.max_isa = isa_level::scalar;
  EXPECT_EQ(parse_isa_env(nullptr, nullptr, o), "");
  EXPECT_FALSE(o.force_reference);
  EXPECT_EQ(o.max_isa, isa_level::avx512);
  EXPECT_EQ(parse_isa_env("", "", o), "");
  EXPECT_FALSE(o.force_reference);
  EXPECT_EQ(o.max_isa, isa_level::avx512);
}

TEST(IsaEnv, MaxIsaTakesTheThreeLevels) {
  isa_options o;
  for (auto [text, level] : {std::pair{"scalar", isa_level::scalar}, {"avx2", isa_level::avx2}, {"avx512", isa_level::avx512}}) {
    ASSERT_EQ(parse_isa_env(nullptr, text, o), "") << text;
    EXPECT_EQ(o.max_isa, level) << text;
    EXPECT_FALSE(o.force_reference);
  }
}

TEST(IsaEnv, AnythingElseIsAnErrorNamingTheVariableAndTheValues) {
  for (const char* bad : {"AVX2", "avx", "avx512vnni", "sse2", "1", " avx2"}) {
    isa_options o;
    const std::string err = parse_isa_env(nullptr, bad, o);
    EXPECT_EQ(err, std::string("SPATE_MAX_ISA must be scalar, avx2 or avx512, got '") + bad + "'");
  }
}

TEST(IsaEnv, ForceReferenceKeepsItsSpelling) {
  isa_options o;
  for (const char* on : {"1", "true", "yes"}) {
    ASSERT_EQ(parse_isa_env(on, nullptr, o), "");
    EXPECT_TRUE(o.force_reference) << on;
  }
  for (const char* off : {"0", "false"}) {
    ASSERT_EQ(parse_isa_env(off, "avx2", o), "");
    EXPECT_FALSE(o.force_reference) << off;
    EXPECT_EQ(o.max_isa, isa_level::avx2);
  }
}

// init_kernels applies the options and says why the level is below the CPU's.
TEST(IsaEnv, InitKernelsNamesTheLevelAndWhy) {
  const isa_level before = kernels::active_isa();
  const isa_level cpu = kernels::detect_isa();
  EXPECT_EQ(init_kernels({}), kernels::isa_name(cpu));
  EXPECT_EQ(kernels::active_isa(), cpu);
  EXPECT_EQ(init_kernels({.force_reference = true, .max_isa = isa_level::avx2}),
            std::string(kernels::isa_name(isa_level::scalar)) + " (forced by SPATE_FORCE_REFERENCE)");
  EXPECT_EQ(kernels::active_isa(), isa_level::scalar);
  // Capped at avx2: on an AVX-512 CPU the note says so; on an AVX2 one the cap changes nothing and says nothing.
  const std::string capped = init_kernels({.max_isa = isa_level::avx2});
  if (cpu == isa_level::avx512) {
    EXPECT_EQ(capped, std::string(kernels::isa_name(isa_level::avx2)) + " (capped by SPATE_MAX_ISA=avx2)");
    EXPECT_EQ(kernels::active_isa(), isa_level::avx2);
  } else {
    EXPECT_EQ(capped, kernels::isa_name(cpu));
  }
  if (cpu != isa_level::scalar) {
    EXPECT_EQ(init_kernels({.max_isa = isa_level::scalar}),
              std::string(kernels::isa_name(isa_level::scalar)) + " (capped by SPATE_MAX_ISA=scalar)");
  }
  kernels::init_isa(false, before);
}

}  // namespace
}  // namespace spate::cli

namespace spate::cli {
namespace {

// One default per setting: the flags' defaults are the typed engine
// configuration's, and an unset budget reaches the engine as auto (0).
TEST(EngineOptions, DefaultsAreTheEngineConfigs) {
  boost::program_options::options_description desc;
  engine_options o;
  add_engine_options(desc, o);
  boost::program_options::variables_map vm;
  const char* argv[] = {"spate"};
  boost::program_options::store(boost::program_options::parse_command_line(1, argv, desc), vm);
  boost::program_options::notify(vm);
  ASSERT_EQ(finish_engine_options(o), "");
  const engine_config c = make_engine_config(model_options{}, o, 512);
  const engine_config d;
  EXPECT_EQ(c.sched.max_num_batched_tokens, d.sched.max_num_batched_tokens);
  EXPECT_TRUE(c.sched.auto_batched_tokens());
  EXPECT_TRUE(c.sched.enable_chunked_prefill);
  EXPECT_EQ(c.sched.max_num_seqs, d.sched.max_num_seqs);
  EXPECT_EQ(c.max_queued_requests, d.max_queued_requests);
  EXPECT_EQ(c.sched.max_model_len, 512);
}

}  // namespace
}  // namespace spate::cli
