#pragma once
// NVFP4 cache values: e2m1 codes (1 sign, 2 exponent, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6),
// two a byte with element 2i in the low nibble, and e4m3 block scales (docs/spec.md "NVFP4").
// Blackwell family targets (sm_100f, sm_120f, ...) round with cvt.rn.satfinite.e2m1x2.f32;
// every other arch and the host backend with the FP8 fma rounding at E = 2, M = 1: the same
// codes for every non-NaN float (tests/test_nvfp4_kernel.cpp sweeps them).

#include "ropejit/numeric.cuh"

namespace ropejit {

#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__) &&                            \
    ((defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000) || \
     (defined(__CUDA_ARCH_SPECIFIC__) && __CUDA_ARCH_SPECIFIC__ >= 1000))
#define ROPEJIT_E2M1_CVT 1
#endif

// float -> e2m1 code: round to nearest even, saturating to +-6 (infinities too). e2m1 has no NaN:
// the integer path gives NaN the code of 6 with its sign bit (the hardware's choice is its own).
__device__ __forceinline__ u32 float_to_e2m1_bits(float x) {
  const u32 code = (fp8_magnitude_unbiased<2, 1>(x) + Fp8Format<2, 1>::kOffset) & 0x7u;
  return code | ((__float_as_uint(x) >> 28) & 0x8u);
}

// N (2, 4 or 8) floats as e2m1 codes, element i in bits [4i, 4i + 4).
template <int N>
__device__ __forceinline__ u32 e2m1_bits(const float* in) {
  static_assert(N == 2 || N == 4 || N == 8, "whole bytes of a 16-byte vector");
  u32 word = 0;
#ifdef ROPEJIT_E2M1_CVT
#pragma unroll
  for (int i = 0; i < N; i += 2) {  // cvt puts its first source in the high nibble
    u32 pair;
    asm("{.reg .b8 b; cvt.rn.satfinite.e2m1x2.f32 b, %1, %2; cvt.u32.u8 %0, b;}" : "=r"(pair) : "f"(in[i + 1]), "f"(in[i]));
    word |= pair << (4 * i);
  }
#else
#pragma unroll
  for (int i = 0; i < N; ++i) word |= float_to_e2m1_bits(in[i]) << (4 * i);
#endif
  return word;
}

// Stores N codes (N / 2 bytes, aligned to them) at `dst`.
template <int N>
__device__ __forceinline__ void store_e2m1(u8* dst, const float* in) {
  const u32 word = e2m1_bits<N>(in);
  if constexpr (N == 8) *(u32*)dst = word;
  else if constexpr (N == 4) *(u16*)dst = (u16)word;
  else *dst = (u8)word;
}

// The value of a non-negative finite e4m3 code (a block scale: code < 0x7f), exactly.
__device__ __forceinline__ float e4m3_scale_value(u32 code) {
  return code >= 8u ? __uint_as_float((((code >> 3) + 120u) << 23) | ((code & 7u) << 20)) : (float)code * 0x1p-9f;
}

// fl(a / sf) for a normal a > 0 (the launch checks that 1 / k_scale is) and an e4m3 block scale
// sf > 0, without a division's slow path (about 100 instructions). sf = k * 2^e with k in [8, 16)
// (three significand bits) and a = m * 2^E (1 <= m < 2): m / k is rounded correctly by Markstein's
// step (y = fl(1/k), q = fl(m*y) within an ulp, the residual m - k*q exact, fl(q + r*y) = fl(m/k)),
// then scaled by 2^(E - e) in two exact products: the quotient is normal or overflows (docs/spec.md
// "NVFP4"), and an overflow rounds to infinity as the quotient does. Every k and m: the unit test.
__device__ __forceinline__ float nvfp4_divide_by_scale(float a, float sf) {
  const u32 sf_bits = __float_as_uint(sf), bits = __float_as_uint(a);
  const u32 i = (sf_bits >> 20) & 7u;  // k = 8 + i; fl(1/k) by a select tree (no table in memory)
  const float y01 = i & 1u ? 1.0f / 9 : 1.0f / 8, y23 = i & 1u ? 1.0f / 11 : 1.0f / 10;
  const float y45 = i & 1u ? 1.0f / 13 : 1.0f / 12, y67 = i & 1u ? 1.0f / 15 : 1.0f / 14;
  const float y = i & 4u ? (i & 2u ? y67 : y45) : (i & 2u ? y23 : y01);
  const float k = (float)(8u + i);
  const float m = __uint_as_float((bits & 0x007fffffu) | 0x3f800000u);
  const float q = m * y;
  const float quotient = fmaf(fmaf(-k, q, m), y, q);
  const int n = (int)(bits >> 23) - (int)(sf_bits >> 23) + 3, n1 = n / 2;  // E - e
  return quotient * __uint_as_float((u32)(n1 + 127) << 23) * __uint_as_float((u32)(n - n1 + 127) << 23);
}

// One block's scale and multiplier: sf = e4m3(inv_global * (amax * fl(1/6))), rounded to nearest
// even and saturating (TensorRT-LLM's and vLLM's formula, with correctly rounded products where
// they take approximate reciprocals); the values then take fl(inv_global / sf), or 0 when sf is 0.
__device__ __forceinline__ u32 nvfp4_block_scale(float amax, float inv_global, float& multiplier) {
  const u32 code = float_to_e4m3_bits(inv_global * (amax * (1.0f / 6.0f)));
  multiplier = code != 0u ? nvfp4_divide_by_scale(inv_global, e4m3_scale_value(code)) : 0.0f;
  return code;
}

}  // namespace ropejit
