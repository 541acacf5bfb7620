// The kernel's float -> FP8 conversions (float_to_e4m3_bits / float_to_e5m2_bits in
// templates/ropejit/numeric.cuh, compiled for the host in tests/support/fp8_kernel.cpp) against
// the independent host oracle round_to_fp8_bits (core/include/ropejit/fp_convert.h): bit for
// bit for every non-NaN input; NaN only has to stay NaN.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "ropejit/fp_convert.h"

// tests/support/fp8_kernel.cpp
uint8_t kernel_e4m3(float x);
uint8_t kernel_e5m2(float x);

using namespace ropejit::ref;

namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::e4m3, Fp8Format::e5m2};

const char* name(Fp8Format f) { return f == Fp8Format::e4m3 ? "e4m3" : "e5m2"; }
uint8_t kernel(Fp8Format f, float x) {
  return f == Fp8Format::e4m3 ? kernel_e4m3(x) : kernel_e5m2(x);
}
uint8_t max_code(Fp8Format f) { return f == Fp8Format::e4m3 ? 0x7e : 0x7b; }

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}
uint32_t to_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return bits;
}

/// Compares the kernel with the oracle on a set of inputs; reports the first few mismatches.
class Checker {
 public:
  explicit Checker(Fp8Format f) : f_(f) {}
  void check(float x) {
    ++checked_;
    const uint8_t got = kernel(f_, x);
    if (std::isnan(x)) {
      if (!std::isnan(fp8_bits_to_double(f_, got))) report(x, got, "a NaN");
      return;
    }
    const uint8_t want = round_to_fp8_bits(f_, static_cast<double>(x));
    if (got != want) report(x, got, want);
  }
  void check_both_signs(float x) {
    check(x);
    check(-x);
  }
  ~Checker() {
    EXPECT_EQ(mismatches_, 0) << name(f_) << ": " << mismatches_ << " of " << checked_
                              << " inputs differ from the oracle";
  }

 private:
  void report(float x, uint8_t got, int want) {
    char expected[8];
    std::snprintf(expected, sizeof expected, "0x%02x", want);
    report(x, got, expected);
  }
  void report(float x, uint8_t got, const char* expected) {
    if (++mismatches_ > 10) return;
    char line[160];
    std::snprintf(line, sizeof line, "%s: input %a (bits 0x%08x): kernel 0x%02x, oracle %s",
                  name(f_), static_cast<double>(x), to_bits(x), got, expected);
    ADD_FAILURE() << line;
  }
  Fp8Format f_;
  int64_t checked_ = 0;
  int64_t mismatches_ = 0;
};

TEST(Fp8Kernel, StridedSweepOfAllFloatsMatchesOracle) {
  // Every float whose bit pattern is a multiple of 97 (both signs, NaN and inf included):
  // 44M inputs, a prime stride so every mantissa residue and exponent is visited.
  constexpr uint64_t kStride = 97;
  const auto start = std::chrono::steady_clock::now();
  Checker e4m3(Fp8Format::e4m3), e5m2(Fp8Format::e5m2);
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += kStride) {
    const float x = from_bits(static_cast<uint32_t>(bits));
    e4m3.check(x);
    e5m2.check(x);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("fp8 kernel sweep: %llu floats, %.2f s\n",
              static_cast<unsigned long long>(0xffffffffull / kStride + 1), seconds);
}

TEST(Fp8Kernel, MidpointsAndTheirNeighboursMatchOracle) {
  for (Fp8Format f : kFormats) {
    Checker checker(f);
    // Every pair of neighbouring finite codes, plus max and the value one step past it (the
    // saturation edge: its midpoint still gives max).
    auto value = [f](int code) { return fp8_bits_to_double(f, static_cast<uint8_t>(code)); };
    for (int c = 0; c <= max_code(f); ++c) {
      const double lo = value(c);
      const double hi = c < max_code(f) ? value(c + 1) : lo + (lo - value(c - 1));
      const float mid = static_cast<float>((lo + hi) / 2);
      ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2) << "midpoint not exact in float";
      const float inf = std::numeric_limits<float>::infinity();
      for (float x : {mid, std::nextafterf(mid, inf), std::nextafterf(mid, 0.0f),
                      static_cast<float>(lo), std::nextafterf(static_cast<float>(lo), inf),
                      std::nextafterf(static_cast<float>(hi), 0.0f), static_cast<float>(hi)})
        checker.check_both_signs(x);
      // A few float ulps either side of the midpoint.
      float up = mid, down = mid;
      for (int k = 0; k < 64; ++k) {
        up = std::nextafterf(up, inf);
        down = std::nextafterf(down, 0.0f);
        checker.check_both_signs(up);
        checker.check_both_signs(down);
      }
    }
  }
}

