// Tests of YaRN's rotary angles (kernels/ops.h rope_yarn, make_rope_yarn,
// rope_angles_yarn): llama.cpp's parameters for gpt-oss-20b, hand-computed
// angles on each side of the ramp, the ext_factor = 0 and all-extrapolated
// limits against rope_angles, and the gpt-oss-20b angles against values
// computed independently in Python from ggml's formulas
// (tests/reference/rope_yarn_values.py). ISA-independent (one implementation).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/ops.h"

namespace spate::kernels {
namespace {

// gpt-oss-20b: rope dims 64, freq_base 150000, rope.scaling.factor 32, original context 4096.
constexpr int32_t k_n_rot = 64, k_n_ctx_orig = 4096;
constexpr float k_base = 150000.0f, k_factor = 32.0f;

std::vector<float> yarn_angles(int32_t n_rot, int32_t pos, float base, const rope_yarn& y) {
  std::vector<float> cs(static_cast<size_t>(n_rot));
  rope_angles_yarn(n_rot, pos, base, y, cs.data());
  return cs;
}

std::vector<float> plain_angles(int32_t n_rot, int32_t pos, float base, const float* freq_factors) {
  std::vector<float> cs(static_cast<size_t>(n_rot));
  rope_angles(n_rot, pos, base, freq_factors, cs.data());
  return cs;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// llama.cpp's values for gpt-oss-20b: freq_scale 1/32, ext_factor 1, ramp over pairs [8, 18]
// (ggml_rope_yarn_corr_dims with beta_fast 32, beta_slow 1), attn_factor get_mscale(32) /
// (1 + 0.1 ln 32) = 1, so cos and sin carry the magnitude 1 + 0.1 ln 32.
TEST(RopeYarn, ParamsOfGptOss20b) {
  const rope_yarn y = make_rope_yarn(k_n_rot, k_factor, k_n_ctx_orig, k_base);
  EXPECT_EQ(y.freq_scale, 1.0f / 32.0f);
  EXPECT_EQ(y.ext_factor, 1.0f);
  EXPECT_EQ(y.corr_low, 8.0f);
  EXPECT_EQ(y.corr_high, 18.0f);
  EXPECT_NEAR(y.attn_factor, 1.0f, 1.2e-7f);
  const auto cs = yarn_angles(k_n_rot, 0, k_base, y);
  for (int32_t i = 0; i < k_n_rot / 2; ++i) {
    EXPECT_NEAR(cs[i], 1.0 + 0.1 * std::log(32.0), 2e-7) << i;
    EXPECT_EQ(cs[k_n_rot / 2 + i], 0.0f) << i;
  }
  // The corr dims, in double: 64 ln(4096 / (beta 2 pi)) / (2 ln 150000) = 8.09 (beta 32), 17.4 (beta 1).
  EXPECT_EQ(std::floor(64.0 * std::log(4096.0 / (32.0 * 2.0 * M_PI)) / (2.0 * std::log(150000.0))), 8.0);
  EXPECT_EQ(std::ceil(64.0 * std::log(4096.0 / (1.0 * 2.0 * M_PI)) / (2.0 * std::log(150000.0))), 18.0);
}

// The corr dims clamp to [0, n_rot - 1]; no extension (factor 1) has no magnitude scale.
TEST(RopeYarn, ParamsClampAndFactorOne) {
  const rope_yarn small_ctx = make_rope_yarn(16, 4.0f, 8, 10000.0f, 32.0f, 1.0f);  // corr dims < 0
  EXPECT_EQ(small_ctx.corr_low, 0.0f);
  const rope_yarn huge_ctx = make_rope_yarn(16, 4.0f, 1 << 30, 10000.0f, 32.0f, 1.0f);  // corr dims > n_rot
  EXPECT_EQ(huge_ctx.corr_high, 15.0f);
  const rope_yarn one = make_rope_yarn(64, 1.0f, 4096, 10000.0f);
  EXPECT_EQ(one.freq_scale, 1.0f);
  EXPECT_EQ(one.attn_factor, 1.0f);  // get_mscale(1) = 1, 1 / (1 + 0.1 ln 1) = 1
  const auto yarn = yarn_angles(64, 777, 10000.0f, one), plain = plain_angles(64, 777, 10000.0f, nullptr);
  for (int32_t i = 0; i < 64; ++i) EXPECT_NEAR(yarn[i], plain[i], 1.2e-7) << i;  // theta mixed with itself
}

// Four pairs (n_rot 8), base 10000, pos 10, freq_scale 1/4, ramp over pairs [1, 3]: extrapolated
// angles are 10 * 10000^(-i/4) = 10, 1, 0.1, 0.01. Pairs 0 and 1 (i <= corr_low) keep them, pair 3
// (i >= corr_high) is interpolated (0.01 / 4), pair 2 is half way: 0.5 * 0.1 + 0.5 * 0.025. Magnitude
// attn_factor (1.5) * (1 + 0.1 ln 4).
TEST(RopeYarn, HandComputedAnglesOnBothSidesOfTheRamp) {
  const rope_yarn y{0.25f, 1.0f, 1.5f, 1.0f, 3.0f};
  const double theta[4] = {10.0, 1.0, 0.0625, 0.0025};
  const double mscale = 1.5 * static_cast<double>(1.0f + 0.1f * std::log(4.0f));
  const auto cs = yarn_angles(8, 10, 10000.0f, y);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(cs[i], mscale * std::cos(theta[i]), 3e-7) << i;
    EXPECT_NEAR(cs[4 + i], mscale * std::sin(theta[i]), 3e-7) << i;
  }
  // ext_factor 0.5 halves the ramp's weight: pair 0 gets 0.5 * 2.5 + 0.5 * 10 (attn_factor 1).
  const rope_yarn half_ext{0.25f, 0.5f, 1.0f, 1.0f, 3.0f};
  const auto ch = yarn_angles(8, 10, 10000.0f, half_ext);
  EXPECT_NEAR(ch[0], std::cos(6.25) * (1.0 + 0.1 * std::log(4.0)), 3e-7);
  EXPECT_NEAR(ch[4], std::sin(6.25) * (1.0 + 0.1 * std::log(4.0)), 3e-7);
}

// ext_factor 0: plain interpolation, i.e. rope_angles with every frequency divided by factor (a power
// of two here, so theta * freq_scale == theta / factor exactly), and attn_factor the only scale: the same
// bits (times 2, exactly, for attn_factor 2).
TEST(RopeYarn, ExtFactorZeroIsPlainAnglesScaled) {
  for (int32_t n_rot : {2, 6, 64, 128}) {
    const std::vector<float> factors(static_cast<size_t>(n_rot / 2), 4.0f);
    for (int32_t pos : {0, 1, 17, 4095, 100000, 1 << 20}) {
      const auto plain = plain_angles(n_rot, pos, 500000.0f, factors.data());
      EXPECT_TRUE(same_bits(yarn_angles(n_rot, pos, 500000.0f, {0.25f, 0.0f, 1.0f, 3.0f, 20.0f}), plain)) << pos;
      auto doubled = plain;
      for (float& v : doubled) v *= 2.0f;
      EXPECT_TRUE(same_bits(yarn_angles(n_rot, pos, 500000.0f, {0.25f, 0.0f, 2.0f, 3.0f, 20.0f}), doubled)) << pos;
    }
  }
}

// Every pair below corr_low: pure extrapolation, the plain angles times mscale (rounded once, so
// within an ulp of the float product).
TEST(RopeYarn, AllPairsBelowCorrLowExtrapolate) {
  const rope_yarn y{1.0f / 40.0f, 1.0f, 1.0f, 64.0f, 70.0f};
  const float mscale = 1.0f + 0.1f * std::log(40.0f);
  for (int32_t pos : {1, 300, 70000}) {
    const auto plain = plain_angles(64, pos, 10000.0f, nullptr);
    const auto yarn = yarn_angles(64, pos, 10000.0f, y);
    for (int32_t i = 0; i < 64; ++i) EXPECT_NEAR(yarn[i], plain[i] * mscale, 2.5e-7) << pos << " " << i;
  }
}

// gpt-oss-20b's cos | sin from tests/reference/rope_yarn_values.py (ggml's formulas, theta in double).
struct yarn_expected {
  int32_t pos;
  float cos_sin[k_n_rot];
};
const yarn_expected k_gpt_oss_20b[] = {
    {0, {
      1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f,
      1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f,
      1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f,
      1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f,
      1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f,
      1.34657359f, 1.34657359f, 0.0f, 0.0f, 0.0f, 0.0f,
      0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
      0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
      0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
      0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
      0.0f, 0.0f, 0.0f, 0.0f,
    }},
    {1, {
      0.727556825f, 1.03935826f, 1.19763231f, 1.27515578f, 1.31250632f, 1.33036304f,
      1.33886898f, 1.34291375f, 1.34483552f, 1.34590042f, 1.34631884f, 1.34648001f,
      1.34654045f, 1.34656239f, 1.34657013f, 1.34657264f, 1.34657335f, 1.34657359f,
      1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f,
      1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f, 1.34657359f,
      1.34657359f, 1.34657359f, 1.13310266f, 0.856151223f, 0.61557889f, 0.432710081f,
      0.300977796f, 0.208313867f, 0.143841296f, 0.0992125049f, 0.0683943704f, 0.0425725728f,
      0.0261905082f, 0.0158786848f, 0.00944709778f, 0.00547993975f, 0.00306651159f, 0.00162414368f,
      0.000782288495f, 0.000306948466f, 5.15856336e-05f, 3.55447883e-05f, 2.44919338e-05f, 1.68760271e-05f,
      1.16283309e-05f, 8.0124355e-06f, 5.52092297e-06f, 3.80416031e-06f, 2.62123513e-06f, 1.80614711e-06f,
      1.24451537e-06f, 8.57526231e-07f, 5.90873583e-07f, 4.0713806e-07f,
    }},
    {4095, {
      -0.0888415352f, 1.19050705f, -1.23317349f, 0.30295077f, 1.15390778f, 0.167710572f,
      0.0172771104f, 1.24488807f, 0.998708248f, -1.04563344f, -0.59648186f, -0.531396389f,
      -1.209566f, -0.775743186f, -1.33993351f, 0.302682936f, -0.973618031f, 0.801302671f,
      1.33003819f, 1.33871448f, 1.34284031f, 1.34480071f, 1.34573174f, 1.34617388f,
      1.34638381f, 1.34648347f, 1.3465308f, 1.34655333f, 1.34656394f, 1.34656906f,
      1.34657145f, 1.34657252f, -1.34363973f, 0.629248321f, 0.540872931f, 1.31205237f,
      -0.694087446f, 1.3360889f, -1.34646273f, 0.51333642f, 0.903239906f, -0.848475814f,
      -1.20725715f, -1.23728669f, -0.591785967f, -1.10067391f, 0.133561283f, -1.31211412f,
      0.930230319f, 1.08220816f, 0.210377797f, 0.145272627f, 0.100201763f, 0.069077f,
      0.0476080887f, 0.0328076743f, 0.022607116f, 0.0155776897f, 0.0107338438f, 0.00739613501f,
      0.00509627815f, 0.00351156597f, 0.00241962587f, 0.00166722992f,
    }},
    {100000, {
      -1.3457129f, -1.33671463f, -1.04347134f, -0.509349704f, -0.865492582f, 1.29961419f,
      -0.767842829f, -0.563712478f, -0.265722036f, -0.0837320387f, -1.21198952f, -0.584417164f,
      -0.731824219f, 0.16016227f, 0.0515258387f, 0.446804851f, 0.0332756937f, -0.934653223f,
      -1.03914905f, -1.18047118f, -0.330586284f, 0.420440495f, 0.874927223f, 1.11514485f,
      1.23497188f, 1.29319501f, 1.3211416f, 1.33447886f, 1.34082675f, 1.34384406f,
      1.34527743f, 1.34595811f, 0.0481383875f, 0.162648216f, 0.851133406f, -1.24652445f,
      -1.03159249f, 0.352509975f, 1.10619974f, -1.2229017f, -1.32009554f, 1.3439678f,
      -0.586806357f, -1.21314347f, -1.13035119f, -1.33701479f, 1.34558737f, 1.27028573f,
      1.34616244f, -0.969372869f, -0.856405079f, 0.647879899f, 1.30536318f, 1.27925372f,
      1.02360284f, 0.754792988f, 0.536754131f, 0.375376016f, 0.260471225f, 0.180073634f,
      0.12427444f, 0.0856946707f, 0.0590683967f, 0.0407076031f,
    }},
};

TEST(RopeYarn, GptOss20bMatchesPythonGgmlFormulas) {
  const rope_yarn y = make_rope_yarn(k_n_rot, k_factor, k_n_ctx_orig, k_base);
  for (const yarn_expected& e : k_gpt_oss_20b) {
    const auto cs = yarn_angles(k_n_rot, e.pos, k_base, y);
    for (int32_t i = 0; i < k_n_rot; ++i) EXPECT_NEAR(cs[i], e.cos_sin[i], 2.5e-7) << "pos " << e.pos << " i " << i;
  }
}

}  // namespace
}  // namespace spate::kernels
