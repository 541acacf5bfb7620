// Tests of the host storage-type conversions (core/include/ropejit/fp_convert.h):
// every fp16/bf16/fp8 pattern, agreement with independent converters, ties and ulp distances.
// ropejit-tier: unit
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

// --- FP8 (OCP e4m3 "FN" and e5m2) ---

constexpr Fp8Format kFp8Formats[] = {Fp8Format::e4m3, Fp8Format::e5m2};

const char* fp8_name(Fp8Format f) { return f == Fp8Format::e4m3 ? "e4m3" : "e5m2"; }
uint8_t fp8_max_code(Fp8Format f) { return f == Fp8Format::e4m3 ? 0x7e : 0x7b; }

TEST(FpConvert, Fp8AllFiniteCodesRoundTrip) {
  for (Fp8Format f : kFp8Formats) {
    int finite = 0;
    for (uint32_t bits = 0; bits < 256; ++bits) {
      const uint8_t b = static_cast<uint8_t>(bits);
      const double v = fp8_bits_to_double(f, b);
      if (!std::isfinite(v)) continue;
      ++finite;
      ASSERT_EQ(round_to_fp8_bits(f, v), b) << fp8_name(f) << " " << std::hex << bits;
      EXPECT_EQ(std::signbit(v), (b & 0x80) != 0) << fp8_name(f) << " " << std::hex << bits;
    }
    // e4m3 loses only S.1111.111 (NaN); e5m2 loses S.11111.xx (inf and three NaNs).
    EXPECT_EQ(finite, f == Fp8Format::e4m3 ? 254 : 248) << fp8_name(f);
    // The positive finite codes are contiguous and increasing.
    for (int c = 0; c < fp8_max_code(f); ++c)
      EXPECT_LT(fp8_bits_to_double(f, static_cast<uint8_t>(c)),
                fp8_bits_to_double(f, static_cast<uint8_t>(c + 1))) << fp8_name(f) << " " << c;
  }
  // Non-finite codes.
  EXPECT_TRUE(std::isnan(fp8_bits_to_double(Fp8Format::e4m3, 0x7f)));
  EXPECT_TRUE(std::isnan(fp8_bits_to_double(Fp8Format::e4m3, 0xff)));
  EXPECT_EQ(fp8_bits_to_double(Fp8Format::e5m2, 0x7c), std::numeric_limits<double>::infinity());
  EXPECT_EQ(fp8_bits_to_double(Fp8Format::e5m2, 0xfc), -std::numeric_limits<double>::infinity());
  for (uint8_t b : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff})
    EXPECT_TRUE(std::isnan(fp8_bits_to_double(Fp8Format::e5m2, b))) << int(b);
  // e5m2 is the top byte of fp16: every pattern (inf and NaN included) decodes alike.
  for (uint32_t bits = 0; bits < 256; ++bits) {
    const double v8 = fp8_bits_to_double(Fp8Format::e5m2, static_cast<uint8_t>(bits));
    const double v16 = fp16_bits_to_double(static_cast<uint16_t>(bits << 8));
    if (std::isnan(v16)) EXPECT_TRUE(std::isnan(v8)) << bits;
    else EXPECT_EQ(v8, v16) << bits;
  }
}

