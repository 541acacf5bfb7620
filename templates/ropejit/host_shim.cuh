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
// The warp and block collectives and __shared__ at the end are CUDA's exactly
// (tests/test_host_cooperative.cpp checks each against CUDA's semantics); rope.cuh's QK-norm
// uses __shfl_xor_sync, the rest no template yet.
#define ROPEJIT_HOST_BACKEND 1

// No headers: parsing libstdc++'s <cmath> would triple the compile time. The C library
// functions are declared here; Clang knows them as builtins (folding, llvm.fma, ...).
extern "C" {
double rint(double x);            // sincos.cuh: quadrant of the angle
double fma(double x, double y, double z);  // sincos.cuh: Cody-Waite reduction
float fmaf(float x, float y, float z);     // rope.cuh, sincos.cuh
double sqrt(double x);            // numeric.cuh inv_sqrt_rn: QK-norm (IEEE, correctly rounded)
double exp2(double x);            // rope.cuh: dynamic NTK inv_freq
float log1pf(float x);            // attn_temperature.cuh: the temperature of a position
float fabsf(float x);             // numeric.cuh: FP8 rounding
float fminf(float x, float y);    // numeric.cuh: FP8 saturation (a NaN operand gives the other)
float fmaxf(float x, float y);    // numeric.cuh: FP8 rounding's binade
}

// --- CUDA declaration specifiers: no meaning on the CPU ---
#define __global__
#define __device__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ inline  // a GPU call (numeric.cuh's software FP8 encode); the host compiler may inline it
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

// Byte i of the result is byte (s >> 4i) & 7 of y:x (numeric.cuh: FP8 decoding).
static inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  const unsigned long long both = ((unsigned long long)y << 32) | x;
  unsigned int r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned int)((both >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
}

// IEEE round-to-nearest product (rope.cuh: HF's float32 angle); the CPU's default rounding
// mode, and -ffp-contract=off keeps it from fusing into a neighbouring add.
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }

// --- block and warp collectives (runtime/src/backends/host/cooperative.h) ---
// A kernel that calls one runs each block's threads as fibers on one CPU thread, switched in
// these calls; threadIdx is per CPU thread, so each wrapper keeps its caller's across the switch.
// Warp size 32; lane = linear thread index % 32. Misuse CUDA leaves undefined (a deadlock, a shuffle
// reading a lane that exited, a mask missing the caller) fails the launch instead of hanging.
extern "C" {
void ropejit_coop_syncthreads(void);
void ropejit_coop_syncwarp(unsigned mask);
unsigned long long ropejit_coop_shfl(int mode, unsigned mask, unsigned long long value,
                                     unsigned operand, int width);
unsigned ropejit_coop_vote(int mode, unsigned mask, int predicate);
}

/// Block-wide barrier: every thread of the block arrives before any goes on.
static inline void __syncthreads() {
  const uint3 self = threadIdx;
  ropejit_coop_syncthreads();
  threadIdx = self;
}

/// Warp barrier of the lanes in `mask` (the caller's among them).
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
  const uint3 self = threadIdx;
  ropejit_coop_syncwarp(mask);
  threadIdx = self;
}

/// One shfl.sync of the bits of `var` (mode 0 idx, 1 up, 2 down, 3 bfly).
template <typename T>
static inline T ropejit_shfl(int mode, unsigned mask, T var, unsigned operand, int width) {
  static_assert(sizeof(T) <= 8 && __is_trivially_copyable(T), "shuffles move up to 8 bytes");
  unsigned long long bits = 0;
  __builtin_memcpy(&bits, &var, sizeof(T));
  const uint3 self = threadIdx;
  bits = ropejit_coop_shfl(mode, mask, bits, operand, width);
  threadIdx = self;
  T result;
  __builtin_memcpy(&result, &bits, sizeof(T));
  return result;
}

/// `var` of lane srcLane mod width within the caller's width-lane segment.
template <typename T>
static inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {
  return ropejit_shfl(0, mask, var, static_cast<unsigned>(srcLane), width);
}
/// `var` of lane - delta; the caller's own below its segment.
template <typename T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = 32) {
  return ropejit_shfl(1, mask, var, delta, width);
}
/// `var` of lane + delta; the caller's own past its segment.
template <typename T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = 32) {
  return ropejit_shfl(2, mask, var, delta, width);
}
/// `var` of lane ^ laneMask; the caller's own when that lane is in a later segment.
template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32) {
  return ropejit_shfl(3, mask, var, static_cast<unsigned>(laneMask), width);
}

/// Bit i set when lane i of `mask` has a nonzero predicate.
static inline unsigned __ballot_sync(unsigned mask, int predicate) {
  const uint3 self = threadIdx;
  const unsigned ballot = ropejit_coop_vote(0, mask, predicate);
  threadIdx = self;
  return ballot;
}
/// 1 when some lane of `mask` has a nonzero predicate, else 0.
static inline int __any_sync(unsigned mask, int predicate) {
  const uint3 self = threadIdx;
  const int any = static_cast<int>(ropejit_coop_vote(1, mask, predicate));
  threadIdx = self;
  return any;
}
/// 1 when every lane of `mask` has a nonzero predicate, else 0.
static inline int __all_sync(unsigned mask, int predicate) {
  const uint3 self = threadIdx;
  const int all = static_cast<int>(ropejit_coop_vote(2, mask, predicate));
  threadIdx = self;
  return all;
}

// Static __shared__ arrays: one copy per CPU thread, which runs one block at a time (CUDA
// leaves them uninitialized; so does this). extern (dynamic) __shared__ is not supported.
#define __shared__ static thread_local
