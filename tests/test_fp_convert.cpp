// Tests of the host storage-type conversions (core/include/ropejit/fp_convert.h):
// every fp16/bf16 pattern, agreement with independent converters, ties and ulp distances.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "ropejit/fp_convert.h"

using namespace ropejit;
using namespace ropejit::ref;

namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 engine([] {
    const uint64_t seed = std::random_device{}();
    std::printf("test_fp_convert random seed %llu\n", static_cast<unsigned long long>(seed));
    return seed;
  }());
  return engine;
}

TEST(FpConvert, AllHalfPatternsRoundTrip) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    if (is_nonfinite_bits(DType::fp16, b)) {
      EXPECT_FALSE(std::isfinite(fp16_bits_to_double(b)));
    } else {
      ASSERT_EQ(round_to_fp16_bits(fp16_bits_to_double(b)), b) << std::hex << bits;
    }
    if (is_nonfinite_bits(DType::bf16, b)) {
      EXPECT_FALSE(std::isfinite(bf16_bits_to_double(b)));
    } else {
      ASSERT_EQ(round_to_bf16_bits(bf16_bits_to_double(b)), b) << std::hex << bits;
    }
  }
}

TEST(FpConvert, Fp16MatchesCompilerFloat16) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    _Float16 h;
    std::memcpy(&h, &b, 2);
    if (is_nonfinite_bits(DType::fp16, b)) continue;
    ASSERT_EQ(fp16_bits_to_double(b), static_cast<double>(h)) << bits;
  }
  // Random floats over the whole fp16 range, subnormals and overflow included.
  std::uniform_real_distribution<double> exponent(-27.0, 17.0);
  for (int n = 0; n < 200000; ++n) {
    const float x = static_cast<float>((rng()() & 1 ? 1 : -1) * std::exp2(exponent(rng())));
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t expected;
    std::memcpy(&expected, &h, 2);
    ASSERT_EQ(round_to_fp16_bits(x), expected) << x;
  }
}

TEST(FpConvert, Bf16MatchesBitTrickAndFp32MatchesCast) {
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int n = 0; n < 200000; ++n) {
    const uint32_t fbits = any_bits(rng());
    float f;
    std::memcpy(&f, &fbits, 4);
    if (std::isnan(f)) continue;
    const uint16_t expected = static_cast<uint16_t>((fbits + 0x7FFFu + ((fbits >> 16) & 1u)) >> 16);
    ASSERT_EQ(round_to_bf16_bits(f), expected) << std::hex << fbits;
    ASSERT_EQ(round_to_fp32_bits(f), fbits);
    const double d = static_cast<double>(f) * (1.0 + std::ldexp(static_cast<double>(any_bits(rng())), -60));
    const float cast = static_cast<float>(d);
    uint32_t cast_bits;
    std::memcpy(&cast_bits, &cast, 4);
    ASSERT_EQ(round_to_fp32_bits(d), cast_bits) << d;
  }
}

TEST(FpConvert, KnownValuesAndTies) {
  EXPECT_EQ(round_to_fp16_bits(1.0 / 3.0), 0x3555);
  EXPECT_EQ(round_to_bf16_bits(1.0 / 3.0), 0x3EAB);
  EXPECT_EQ(round_to_fp16_bits(-1.0 / 3.0), 0xB555);
  EXPECT_EQ(round_to_fp16_bits(1.0 + std::ldexp(1, -11)), 0x3C00);      // tie to even (down)
  EXPECT_EQ(round_to_fp16_bits(1.0 + 3 * std::ldexp(1, -11)), 0x3C02);  // tie to even (up)
  EXPECT_EQ(round_to_bf16_bits(1.0 + std::ldexp(1, -8)), 0x3F80);
  EXPECT_EQ(round_to_bf16_bits(1.0 + 3 * std::ldexp(1, -8)), 0x3F82);
  EXPECT_EQ(round_to_fp16_bits(65519.0), 0x7BFF);  // below the midpoint: max finite
  EXPECT_EQ(round_to_fp16_bits(65520.0), 0x7C00);  // midpoint to an odd max: inf
  EXPECT_EQ(round_to_fp16_bits(std::ldexp(1, -24)), 0x0001);
  EXPECT_EQ(round_to_fp16_bits(std::ldexp(1, -25)), 0x0000);          // tie to even zero
  EXPECT_EQ(round_to_fp16_bits(3 * std::ldexp(1, -26)), 0x0001);
  EXPECT_EQ(round_to_fp16_bits(-0.0), 0x8000);
  EXPECT_EQ(round_to_bf16_bits(std::numeric_limits<double>::infinity()), 0x7F80);
  EXPECT_TRUE(std::isnan(bf16_bits_to_double(round_to_bf16_bits(std::nan("")))));
  EXPECT_EQ(fp16_bits_to_double(0x3555), 0.333251953125);
  EXPECT_EQ(round_to_dtype(DType::bf16, 1.0 / 3.0), 0.333984375);
}

TEST(FpConvert, UlpDistanceCountsThroughZero) {
  EXPECT_EQ(ulp_distance(DType::fp16, 0x0000, 0x8000), 0);
  EXPECT_EQ(ulp_distance(DType::fp16, 0x0001, 0x8001), 2);
  EXPECT_EQ(ulp_distance(DType::bf16, 0x3F80, 0x3F81), 1);
  EXPECT_EQ(ulp_distance(DType::bf16, 0x3F81, 0x3F80), 1);
  EXPECT_EQ(ulp_distance(DType::fp16, 0x3C00, 0xBC00), 2 * 0x3C00);
  EXPECT_EQ(ulp_distance(DType::fp32, 0x3F800000, 0x3F800003), 3);
  EXPECT_EQ(ulp_distance(DType::fp16, 0x7E00, 0x7E00), std::numeric_limits<int64_t>::max());  // NaN
  EXPECT_EQ(ulp_distance(DType::fp16, 0x7C00, 0x7C00), 0);  // same inf
  EXPECT_EQ(ulp_distance(DType::fp16, 0x7C00, 0x7BFF), std::numeric_limits<int64_t>::max());
}

}  // namespace
