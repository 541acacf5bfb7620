#pragma once
// Host shim: force-included (-include) by the host backend before the generated source so
// that CUDA device code is plain host C++ for Clang. Never included by NVRTC. Templates test
// ROPEJIT_HOST_BACKEND only to pick host fp16/bf16 bit conversions.
#define ROPEJIT_HOST_BACKEND 1

// No headers: parsing libstdc++'s <cmath> would triple the compile time. The C library
// functions are declared below; Clang knows them as builtins (folding, llvm.fma, ...).
extern "C" {
void* memcpy(void* dst, const void* src, __SIZE_TYPE__ n);
void* memset(void* dst, int value, __SIZE_TYPE__ n);
void sincos(double x, double* s, double* c);
void sincosf(float x, float* s, float* c);
double frexp(double x, int* e);
float frexpf(float x, int* e);
double ldexp(double x, int e);
float ldexpf(float x, int e);
double modf(double x, double* i);
float modff(float x, float* i);
long lrint(double x);
long lrintf(float x);
long long llrint(double x);
long long llrintf(float x);
long lround(double x);
long lroundf(float x);
long long llround(double x);
long long llroundf(float x);
}

// double f(double), float ff(float), and CUDA's float overload f(float).
#define ROPEJIT_HOST_MATH1(fn)                 \
  extern "C" double fn(double);                \
  extern "C" float fn##f(float);               \
  static inline float fn(float x) { return fn##f(x); }
#define ROPEJIT_HOST_MATH2(fn)                 \
  extern "C" double fn(double, double);        \
  extern "C" float fn##f(float, float);        \
  static inline float fn(float x, float y) { return fn##f(x, y); }
ROPEJIT_HOST_MATH1(sin) ROPEJIT_HOST_MATH1(cos) ROPEJIT_HOST_MATH1(tan)
ROPEJIT_HOST_MATH1(asin) ROPEJIT_HOST_MATH1(acos) ROPEJIT_HOST_MATH1(atan)
ROPEJIT_HOST_MATH1(sinh) ROPEJIT_HOST_MATH1(cosh) ROPEJIT_HOST_MATH1(tanh)
ROPEJIT_HOST_MATH1(exp) ROPEJIT_HOST_MATH1(exp2) ROPEJIT_HOST_MATH1(exp10) ROPEJIT_HOST_MATH1(expm1)
ROPEJIT_HOST_MATH1(log) ROPEJIT_HOST_MATH1(log2) ROPEJIT_HOST_MATH1(log10) ROPEJIT_HOST_MATH1(log1p)
ROPEJIT_HOST_MATH1(sqrt) ROPEJIT_HOST_MATH1(cbrt) ROPEJIT_HOST_MATH1(fabs)
ROPEJIT_HOST_MATH1(floor) ROPEJIT_HOST_MATH1(ceil) ROPEJIT_HOST_MATH1(trunc)
ROPEJIT_HOST_MATH1(round) ROPEJIT_HOST_MATH1(rint) ROPEJIT_HOST_MATH1(nearbyint)
ROPEJIT_HOST_MATH1(erf) ROPEJIT_HOST_MATH1(erfc)
ROPEJIT_HOST_MATH2(atan2) ROPEJIT_HOST_MATH2(pow) ROPEJIT_HOST_MATH2(hypot)
ROPEJIT_HOST_MATH2(fmod) ROPEJIT_HOST_MATH2(remainder) ROPEJIT_HOST_MATH2(fmin)
ROPEJIT_HOST_MATH2(fmax) ROPEJIT_HOST_MATH2(copysign)
#undef ROPEJIT_HOST_MATH1
#undef ROPEJIT_HOST_MATH2
extern "C" double fma(double, double, double);
extern "C" float fmaf(float, float, float);
static inline float fma(float x, float y, float z) { return fmaf(x, y, z); }
static inline bool isnan(double x) { return __builtin_isnan(x); }
static inline bool isnan(float x) { return __builtin_isnan(x); }
static inline bool isinf(double x) { return __builtin_isinf(x); }
static inline bool isinf(float x) { return __builtin_isinf(x); }
static inline bool isfinite(double x) { return __builtin_isfinite(x); }
static inline bool isfinite(float x) { return __builtin_isfinite(x); }
static inline bool signbit(double x) { return __builtin_signbit(x); }
static inline bool signbit(float x) { return __builtin_signbit(x); }
static inline int abs(int x) { return x < 0 ? -x : x; }
static inline long long llabs(long long x) { return x < 0 ? -x : x; }

// --- CUDA declaration specifiers: no meaning on the CPU ---
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__
// __restrict__ is a Clang C++ keyword already.

// --- vector types: members and alignment as in CUDA's vector_types.h ---
#define ROPEJIT_HOST_VEC1(name, T, A) \
  struct __attribute__((aligned(A))) name { T x; };
#define ROPEJIT_HOST_VEC2(name, T, A) \
  struct __attribute__((aligned(A))) name { T x, y; };
#define ROPEJIT_HOST_VEC3(name, T) \
  struct name { T x, y, z; };
#define ROPEJIT_HOST_VEC4(name, T, A) \
  struct __attribute__((aligned(A))) name { T x, y, z, w; };
#define ROPEJIT_HOST_VEC_FAMILY(base, T, A1, A2, A4) \
  ROPEJIT_HOST_VEC1(base##1, T, A1)                  \
  ROPEJIT_HOST_VEC2(base##2, T, A2)                  \
  ROPEJIT_HOST_VEC3(base##3, T)                      \
  ROPEJIT_HOST_VEC4(base##4, T, A4)

ROPEJIT_HOST_VEC_FAMILY(char, signed char, 1, 2, 4)
ROPEJIT_HOST_VEC_FAMILY(uchar, unsigned char, 1, 2, 4)
ROPEJIT_HOST_VEC_FAMILY(short, short, 2, 4, 8)
ROPEJIT_HOST_VEC_FAMILY(ushort, unsigned short, 2, 4, 8)
ROPEJIT_HOST_VEC_FAMILY(int, int, 4, 8, 16)
ROPEJIT_HOST_VEC_FAMILY(uint, unsigned int, 4, 8, 16)
ROPEJIT_HOST_VEC_FAMILY(float, float, 4, 8, 16)
ROPEJIT_HOST_VEC_FAMILY(long, long, 8, 16, 16)
ROPEJIT_HOST_VEC_FAMILY(ulong, unsigned long, 8, 16, 16)
ROPEJIT_HOST_VEC_FAMILY(longlong, long long, 8, 16, 16)
ROPEJIT_HOST_VEC_FAMILY(ulonglong, unsigned long long, 8, 16, 16)
ROPEJIT_HOST_VEC_FAMILY(double, double, 8, 16, 16)

// make_<type>(...) constructors, as CUDA's vector_functions.h.
#define ROPEJIT_HOST_MAKE(base, T)                                                        \
  static inline base##1 make_##base##1(T x) { return base##1{x}; }                        \
  static inline base##2 make_##base##2(T x, T y) { return base##2{x, y}; }                \
  static inline base##3 make_##base##3(T x, T y, T z) { return base##3{x, y, z}; }        \
  static inline base##4 make_##base##4(T x, T y, T z, T w) { return base##4{x, y, z, w}; }
ROPEJIT_HOST_MAKE(char, signed char)
ROPEJIT_HOST_MAKE(uchar, unsigned char)
ROPEJIT_HOST_MAKE(short, short)
ROPEJIT_HOST_MAKE(ushort, unsigned short)
ROPEJIT_HOST_MAKE(int, int)
ROPEJIT_HOST_MAKE(uint, unsigned int)
ROPEJIT_HOST_MAKE(float, float)
ROPEJIT_HOST_MAKE(long, long)
ROPEJIT_HOST_MAKE(ulong, unsigned long)
ROPEJIT_HOST_MAKE(longlong, long long)
ROPEJIT_HOST_MAKE(ulonglong, unsigned long long)
ROPEJIT_HOST_MAKE(double, double)
#undef ROPEJIT_HOST_MAKE
#undef ROPEJIT_HOST_VEC_FAMILY
#undef ROPEJIT_HOST_VEC1
#undef ROPEJIT_HOST_VEC2
#undef ROPEJIT_HOST_VEC3
#undef ROPEJIT_HOST_VEC4

/// CUDA's dim3: unspecified sizes are 1.
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
static constexpr int warpSize = 32;

// --- loads ---
template <typename T>
static inline T __ldg(const T* p) { return *p; }
template <typename T>
static inline T __ldcs(const T* p) { return *p; }
template <typename T>
static inline T __ldcg(const T* p) { return *p; }
template <typename T>
static inline void __stcs(T* p, T v) { *p = v; }
template <typename T>
static inline void __stcg(T* p, T v) { *p = v; }

// --- bit casts ---
template <typename To, typename From>
static inline To ropejit_host_bit_cast(From v) {
  static_assert(sizeof(To) == sizeof(From), "bit cast between types of different size");
  To out;
  memcpy(&out, &v, sizeof(To));
  return out;
}
static inline float __int_as_float(int v) { return ropejit_host_bit_cast<float>(v); }
static inline int __float_as_int(float v) { return ropejit_host_bit_cast<int>(v); }
static inline float __uint_as_float(unsigned int v) { return ropejit_host_bit_cast<float>(v); }
static inline unsigned int __float_as_uint(float v) { return ropejit_host_bit_cast<unsigned int>(v); }
static inline double __longlong_as_double(long long v) { return ropejit_host_bit_cast<double>(v); }
static inline long long __double_as_longlong(double v) { return ropejit_host_bit_cast<long long>(v); }
static inline int __double2hiint(double v) { return (int)(__double_as_longlong(v) >> 32); }
static inline int __double2loint(double v) { return (int)__double_as_longlong(v); }

// --- IEEE round-to-nearest arithmetic (the default rounding mode on the CPU) ---
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline double __drcp_rn(double a) { return 1.0 / a; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }

// --- conversions (round to nearest even unless the name says otherwise) ---
static inline float __double2float_rn(double v) { return (float)v; }
static inline int __float2int_rn(float v) { return (int)rintf(v); }
static inline int __float2int_rz(float v) { return (int)v; }
static inline int __float2int_rd(float v) { return (int)floorf(v); }
static inline int __float2int_ru(float v) { return (int)ceilf(v); }
static inline unsigned int __float2uint_rn(float v) { return (unsigned int)rintf(v); }
static inline long long __float2ll_rn(float v) { return (long long)rintf(v); }
static inline int __double2int_rn(double v) { return (int)rint(v); }
static inline int __double2int_rz(double v) { return (int)v; }
static inline long long __double2ll_rn(double v) { return (long long)rint(v); }
static inline long long __double2ll_rz(double v) { return (long long)v; }
static inline double __int2double_rn(int v) { return (double)v; }
static inline double __ll2double_rn(long long v) { return (double)v; }
static inline double __ull2double_rn(unsigned long long v) { return (double)v; }
static inline float __int2float_rn(int v) { return (float)v; }
static inline float __ll2float_rn(long long v) { return (float)v; }
static inline float __uint2float_rn(unsigned int v) { return (float)v; }

// --- CUDA's integer min/max overloads and float helpers ---
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline float __saturatef(float v) { return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float v) { return 1.0f / sqrtf(v); }
static inline double rsqrt(double v) { return 1.0 / sqrt(v); }
