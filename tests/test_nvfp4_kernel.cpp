// The kernel's NVFP4 arithmetic (templates/ropejit/nvfp4.cuh, compiled for the host in
// tests/support/fp8_kernel.cpp: the integer path of every arch without cvt.e2m1x2) against the
// independent table oracle (core fp_convert.h, Fp8Format::e2m1): float -> e2m1 bit for bit for
// every float (NaN: the code of 6 with its sign), nibble order, and the block scale.
// ropejit-tier: conformance
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "ropejit/fp_convert.h"

// tests/support/fp8_kernel.cpp
uint8_t kernel_e2m1(float x);
uint32_t kernel_e2m1x8(const float* in);
uint8_t kernel_nvfp4_block_scale(float amax, float inv_global, float* multiplier);
float kernel_nvfp4_divide_by_scale(float a, uint32_t code);

using namespace ropejit::ref;

namespace {

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

TEST(Nvfp4Kernel, StridedSweepOfAllFloatsMatchesOracle) {
  // Every float whose bit pattern is a multiple of 97: both signs, NaN, inf, subnormals.
  int64_t checked = 0, mismatches = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 97) {
    const float x = from_bits(static_cast<uint32_t>(bits));
    const uint8_t got = kernel_e2m1(x), want = round_to_fp8_bits(Fp8Format::e2m1, static_cast<double>(x));
    ++checked;
    if (got != want && ++mismatches <= 10)
      ADD_FAILURE() << "input " << std::hexfloat << x << ": kernel " << int(got) << ", oracle " << int(want);
  }
  EXPECT_EQ(mismatches, 0) << " of " << checked;
}

TEST(Nvfp4Kernel, EveryMidpointAndItsNeighboursMatchOracle) {
  // The eight magnitudes 0 .. 6, the midpoints between them (ties to even) and 6's saturation edge.
  const float inf = std::numeric_limits<float>::infinity();
  int64_t checked = 0;
  for (int code = 0; code < 8; ++code) {
    const double lo = fp8_bits_to_double(Fp8Format::e2m1, static_cast<uint8_t>(code));
    const double hi = code < 7 ? fp8_bits_to_double(Fp8Format::e2m1, static_cast<uint8_t>(code + 1)) : 8.0;
    const float mid = static_cast<float>((lo + hi) / 2);
    float up = mid, down = mid;
    for (int k = 0; k < 64; ++k, up = std::nextafterf(up, inf), down = std::nextafterf(down, 0.0f))
      for (float x : {up, down, -up, -down, static_cast<float>(lo), static_cast<float>(-lo)}) {
        ++checked;
        ASSERT_EQ(kernel_e2m1(x), round_to_fp8_bits(Fp8Format::e2m1, x)) << std::hexfloat << x;
      }
  }
  EXPECT_EQ(kernel_e2m1(0.25f), 0u);          // a tie: to 0 (even)
  EXPECT_EQ(kernel_e2m1(0.75f), 2u);          // a tie: to 1 (even code 2)
  EXPECT_EQ(kernel_e2m1(5.0f), 6u);           // a tie: to 4 (code 6)
  EXPECT_EQ(kernel_e2m1(-1e30f), 0xfu);       // saturates to -6
  EXPECT_EQ(kernel_e2m1(inf), 0x7u);
  EXPECT_EQ(kernel_e2m1(-std::numeric_limits<float>::quiet_NaN()), 0xfu);  // no NaN: -6
  EXPECT_EQ(checked, 8 * 64 * 6);
}

TEST(Nvfp4Kernel, EightCodesTakeTheirNibblesLowFirst) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int trial = 0; trial < 1000; ++trial) {
    float v[8];
    for (float& x : v) x = normal(rng);
    const uint32_t word = kernel_e2m1x8(v);
    for (int i = 0; i < 8; ++i)
      ASSERT_EQ((word >> (4 * i)) & 0xfu, round_to_fp8_bits(Fp8Format::e2m1, v[i])) << "element " << i;
  }
}

