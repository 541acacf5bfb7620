#pragma once
// Storage types and 16-byte vector access. Math is fp32; each value is rounded once on store.
// ROPEJIT_HOST_BACKEND (defined by host_shim.cuh) only swaps the fp16/bf16 conversion
// instructions for bit-exact integer versions; everything else is the same text.

namespace ropejit {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

// Storage tags: the element type in memory.
struct StorageF32 { typedef float raw; };
struct StorageF16 { typedef u16 raw; };
struct StorageBF16 { typedef u16 raw; };
// FP8 KV-cache elements (OCP): e4m3 (max 448, no inf) and e5m2 (max 57344).
struct StorageE4M3 { typedef u8 raw; static constexpr bool kE4M3 = true; };
struct StorageE5M2 { typedef u8 raw; static constexpr bool kE4M3 = false; };
// NVFP4 KV-cache elements: bytes of two e2m1 codes (nvfp4.cuh).
struct StorageE2M1 { typedef u8 raw; };

__device__ __forceinline__ float bf16_bits_to_float(u32 bits) { return __uint_as_float(bits << 16); }

// The least power of two >= a positive normal float (a ue8m0 scale): its exponent, one up if any
// mantissa bit is set.
__device__ __forceinline__ float pow2_ceil(float x) {
  const unsigned bits = __float_as_uint(x);
  return __uint_as_float((bits & 0x7f800000u) + ((bits & 0x007fffffu) ? 0x00800000u : 0u));
}

// float -> bf16 bits, round to nearest even; NaN stays a quiet NaN.
__device__ __forceinline__ u16 float_to_bf16_bits(float f) {
#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
#else
  u32 x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (u16)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (u16)(x >> 16);
#endif
}

__device__ __forceinline__ float f16_bits_to_float(u16 h) {
#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  const u32 sign = (u32)(h & 0x8000u) << 16;
  u32 exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return __uint_as_float(sign);
    int shift = 0;  // subnormal: normalize the mantissa
    while (!(mant & 0x400u)) { mant <<= 1; ++shift; }
    return __uint_as_float(sign | ((u32)(113 - shift) << 23) | ((mant & 0x3ffu) << 13));
  }
  return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
#endif
}

// 1 / sqrt(x) rounded once, to nearest even (a QK-norm's inverse RMS): the GPU's __frsqrt_rn,
// one sequence where 1.0f / sqrtf(x) rounds twice and takes two slow-path subroutines (66-93 SASS
// instructions more in a QK-norm kernel); on the host the double quotient rounded to float, the correctly rounded
// value for every float (checked for all 2^31 positive ones: docs/PERF.md session 31).
__device__ __forceinline__ float inv_sqrt_rn(float x) {
#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__)
  return __frsqrt_rn(x);
#else
  return (float)(1.0 / sqrt((double)x));
#endif
}

