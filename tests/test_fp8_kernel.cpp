// The kernel's FP8 conversions (templates/ropejit/numeric.cuh, compiled for the host in
// tests/support/fp8_kernel.cpp: the path sm_80 takes, bit moves and one fma, no FP8 instructions)
// against the independent host oracle (core/include/ropejit/fp_convert.h): float -> FP8 bit for
// bit for every non-NaN input, NaN only has to stay NaN; FP8 -> float exact for every code.
// ropejit-tier: conformance
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ropejit/fp_convert.h"

// tests/support/fp8_kernel.cpp
uint8_t kernel_e4m3(float x);
uint8_t kernel_e5m2(float x);
void kernel_fp8x16_to_floats(bool e4m3, const uint32_t* words, float* out);
void kernel_floats_to_fp8x16(bool e4m3, const float* in, uint32_t* words);

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

// Every pair of codes side by side in every lane of a 16-byte vector, decoded as the kernels
// load it: the value of each code exactly, NaN (e4m3 S.1111.111, e5m2's) as NaN, signed zeros.
TEST(Fp8Kernel, EveryCodeDecodesExactlyInEveryLane) {
  for (Fp8Format f : kFormats) {
    int mismatches = 0;
    for (uint32_t pair = 0; pair < 0x10000u; ++pair) {
      for (int shift : {0, 8}) {  // the pair at even lanes, then at odd ones
        uint8_t bytes[16];
        for (int i = 0; i < 16; ++i) bytes[i] = static_cast<uint8_t>(pair >> ((8 * i + shift) % 16));
        uint32_t words[4];
        std::memcpy(words, bytes, sizeof words);
        float got[16];
        kernel_fp8x16_to_floats(f == Fp8Format::e4m3, words, got);
        for (int i = 0; i < 16; ++i) {
          const double want = fp8_bits_to_double(f, bytes[i]);
          const bool same = std::isnan(want) ? std::isnan(got[i]) : to_bits(got[i]) == to_bits(static_cast<float>(want));
          if (!same && ++mismatches <= 10)
            ADD_FAILURE() << name(f) << " code 0x" << std::hex << int(bytes[i]) << " in lane " << std::dec << i
                          << ": kernel " << got[i] << ", exact " << want;
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << name(f);
  }
}

// A float the rounding treats specially, or any float: zeros, subnormals, values next to FP8
// midpoints, the saturation edge, infinities, NaNs with any payload and sign.
float random_fp8_input(Fp8Format f, std::mt19937_64& rng) {
  const uint32_t bits = static_cast<uint32_t>(rng());
  const uint32_t sign = bits & 0x80000000u;
  switch (rng() % 6) {
    case 0: return from_bits(bits);  // any float
    case 1: {  // within a few ulps of a midpoint between neighbouring codes
      const int code = static_cast<int>(rng() % max_code(f));
      const float mid = static_cast<float>((fp8_bits_to_double(f, code) + fp8_bits_to_double(f, code + 1)) / 2);
      return from_bits((to_bits(mid) + static_cast<uint32_t>(rng() % 9) - 4u) | sign);
    }
    case 2: return from_bits((bits & 0x80ffffffu) | (static_cast<uint32_t>(100 + rng() % 40) << 23));  // FP8's range
    case 3: return from_bits(sign | 0x7f800000u | (bits & 0x7fffffu));  // infinity or NaN
    case 4: return from_bits(sign | (bits & 0x7fffffu));                // float subnormal or zero
    default: return from_bits(sign | (to_bits(static_cast<float>(fp8_bits_to_double(f, max_code(f)))) + (bits & 0xfffffu) - 0x80000u));
  }
}

// The 16-byte vector store (four codes a word, magnitudes and signs gathered bytewise) gives
// every lane the code the scalar conversion and the oracle give, whatever its neighbours are.
TEST(Fp8Kernel, VectorRoundingMatchesScalarInEveryLane) {
  const uint64_t seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  std::mt19937_64 rng(seed);
  for (Fp8Format f : kFormats) {
    int mismatches = 0;
    for (int n = 0; n < 200000; ++n) {
      float in[16];
      for (float& x : in) x = random_fp8_input(f, rng);
      uint32_t words[4];
      kernel_floats_to_fp8x16(f == Fp8Format::e4m3, in, words);
      uint8_t got[16];
      std::memcpy(got, words, sizeof got);
      for (int i = 0; i < 16; ++i) {
        const bool ok = std::isnan(in[i]) ? std::isnan(fp8_bits_to_double(f, got[i]))
                                          : got[i] == kernel(f, in[i]) &&
                                                got[i] == round_to_fp8_bits(f, static_cast<double>(in[i]));
        if (!ok && ++mismatches <= 10)
          ADD_FAILURE() << name(f) << " lane " << i << " input bits 0x" << std::hex << to_bits(in[i]) << ": vector 0x"
                        << int(got[i]) << ", scalar 0x" << int(kernel(f, in[i])) << " (seed " << std::dec << seed << ")";
      }
    }
    EXPECT_EQ(mismatches, 0) << name(f) << " (seed " << seed << ")";
  }
}

}  // namespace
