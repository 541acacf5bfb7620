#pragma once
// Host shim: force-included (-include) by the host backend before the generated source so
// that CUDA device code is plain host C++ for Clang. Never included by NVRTC. Templates test
// ROPEJIT_HOST_BACKEND only to pick host fp16/bf16 bit conversions.
//
// It defines exactly the CUDA symbols that templates/ropejit/*.cuh, the generated source
// (codegen/src/source.cpp) and the launcher (runtime/src/backends/host/host_jit.cpp) use, no more:
// whatever is here must stay correct, and unused emulation is untested emulation. A template
// that starts using another CUDA symbol fails the host backend tests (HostJit*, Conformance*)
// with "use of undeclared identifier"; add that symbol here then, with CUDA's semantics.
#define ROPEJIT_HOST_BACKEND 1

// No headers: parsing libstdc++'s <cmath> would triple the compile time. The C library
// functions are declared here; Clang knows them as builtins (folding, llvm.fma, ...).
extern "C" {
double rint(double x);            // sincos.cuh: quadrant of the angle
double fma(double x, double y, double z);  // sincos.cuh: Cody-Waite reduction
float fmaf(float x, float y, float z);     // rope.cuh, sincos.cuh
float sqrtf(float x);             // rope.cuh: QK-norm (IEEE, as CUDA's default -prec-sqrt)
double exp2(double x);            // rope.cuh: dynamic NTK inv_freq
float log1pf(float x);            // attn_temperature.cuh: the temperature of a position
}

// --- CUDA declaration specifiers: no meaning on the CPU ---
#define __global__
#define __device__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)

// --- vector types: members and alignment as in CUDA's vector_types.h ---
/// numeric.cuh: 8-byte vector access.
struct __attribute__((aligned(8))) uint2 { unsigned int x, y; };
/// threadIdx and blockIdx.
struct uint3 { unsigned int x, y, z; };
/// numeric.cuh: 16-byte vector access.
struct __attribute__((aligned(16))) uint4 { unsigned int x, y, z, w; };
static inline uint2 make_uint2(unsigned int x, unsigned int y) { return uint2{x, y}; }
static inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) {
  return uint4{x, y, z, w};
}

/// CUDA's dim3: unspecified sizes are 1 (the launcher sets blockDim and gridDim from dim3s).
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
};

// --- built-in indices: per CPU thread, set by the generated launcher before each call ---
static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local dim3 blockDim;
static thread_local dim3 gridDim;

// --- intrinsics: the read-only cache load is a plain load on the CPU ---
template <typename T>
static inline T __ldg(const T* p) { return *p; }

// Bit casts (numeric.cuh: fp16/bf16 conversions, vector words).
static inline float __uint_as_float(unsigned int v) { return __builtin_bit_cast(float, v); }
static inline unsigned int __float_as_uint(float v) { return __builtin_bit_cast(unsigned int, v); }

// IEEE round-to-nearest product (rope.cuh: HF's float32 angle); the CPU's default rounding
// mode, and -ffp-contract=off keeps it from fusing into a neighbouring add.
static inline float __fmul_rn(float a, float b) { return a * b; }