// float -> fp16 bits, round to nearest even, overflow to inf.
__device__ __forceinline__ u16 float_to_f16_bits(float f) {
#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__)
  u16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
#else
  const u32 x = __float_as_uint(f);
  const u32 sign = (x >> 16) & 0x8000u;
  const u32 absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return (u16)(sign | 0x7e00u);
  if (absx >= 0x477ff000u) return (u16)(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (absx < 0x38800000u) {                               // below 2^-14: subnormal or zero
    if (absx < 0x33000000u) return (u16)sign;             // below half the smallest subnormal
    const u32 mant = (absx & 0x7fffffu) | 0x800000u;
    const u32 shift = 126u - (absx >> 23);                // 14..24
    u32 r = mant >> shift;
    const u32 rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return (u16)(sign | r);
  }
  u32 r = ((absx >> 13) - (112u << 10));
  const u32 rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return (u16)(sign | r);
#endif
}

// float -> FP8 bits with E exponent and M mantissa bits: round to nearest even, saturating
// (finite values beyond the largest, and infinities, become the largest: PTX's satfinite);
// NaN stays NaN. Without FP8 instructions (sm_80, the host backend) one fma rounds: s = |x|
// clamped to the largest value; p = 2^e, e the exponent of s floored at the smallest normal's;
// t = fma(s, 2^(M-23), p) stays in p's binade, so it rounds s to nearest even at the FP8 spacing
// 2^(e-M) (t's mantissa field counts those steps, with the code's parity); the code
// steps + 2^M (e + bias - 1) is then t + (t >> (23-M)) + kOffset in 7 bits. Equal to the oracle
// on all 2^32 floats (a one-off run: docs/PERF.md; tests/test_fp8_kernel.cpp: a dense stride).
template <int E, int M>
struct Fp8Format {
  static_assert((E == 4 && M == 3) || (E == 5 && M == 2) || (E == 2 && M == 1), "OCP e4m3, e5m2 or e2m1 (FP4)");
  static constexpr int kBias = (1 << (E - 1)) - 1;
  static constexpr u32 kOffset = (u32)(((kBias - 128) * (1 << M)) & 0x7f);
};

// min(|x|, k) for k > 0, NaN when x is NaN (PTX min.NaN: one instruction, the |x| free).
__device__ __forceinline__ float abs_min_keep_nan(float x, float k) {
#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(fabsf(x)), "f"(k));
  return r;
#else
  return x != x ? fabsf(x) : fminf(fabsf(x), k);
#endif
}

// |x| rounded: the code of |x| is (result + kOffset) & 0x7f, NaN included. A NaN |x| stays a
// positive NaN through the fma (t >= 0x7f800001, so t + (t >> (23-M)) does not wrap), above
// every finite magnitude (t < 2^31 - 2^24): one unsigned min takes it to kNan, whose low 7
// bits plus kOffset are 0x7f, the NaN code, instead of a compare and a select.
template <int E, int M>
__device__ __forceinline__ u32 fp8_magnitude_unbiased(float x) {
  typedef Fp8Format<E, M> F;
  constexpr float kMax = E == 4 ? 448.0f : E == 5 ? 57344.0f : 6.0f;  // a constant, not a member: no device global
  constexpr u32 kNan = 0x7f000000u | ((0x7fu - F::kOffset) & 0x7fu);
  const float s = abs_min_keep_nan(x, kMax);
  const float binade = fmaxf(s, __uint_as_float((u32)(128 - F::kBias) << 23));
  const float p = __uint_as_float(__float_as_uint(binade) & 0x7f800000u);
  const u32 t = __float_as_uint(fmaf(s, __uint_as_float((u32)(127 - 23 + M) << 23), p));
  const u32 m = t + (t >> (23 - M));
  return m < kNan ? m : kNan;
}

template <int E, int M>
__device__ __forceinline__ u32 float_to_fp8_bits(float x) {
  const u32 code = (fp8_magnitude_unbiased<E, M>(x) + Fp8Format<E, M>::kOffset) & 0x7fu;
  return code | ((__float_as_uint(x) >> 24) & 0x80u);
}

__device__ __forceinline__ u8 float_to_e4m3_bits(float f) { return (u8)float_to_fp8_bits<4, 3>(f); }
__device__ __forceinline__ u8 float_to_e5m2_bits(float f) { return (u8)float_to_fp8_bits<5, 2>(f); }

__device__ __forceinline__ float to_float(StorageF32, float v) { return v; }
__device__ __forceinline__ float to_float(StorageF16, u16 v) { return f16_bits_to_float(v); }
__device__ __forceinline__ float to_float(StorageBF16, u16 v) { return bf16_bits_to_float(v); }
__device__ __forceinline__ float from_float(StorageF32, float v) { return v; }
__device__ __forceinline__ u16 from_float(StorageF16, float v) { return float_to_f16_bits(v); }
__device__ __forceinline__ u16 from_float(StorageBF16, float v) { return float_to_bf16_bits(v); }
__device__ __forceinline__ u8 from_float(StorageE4M3, float v) { return float_to_e4m3_bits(v); }
__device__ __forceinline__ u8 from_float(StorageE5M2, float v) { return float_to_e5m2_bits(v); }

// Two FP8 codes as fp16x2 bits, exactly; `pair` holds the first code in bits 15..8 and the
// second in 31..24, zeros elsewhere. e5m2 is the upper byte of an fp16. e4m3's fields go to
// fp16's bits 13..7, an fp16 2^8 times smaller (the two formats' subnormals line up), and its
// NaN S.1111.111 carries into bit 14: an fp16 NaN.
template <class S>
__device__ __forceinline__ u32 fp8x2_to_f16x2_bits(u32 pair) {
  if constexpr (!S::kE4M3) return pair;
  const u32 magnitude = (pair >> 1) & 0x3f803f80u;
  return magnitude | ((magnitude + 0x00800080u) & 0x40004000u) | (pair & 0x80008000u);
}

// What a raw FP8 decode (kRaw below) is off by: e4m3 decoded by bit moves (sm_80, the host
// backend) is the value / 2^8; a caller folds this power of 2 into a constant it multiplies by.
template <class S>
__device__ __forceinline__ constexpr float fp8_raw_scale() {
#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return 1.0f;
#else
  return S::kE4M3 ? 256.0f : 1.0f;
#endif
}

// The four FP8 codes of a word (byte i is element i) as floats, exactly. sm_89+ converts pairs
// with cvt.rn.f16x2.e4m3x2 / e5m2x2 (exact: every FP8 value is an fp16); elsewhere the bit moves
// above and, for e4m3, a product by 2^8 (exact: the fp16 is the value / 2^8; NaN stays NaN),
// in fp16 pairs on the GPU, after the conversion to float on the host backend: the same values.
// kRaw skips that product: the values / fp8_raw_scale, exactly.
template <class S, bool kRaw = false>
__device__ __forceinline__ void fp8x4_to_floats(u32 w, float* out) {
  u32 half2[2];
#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (S::kE4M3)
    asm("{.reg .b16 lo, hi; mov.b32 {lo, hi}, %2; cvt.rn.f16x2.e4m3x2 %0, lo; cvt.rn.f16x2.e4m3x2 %1, hi;}"
        : "=r"(half2[0]), "=r"(half2[1]) : "r"(w));
  else
    asm("{.reg .b16 lo, hi; mov.b32 {lo, hi}, %2; cvt.rn.f16x2.e5m2x2 %0, lo; cvt.rn.f16x2.e5m2x2 %1, hi;}"
        : "=r"(half2[0]), "=r"(half2[1]) : "r"(w));
  constexpr float kScale = 1.0f;
#else
  half2[0] = fp8x2_to_f16x2_bits<S>(__byte_perm(w, 0u, 0x1404u));
  half2[1] = fp8x2_to_f16x2_bits<S>(__byte_perm(w, 0u, 0x3424u));
#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__)
  if constexpr (S::kE4M3 && !kRaw) {
#pragma unroll
    for (int j = 0; j < 2; ++j) asm("mul.rn.f16x2 %0, %0, %1;" : "+r"(half2[j]) : "r"(0x5c005c00u));  // 2^8, 2^8
  }
  constexpr float kScale = 1.0f;
#else
  constexpr float kScale = S::kE4M3 && !kRaw ? 256.0f : 1.0f;
#endif
#endif
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float v = f16_bits_to_float((u16)(half2[i / 2] >> (16 * (i % 2))));
    out[i] = kScale != 1.0f ? v * kScale : v;
  }
}

