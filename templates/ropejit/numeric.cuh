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

__device__ __forceinline__ float bf16_bits_to_float(u32 bits) { return __uint_as_float(bits << 16); }

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
// NaN stays NaN. `max_bits` is the float bits of the largest finite FP8 value.
template <int E, int M>
__device__ __forceinline__ u8 float_to_fp8_bits(float f, u32 max_bits, u8 nan) {
  const u32 x = __float_as_uint(f);
  const u32 sign = (x >> 24) & 0x80u;
  u32 absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return (u8)(sign | nan);
  if (absx > max_bits) absx = max_bits;  // exact in FP8: rounding cannot pass it
  constexpr int kBias = (1 << (E - 1)) - 1;
  if (absx < (u32)(127 - kBias + 1) << 23) {  // below the smallest normal: multiples of 2^(1-bias-M)
    // The product is exact (a power of two) and below 2^M; adding 2^23 rounds it to an integer
    // half to even in the default rounding mode (an fma of the two is the same single rounding).
    const float quanta = __uint_as_float(absx) * __uint_as_float((u32)(127 + kBias - 1 + M) << 23);
    const u32 q = __float_as_uint(quanta + 8388608.0f) - 0x4b000000u;
    return (u8)(sign | q);  // q == 2^M is the smallest normal's encoding
  }
  constexpr int kDrop = 23 - M;
  const u32 r = (absx + ((1u << (kDrop - 1)) - 1u) + ((absx >> kDrop) & 1u)) >> kDrop;
  return (u8)(sign | (r - ((u32)(127 - kBias) << M)));
}

__device__ __forceinline__ u8 float_to_e4m3_bits(float f) { return float_to_fp8_bits<4, 3>(f, 0x43e00000u, 0x7fu); }
__device__ __forceinline__ u8 float_to_e5m2_bits(float f) { return float_to_fp8_bits<5, 2>(f, 0x47600000u, 0x7fu); }

__device__ __forceinline__ float to_float(StorageF32, float v) { return v; }
__device__ __forceinline__ float to_float(StorageF16, u16 v) { return f16_bits_to_float(v); }
__device__ __forceinline__ float to_float(StorageBF16, u16 v) { return bf16_bits_to_float(v); }
// FP8 -> float, exact: e5m2 is the upper byte of an fp16; e4m3 (bias 7, no infinity, S.1111.111
// NaN) is decoded from its fields, its subnormals being multiples of 2^-9.
__device__ __forceinline__ float to_float(StorageE5M2, u8 v) { return f16_bits_to_float((u16)((u16)v << 8)); }
__device__ __forceinline__ float to_float(StorageE4M3, u8 v) {
  const u32 sign = (u32)(v & 0x80u) << 24, exp = (v >> 3) & 0xfu, mant = v & 0x7u;
  if (exp == 0xfu && mant == 0x7u) return __uint_as_float(sign | 0x7fc00000u);
  if (exp == 0) return __uint_as_float(sign | __float_as_uint((float)mant * 0.001953125f));
  return __uint_as_float(sign | ((exp + 120u) << 23) | (mant << 20));
}
__device__ __forceinline__ float from_float(StorageF32, float v) { return v; }
__device__ __forceinline__ u16 from_float(StorageF16, float v) { return float_to_f16_bits(v); }
__device__ __forceinline__ u16 from_float(StorageBF16, float v) { return float_to_bf16_bits(v); }
__device__ __forceinline__ u8 from_float(StorageE4M3, float v) { return float_to_e4m3_bits(v); }
__device__ __forceinline__ u8 from_float(StorageE5M2, float v) { return float_to_e5m2_bits(v); }

// Two FP8 values in 16 bits, `lo` in the low byte. sm_89+ converts both in one instruction
// (cvt.satfinite: the same rounding and saturation); elsewhere, and on the host backend, the
// integer conversion above.
template <class S>
__device__ __forceinline__ u32 fp8x2_bits(float lo, float hi) {
#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  u16 r;  // cvt puts its first source in the upper byte
  if constexpr (S::kE4M3)
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return (u32)from_float(S(), lo) | ((u32)from_float(S(), hi) << 8);
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

template <class S, int N>
__device__ __forceinline__ void words_to_floats(const u32 (&w)[VecTraits<S, N>::kWords], float (&out)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if constexpr (VecTraits<S, N>::kWide) out[i] = __uint_as_float(w[i]);
    else if constexpr (VecTraits<S, N>::kElementBits == 8) out[i] = to_float(S(), (u8)((w[i / 4] >> (8 * (i % 4))) & 0xffu));
    else out[i] = to_float(S(), (u16)((w[i / 2] >> (16 * (i % 2))) & 0xffffu));
  }
}

template <class S, int N>
__device__ __forceinline__ void floats_to_words(const float (&in)[N], u32 (&w)[VecTraits<S, N>::kWords]) {
  typedef VecTraits<S, N> V;
#pragma unroll
  for (int j = 0; j < V::kWords; ++j) w[j] = 0u;
  if constexpr (V::kElementBits == 8 && N % 2 == 0) {  // FP8: converted in pairs
#pragma unroll
    for (int i = 0; i < N; i += 2) w[i / 4] |= fp8x2_bits<S>(in[i], in[i + 1]) << (8 * (i % 4));
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if constexpr (V::kWide) w[i] = __float_as_uint(in[i]);
      else w[i / V::kPerWord] |= (u32)from_float(S(), in[i]) << (V::kElementBits * (i % V::kPerWord));
    }
  }
}

template <class S, int N>
__device__ __forceinline__ void load_vec(const void* ptr, float (&out)[N]) {
  constexpr int bytes = VecTraits<S, N>::kBytes;
  u32 w[VecTraits<S, N>::kWords];
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
  words_to_floats<S, N>(w, out);
}

template <class S, int N>
__device__ __forceinline__ void store_vec(void* ptr, const float (&in)[N]) {
  constexpr int bytes = VecTraits<S, N>::kBytes;
  u32 w[VecTraits<S, N>::kWords];
  floats_to_words<S, N>(in, w);
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
