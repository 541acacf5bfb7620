// The kernel's FP8 conversions (templates/ropejit/numeric.cuh) as plain host functions for
// tests/test_fp8_kernel.cpp. A translation unit of its own: host_shim.cuh declares C math
// functions without noexcept, which clashes with <cmath> (and so with gtest) in one unit.
#include "ropejit/host_shim.cuh"

#include <cstdint>

#pragma GCC diagnostic ignored "-Wunknown-pragmas"  // numeric.cuh's `#pragma unroll`
#include "ropejit/numeric.cuh"

uint8_t kernel_e4m3(float x) { return ropejit::float_to_e4m3_bits(x); }
uint8_t kernel_e5m2(float x) { return ropejit::float_to_e5m2_bits(x); }