// fp8x4_bits without FP8 instructions: the rounding above, the four magnitudes and signs
// gathered bytewise, the offset added in 7-bit lanes (no carry reaches the next byte).
template <int E, int M>
__device__ __forceinline__ u32 fp8x4_bits_inline(float x0, float x1, float x2, float x3) {
  constexpr u32 kOffset = Fp8Format<E, M>::kOffset;
  const u32 magnitudes = __byte_perm(__byte_perm(fp8_magnitude_unbiased<E, M>(x0), fp8_magnitude_unbiased<E, M>(x1), 0x40u),
                                     __byte_perm(fp8_magnitude_unbiased<E, M>(x2), fp8_magnitude_unbiased<E, M>(x3), 0x40u),
                                     0x5410u);
  const u32 signs = __byte_perm(__byte_perm(__float_as_uint(x0), __float_as_uint(x1), 0x73u),
                                __byte_perm(__float_as_uint(x2), __float_as_uint(x3), 0x73u), 0x5410u);
  const u32 codes = (magnitudes & 0x7f7f7f7fu) + kOffset * 0x01010101u;
  return codes ^ ((codes ^ signs) & 0x80808080u);  // bit 7 of each byte from `signs`
}

// The same as one function called at each store: NVVM and ptxas compile its ~40 instructions
// once, not at every FP8 store of a kernel (cold compile, issue 25); each call adds ~13 issued.
template <int E, int M>
__device__ __noinline__ u32 fp8x4_bits_soft(float x0, float x1, float x2, float x3) {
  return fp8x4_bits_inline<E, M>(x0, x1, x2, x3);
}

// Four floats as FP8 codes in a word (element i in byte i). sm_89+ converts pairs with
// cvt.rn.satfinite (the same rounding and saturation); elsewhere, and on the host backend,
// fp8x4_bits_inline, or with kCalled its call (fp8x4_bits_soft).
template <class S, bool kCalled = false>
__device__ __forceinline__ u32 fp8x4_bits(const float* in) {
#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  u16 lo, hi;  // cvt puts its first source in the upper byte
  if constexpr (S::kE4M3) {
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(in[1]), "f"(in[0]));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(in[3]), "f"(in[2]));
  } else {
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(in[1]), "f"(in[0]));
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(in[3]), "f"(in[2]));
  }
  return (u32)lo | ((u32)hi << 16);
#else
  constexpr int E = S::kE4M3 ? 4 : 5, M = S::kE4M3 ? 3 : 2;
  if constexpr (kCalled) return fp8x4_bits_soft<E, M>(in[0], in[1], in[2], in[3]);
  else return fp8x4_bits_inline<E, M>(in[0], in[1], in[2], in[3]);
#endif
}