TEST(Nvfp4Kernel, BlockScaleIsTheCorrectlyRoundedRecipe) {
  // sf = e4m3(fl(inv * fl(amax * fl(1/6)))), multiplier fl(inv / sf) or 0: the oracle rounds the
  // same float32 products (each exact to float, checked in double), over amaxes from 0 to past
  // saturation and global scales whose block scales reach e4m3's subnormals.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> log_amax(-30.0, 20.0), log_inv(-12.0, 12.0);
  for (int trial = 0; trial < 200000; ++trial) {
    const float amax = trial == 0 ? 0.0f : static_cast<float>(std::exp2(log_amax(rng)));
    const float inv = static_cast<float>(std::exp2(log_inv(rng)));
    float multiplier = -1.0f;
    const uint8_t code = kernel_nvfp4_block_scale(amax, inv, &multiplier);
    const float sixth = 1.0f / 6.0f;
    const double sf_value = static_cast<double>(static_cast<float>(static_cast<double>(inv) *
                                                                   static_cast<float>(double(amax) * sixth)));
    const uint8_t want = round_to_fp8_bits(Fp8Format::e4m3, sf_value);
    ASSERT_EQ(code, want) << "amax " << amax << " inv " << inv;
    const double sf = fp8_bits_to_double(Fp8Format::e4m3, want);
    ASSERT_EQ(multiplier, sf == 0.0 ? 0.0f : static_cast<float>(double(inv) / sf)) << "amax " << amax << " inv " << inv;
  }
  // Extreme global scales and amaxes: the multiplier stays normal (or overflows) where the
  // division above is exact (docs/spec.md "NVFP4").
  const float extremes[] = {std::numeric_limits<float>::min(), 0x1.8p-126f, 0x1p-117f, 0x1p-100f, 1.0f,
                            0x1p100f, 0x1p119f, 0x1p126f, std::numeric_limits<float>::max()};
  for (const float inv : extremes)
    for (const float amax : extremes) {
      float multiplier = -1.0f;
      const uint8_t code = kernel_nvfp4_block_scale(amax, inv, &multiplier);
      const float sixth = 1.0f / 6.0f;
      const uint8_t want = round_to_fp8_bits(Fp8Format::e4m3, static_cast<double>(inv * (amax * sixth)));
      ASSERT_EQ(code, want) << std::hexfloat << "amax " << amax << " inv " << inv;
      const float sf = static_cast<float>(fp8_bits_to_double(Fp8Format::e4m3, want));
      ASSERT_EQ(multiplier, sf == 0.0f ? 0.0f : inv / sf) << std::hexfloat << "amax " << amax << " inv " << inv;
      EXPECT_TRUE(sf == 0.0f || multiplier >= std::numeric_limits<float>::min());
    }
  float m;
  EXPECT_EQ(kernel_nvfp4_block_scale(std::numeric_limits<float>::infinity(), 1.0f, &m), 0x7eu);  // saturates at 448
}

TEST(Nvfp4Kernel, DivisionByABlockScaleIsCorrectlyRounded) {
  // The kernel divides by sf = k * 2^e without a division: every significand of a (one binade)
  // over codes 1..15 (every k in [8, 16) and e4m3's subnormals), then every code over a's whole normal exponent range
  // (the scaling, and quotients that overflow), against IEEE float division. Quotients below
  // FLT_MIN are outside its contract: the block-scale recipe never makes one (next test).
  auto sf = [](uint32_t code) { return static_cast<float>(fp8_bits_to_double(Fp8Format::e4m3, code)); };
  for (uint32_t code = 1; code < 16; ++code)
    for (uint32_t significand = 0; significand < (1u << 23); ++significand) {
      const float a = from_bits(0x3f800000u | significand);
      const float got = kernel_nvfp4_divide_by_scale(a, code);
      if (got != a / sf(code)) FAIL() << std::hexfloat << a << " / " << sf(code) << ": " << got;
    }
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> significands(0, (1u << 23) - 1);
  int overflows = 0;
  for (uint32_t code = 1; code <= 0x7e; ++code)
    for (uint32_t exponent = 1; exponent < 255; ++exponent)
      for (int trial = 0; trial < 8; ++trial) {
        const uint32_t significand = trial == 0 ? 0u : trial == 1 ? (1u << 23) - 1 : significands(rng);
        const float a = from_bits(exponent << 23 | significand);
        const float want = a / sf(code);
        if (want < std::numeric_limits<float>::min()) continue;
        overflows += std::isinf(want);
        ASSERT_EQ(kernel_nvfp4_divide_by_scale(a, code), want) << std::hexfloat << a << " / " << sf(code);
      }
  EXPECT_GT(overflows, 0);
}

}  // namespace