TEST(Fp8Kernel, SubnormalRangeMatchesOracle) {
  for (Fp8Format f : kFormats) {
    Checker checker(f);
    // Every 61st float from a quarter of the smallest FP8 subnormal to twice the smallest normal.
    const double smallest_subnormal = fp8_bits_to_double(f, 0x01);
    const double smallest_normal = fp8_bits_to_double(f, f == Fp8Format::e4m3 ? 0x08 : 0x04);
    const uint32_t first = to_bits(static_cast<float>(smallest_subnormal / 4));
    const uint32_t last = to_bits(static_cast<float>(2 * smallest_normal));
    for (uint32_t bits = first; bits <= last; bits += 61) checker.check_both_signs(from_bits(bits));
    // Float subnormals, FLT_MIN, and the zeros.
    for (uint32_t bits = 0; bits < 0x00800000u; bits += 4099)
      checker.check_both_signs(from_bits(bits));
    const float flt_min = std::numeric_limits<float>::min();
    for (float x : {0.0f, std::numeric_limits<float>::denorm_min(), flt_min,
                    std::nextafterf(flt_min, 0.0f)})
      checker.check_both_signs(x);
  }
  EXPECT_EQ(kernel_e4m3(0.0f), 0x00);
  EXPECT_EQ(kernel_e4m3(-0.0f), 0x80);
  EXPECT_EQ(kernel_e5m2(-0.0f), 0x80);
  EXPECT_EQ(kernel_e4m3(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(kernel_e4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(kernel_e4m3(3 * std::ldexp(1.0f, -10)), 0x02);
  EXPECT_EQ(kernel_e5m2(std::ldexp(1.0f, -16)), 0x01);
}

TEST(Fp8Kernel, SaturationInfinityAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float big = std::numeric_limits<float>::max();
  for (Fp8Format f : kFormats) {
    Checker checker(f);
    const float max = static_cast<float>(fp8_bits_to_double(f, max_code(f)));
    for (float x : {max, std::nextafterf(max, inf), std::nextafterf(max, 0.0f), 2 * max, big, inf})
      checker.check_both_signs(x);
    // Every float above max up to inf (stride 1009), all of which saturate.
    for (uint32_t bits = to_bits(max); bits <= 0x7f800000u; bits += 1009)
      checker.check_both_signs(from_bits(bits));
    EXPECT_EQ(kernel(f, inf), max_code(f)) << name(f);
    EXPECT_EQ(kernel(f, -inf), 0x80 | max_code(f)) << name(f);
    EXPECT_EQ(kernel(f, big), max_code(f)) << name(f);
    // NaN: quiet, signalling, with payloads, either sign; only NaN-ness is required.
    for (uint32_t bits : {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fffffffu, 0x7fc12345u})
      for (uint32_t sign : {0u, 0x80000000u}) {
        const uint8_t got = kernel(f, from_bits(bits | sign));
        EXPECT_TRUE(std::isnan(fp8_bits_to_double(f, got)))
            << name(f) << " NaN 0x" << std::hex << (bits | sign) << " gave 0x" << int(got);
      }
  }
  EXPECT_EQ(kernel_e4m3(448.0f), 0x7e);
  EXPECT_EQ(kernel_e4m3(449.0f), 0x7e);
  EXPECT_EQ(kernel_e4m3(464.0f), 0x7e);
  EXPECT_EQ(kernel_e4m3(1e9f), 0x7e);
  EXPECT_EQ(kernel_e5m2(57344.0f), 0x7b);
  EXPECT_EQ(kernel_e5m2(61440.0f), 0x7b);
  EXPECT_EQ(kernel_e4m3(1.0f), 0x38);
  EXPECT_EQ(kernel_e4m3(-1.0f), 0xb8);
  EXPECT_EQ(kernel_e5m2(1.0f), 0x3c);
}

}  // namespace