// N elements of storage S as one aligned access of kBytes in {1, 2, 4, 8, 16}; 8- and 16-bit
// elements are packed into 32-bit words with shifts (a union makes NVRTC split the vector stores).
template <class S, int N>
struct VecTraits {
  static constexpr int kElementBits = 8 * (int)sizeof(typename S::raw);
  static constexpr bool kWide = kElementBits == 32;
  static constexpr int kPerWord = 32 / kElementBits;
  static constexpr int kBytes = N * (int)sizeof(typename S::raw);
  static constexpr int kWords = kBytes >= 4 ? kBytes / 4 : 1;
};

template <class S, int N, bool kRaw = false>
__device__ __forceinline__ void words_to_floats(const u32 (&w)[VecTraits<S, N>::kWords], float (&out)[N]) {
  if constexpr (VecTraits<S, N>::kElementBits == 8) {  // FP8: decoded four at a time
    float all[4 * VecTraits<S, N>::kWords];
#pragma unroll
    for (int j = 0; j < VecTraits<S, N>::kWords; ++j) fp8x4_to_floats<S, kRaw>(w[j], all + 4 * j);
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = all[i];
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if constexpr (VecTraits<S, N>::kWide) out[i] = __uint_as_float(w[i]);
      else out[i] = to_float(S(), (u16)((w[i / 2] >> (16 * (i % 2))) & 0xffffu));
    }
  }
}

template <class S, int N, bool kCalled = false>
__device__ __forceinline__ void floats_to_words(const float (&in)[N], u32 (&w)[VecTraits<S, N>::kWords]) {
  typedef VecTraits<S, N> V;
#pragma unroll
  for (int j = 0; j < V::kWords; ++j) w[j] = 0u;
  if constexpr (V::kElementBits == 8 && N % 4 == 0) {  // FP8: converted four at a time
#pragma unroll
    for (int j = 0; j < V::kWords; ++j) w[j] = fp8x4_bits<S, kCalled>(in + 4 * j);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if constexpr (V::kWide) w[i] = __float_as_uint(in[i]);
      else w[i / V::kPerWord] |= (u32)from_float(S(), in[i]) << (V::kElementBits * (i % V::kPerWord));
    }
  }
}

// The raw words of N elements of storage S at `ptr`, one aligned access: load_vec's load, apart
// from the conversion so a kernel can issue it a step before it uses the values (rope.cuh heads_trips).
template <class S, int N>
__device__ __forceinline__ void load_words(const void* ptr, u32 (&w)[VecTraits<S, N>::kWords]) {
  constexpr int bytes = VecTraits<S, N>::kBytes;
  if constexpr (bytes == 16) {
    const uint4 t = *reinterpret_cast<const uint4*>(ptr);
    w[0] = t.x; w[1] = t.y; w[2] = t.z; w[3] = t.w;
  } else if constexpr (bytes == 8) {
    const uint2 t = *reinterpret_cast<const uint2*>(ptr);
    w[0] = t.x; w[1] = t.y;
  } else if constexpr (bytes == 4) {
    w[0] = *reinterpret_cast<const u32*>(ptr);
  } else if constexpr (bytes == 2) {
    w[0] = *reinterpret_cast<const u16*>(ptr);
  } else {
    w[0] = *reinterpret_cast<const u8*>(ptr);
  }
}

// kRaw: FP8 values / fp8_raw_scale (fp8x4_to_floats).
template <class S, int N, bool kRaw = false>
__device__ __forceinline__ void load_vec(const void* ptr, float (&out)[N]) {
  u32 w[VecTraits<S, N>::kWords];
  load_words<S, N>(ptr, w);
  words_to_floats<S, N, kRaw>(w, out);
}

// kCalled: FP8 rounded by a call where it is software (fp8x4_bits).
template <class S, int N, bool kCalled = false>
__device__ __forceinline__ void store_vec(void* ptr, const float (&in)[N]) {
  constexpr int bytes = VecTraits<S, N>::kBytes;
  u32 w[VecTraits<S, N>::kWords];
  floats_to_words<S, N, kCalled>(in, w);
  if constexpr (bytes == 16) {
#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__)
    // One 16-byte store: NVVM splits a second uint4 store to the same row into four. st.global
    // (outputs are global memory; generic loses the space) and no "memory" clobber, so later
    // heads' loads may move above it: no thread reads what another writes.
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "r"(w[0]), "r"(w[1]),
                 "r"(w[2]), "r"(w[3]));
#else
    *reinterpret_cast<uint4*>(ptr) = make_uint4(w[0], w[1], w[2], w[3]);
#endif
  } else if constexpr (bytes == 8) {
    *reinterpret_cast<uint2*>(ptr) = make_uint2(w[0], w[1]);
  } else if constexpr (bytes == 4) {
    *reinterpret_cast<u32*>(ptr) = w[0];
  } else if constexpr (bytes == 2) {
    *reinterpret_cast<u16*>(ptr) = (u16)w[0];
  } else {
    *reinterpret_cast<u8*>(ptr) = (u8)w[0];
  }
}

}  // namespace ropejit
