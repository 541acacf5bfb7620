// The QK-norm's inverse square root on the host backend (templates/ropejit/numeric.cuh
// inv_sqrt_rn, compiled for the host in tests/support/fp8_kernel.cpp) against an exact oracle:
// 1 / sqrt(x) correctly rounded to nearest, as the GPU's __frsqrt_rn is specified, decided in
// integers (no floating-point square root): r is the answer when 1 / sqrt(x) lies strictly
// between the midpoints around r, i.e. lo^2 x < 1 < hi^2 x (an exact tie cannot occur).
// ropejit-tier: unit
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

// tests/support/fp8_kernel.cpp
float kernel_inv_sqrt(float x);

namespace {

using u128 = unsigned __int128;

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

// A positive finite float as M * 2^e.
void decompose(float f, uint64_t& m, int& e) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  const int biased = static_cast<int>(b >> 23 & 0xffu);
  m = b & 0x7fffffu;
  if (biased != 0) m |= 0x800000u;
  e = biased == 0 ? -149 : biased - 150;
}

// The sign of m^2 * x - 1 for m = M * 2^em and x = X * 2^ex, exactly (M < 2^26, X < 2^24).
int sign_of_square_times_minus_one(uint64_t m, int em, uint64_t x, int ex) {
  const u128 p = static_cast<u128>(m) * m * x;
  const int e = 2 * em + ex;  // p * 2^e against 1
  if (e >= 0) return 1;       // p >= 1
  if (-e >= 127) return -1;   // p < 2^76 <= 2^-e
  const u128 one = static_cast<u128>(1) << -e;
  return p > one ? 1 : (p < one ? -1 : 0);
}

// The midpoint of two adjacent positive floats a < b as M * 2^e.
void midpoint(float a, float b, uint64_t& m, int& e) {
  uint64_t ma, mb;
  int ea, eb;
  decompose(a, ma, ea);
  decompose(b, mb, eb);
  const int low = ea < eb ? ea : eb;
  m = (ma << (ea - low)) + (mb << (eb - low));
  e = low - 1;
}

// True when r is 1 / sqrt(x) rounded to nearest (x positive and finite, r positive and finite).
bool correctly_rounded(float x, float r) {
  if (!(r > 0.0f) || std::isinf(r)) return false;
  uint64_t mx, ml, mh;
  int ex, el, eh;
  decompose(x, mx, ex);
  midpoint(std::nextafter(r, 0.0f), r, ml, el);
  midpoint(r, std::nextafter(r, std::numeric_limits<float>::infinity()), mh, eh);
  return sign_of_square_times_minus_one(ml, el, mx, ex) < 0 && sign_of_square_times_minus_one(mh, eh, mx, ex) > 0;
}

TEST(InvSqrtKernel, OracleRejectsAnUlpOff) {
  // The oracle itself: the true answer passes, its neighbours fail (a checker that cannot fail
  // would prove nothing).
  for (const float x : {2.0f, 3.0f, 0.7f, 1e-30f, 1e20f, from_bits(1), from_bits(0x7f7fffffu)}) {
    const float r = kernel_inv_sqrt(x);
    EXPECT_TRUE(correctly_rounded(x, r)) << x;
    EXPECT_FALSE(correctly_rounded(x, std::nextafter(r, 0.0f))) << x;
    EXPECT_FALSE(correctly_rounded(x, std::nextafter(r, std::numeric_limits<float>::infinity()))) << x;
  }
}

TEST(InvSqrtKernel, StridedSweepOfPositiveFloatsIsCorrectlyRounded) {
  // Every positive finite float whose bit pattern is a multiple of 61 (subnormals included):
  // 35M inputs, a prime stride through every exponent and mantissa residue. The whole range
  // (2^31 inputs, docs/PERF.md session 31): ROPEJIT_INV_SQRT_STRIDE=1.
  uint32_t stride = 61;
  if (const char* env = std::getenv("ROPEJIT_INV_SQRT_STRIDE")) {
    char* end = nullptr;
    const long value = std::strtol(env, &end, 10);
    ASSERT_TRUE(end != env && *end == '\0' && value >= 1 && value < 0x7f800000L)
        << "ROPEJIT_INV_SQRT_STRIDE=" << env << ": must be a positive integer below 2139095040";
    stride = static_cast<uint32_t>(value);
  }
  uint64_t checked = 0, wrong = 0;
  for (uint32_t bits = stride; bits < 0x7f800000u; bits += stride) {
    const float x = from_bits(bits);
    ++checked;
    if (!correctly_rounded(x, kernel_inv_sqrt(x)) && ++wrong <= 5)
      ADD_FAILURE() << "inv_sqrt_rn(" << std::hexfloat << x << ") = " << kernel_inv_sqrt(x);
  }
  EXPECT_EQ(wrong, 0u) << "of " << checked;
  std::printf("inv_sqrt_rn sweep: %llu floats, stride %u\n", static_cast<unsigned long long>(checked), stride);
}

TEST(InvSqrtKernel, SpecialValues) {
  EXPECT_EQ(kernel_inv_sqrt(0.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(kernel_inv_sqrt(-0.0f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(kernel_inv_sqrt(std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(kernel_inv_sqrt(-1.0f)));
  EXPECT_TRUE(std::isnan(kernel_inv_sqrt(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(kernel_inv_sqrt(4.0f), 0.5f);
  EXPECT_EQ(kernel_inv_sqrt(0.25f), 2.0f);
}

}  // namespace