TEST(FpConvert, Fp8KnownValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  EXPECT_EQ(round_to_fp8_bits(e4, 448.0), 0x7e);
  EXPECT_EQ(round_to_fp8_bits(e4, 449.0), 0x7e);   // saturating
  EXPECT_EQ(round_to_fp8_bits(e4, 464.0), 0x7e);   // the midpoint past max: still max
  EXPECT_EQ(round_to_fp8_bits(e4, 1e9), 0x7e);
  EXPECT_EQ(round_to_fp8_bits(e4, inf), 0x7e);
  EXPECT_EQ(round_to_fp8_bits(e4, -inf), 0xfe);
  EXPECT_EQ(round_to_fp8_bits(e4, -1e300), 0xfe);
  EXPECT_EQ(round_to_fp8_bits(e4, std::ldexp(1, -9)), 0x01);       // smallest subnormal
  EXPECT_EQ(round_to_fp8_bits(e4, std::ldexp(1, -10)), 0x00);      // tie to even zero
  EXPECT_EQ(round_to_fp8_bits(e4, -std::ldexp(1, -10)), 0x80);
  EXPECT_EQ(round_to_fp8_bits(e4, 3 * std::ldexp(1, -10)), 0x02);  // tie to even (up)
  EXPECT_EQ(round_to_fp8_bits(e4, std::ldexp(1, -300)), 0x00);
  EXPECT_EQ(round_to_fp8_bits(e4, std::ldexp(1, -6)), 0x08);       // smallest normal
  EXPECT_EQ(round_to_fp8_bits(e4, 7 * std::ldexp(1, -9)), 0x07);   // largest subnormal
  EXPECT_EQ(round_to_fp8_bits(e4, 1.0), 0x38);
  EXPECT_EQ(round_to_fp8_bits(e4, -1.0), 0xb8);
  EXPECT_EQ(round_to_fp8_bits(e4, 1.0 / 3.0), 0x2b);  // 0.34375 (0.3125 is further)
  EXPECT_EQ(round_to_fp8_bits(e4, 0.0), 0x00);
  EXPECT_EQ(round_to_fp8_bits(e4, -0.0), 0x80);
  EXPECT_EQ(fp8_bits_to_double(e4, 0x7e), 448.0);
  EXPECT_EQ(fp8_bits_to_double(e4, 0x01), std::ldexp(1, -9));
  EXPECT_EQ(fp8_bits_to_double(e4, 0x2b), 0.34375);
  EXPECT_EQ(round_to_fp8_bits(e5, 57344.0), 0x7b);
  EXPECT_EQ(round_to_fp8_bits(e5, 61440.0), 0x7b);  // the midpoint past max: still max
  EXPECT_EQ(round_to_fp8_bits(e5, 65536.0), 0x7b);
  EXPECT_EQ(round_to_fp8_bits(e5, inf), 0x7b);
  EXPECT_EQ(round_to_fp8_bits(e5, -inf), 0xfb);
  EXPECT_EQ(round_to_fp8_bits(e5, 1.0), 0x3c);
  EXPECT_EQ(round_to_fp8_bits(e5, -1.0), 0xbc);
  EXPECT_EQ(round_to_fp8_bits(e5, std::ldexp(1, -16)), 0x01);       // smallest subnormal
  EXPECT_EQ(round_to_fp8_bits(e5, std::ldexp(1, -17)), 0x00);       // tie to even zero
  EXPECT_EQ(round_to_fp8_bits(e5, 3 * std::ldexp(1, -17)), 0x02);   // tie to even (up)
  EXPECT_EQ(round_to_fp8_bits(e5, std::ldexp(1, -14)), 0x04);       // smallest normal
  EXPECT_EQ(round_to_fp8_bits(e5, -0.0), 0x80);
  EXPECT_EQ(fp8_bits_to_double(e5, 0x7b), 57344.0);
  // NaN: 0x7f with the input's sign.
  for (Fp8Format f : kFp8Formats) {
    EXPECT_EQ(round_to_fp8_bits(f, std::numeric_limits<double>::quiet_NaN()), 0x7f);
    EXPECT_EQ(round_to_fp8_bits(f, -std::numeric_limits<double>::quiet_NaN()), 0xff);
    EXPECT_TRUE(std::isnan(fp8_bits_to_double(f, round_to_fp8_bits(f, std::nan("")))));
  }
}

TEST(FpConvert, Fp8MidpointsRoundToEven) {
  for (Fp8Format f : kFp8Formats) {
    for (int c = 0; c < fp8_max_code(f); ++c) {
      const double lo = fp8_bits_to_double(f, static_cast<uint8_t>(c));
      const double hi = fp8_bits_to_double(f, static_cast<uint8_t>(c + 1));
      const double mid = (lo + hi) / 2;
      const int even = c % 2 == 0 ? c : c + 1;
      for (double sign : {1.0, -1.0}) {
        const int s = sign < 0 ? 0x80 : 0;
        SCOPED_TRACE(testing::Message() << fp8_name(f) << " code " << c << " sign " << sign);
        EXPECT_EQ(round_to_fp8_bits(f, sign * mid), s | even);
        EXPECT_EQ(round_to_fp8_bits(f, sign * std::nextafter(mid, 2 * hi)), s | (c + 1));
        EXPECT_EQ(round_to_fp8_bits(f, sign * std::nextafter(mid, 0.0)), s | c);
        EXPECT_EQ(round_to_fp8_bits(f, sign * std::nextafter(lo, 2 * hi)), s | c);
        EXPECT_EQ(round_to_fp8_bits(f, sign * std::nextafter(hi, 0.0)), s | (c + 1));
      }
    }
  }
}

TEST(FpConvert, Fp8UlpDistanceCountsThroughZero) {
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(fp8_ulp_distance(e4, 0x00, 0x80), 0);
  EXPECT_EQ(fp8_ulp_distance(e4, 0x01, 0x81), 2);
  EXPECT_EQ(fp8_ulp_distance(e4, 0x81, 0x01), 2);
  EXPECT_EQ(fp8_ulp_distance(e4, 0x38, 0x39), 1);
  EXPECT_EQ(fp8_ulp_distance(e4, 0x38, 0xb8), 2 * 0x38);
  EXPECT_EQ(fp8_ulp_distance(e4, 0x7e, 0xfe), 2 * 0x7e);
  EXPECT_EQ(fp8_ulp_distance(e4, 0x7f, 0x7f), kMax);  // NaN
  EXPECT_EQ(fp8_ulp_distance(e4, 0x7f, 0x7e), kMax);
  EXPECT_EQ(fp8_ulp_distance(e5, 0x7c, 0x7c), 0);     // same inf
  EXPECT_EQ(fp8_ulp_distance(e5, 0x7c, 0xfc), kMax);
  EXPECT_EQ(fp8_ulp_distance(e5, 0x7c, 0x7b), kMax);
  EXPECT_EQ(fp8_ulp_distance(e5, 0x7d, 0x7d), kMax);  // NaN
  EXPECT_EQ(fp8_ulp_distance(e5, 0x04, 0x83), 7);
  EXPECT_EQ(fp8_ulp_distance(e5, 0x7b, 0xfb), 2 * 0x7b);
}

}  // namespace
