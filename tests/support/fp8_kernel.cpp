// The kernel's FP8 conversions and inverse square root (templates/ropejit/numeric.cuh) as plain
// host functions for tests/test_fp8_kernel.cpp and tests/test_inv_sqrt_kernel.cpp. A translation
// unit of its own: host_shim.cuh declares C math functions without noexcept, which clashes with
// <cmath> (and so with gtest) in one unit.
#include "ropejit/host_shim.cuh"

#include <cstdint>

#pragma GCC diagnostic ignored "-Wunknown-pragmas"  // numeric.cuh's `#pragma unroll`
#include "ropejit/numeric.cuh"

uint8_t kernel_e4m3(float x) { return ropejit::float_to_e4m3_bits(x); }
// The QK-norm's 1 / sqrt(x) rounded once, as the host backend computes it (numeric.cuh inv_sqrt_rn).
float kernel_inv_sqrt(float x) { return ropejit::inv_sqrt_rn(x); }
uint8_t kernel_e5m2(float x) { return ropejit::float_to_e5m2_bits(x); }

// A 16-byte vector of FP8 codes as the kernels load and store it (four at a time).
void kernel_fp8x16_to_floats(bool e4m3, const uint32_t* words, float* out) {
  float v[16];
  const uint32_t w[4] = {words[0], words[1], words[2], words[3]};
  if (e4m3) ropejit::words_to_floats<ropejit::StorageE4M3, 16>(w, v);
  else ropejit::words_to_floats<ropejit::StorageE5M2, 16>(w, v);
  for (int i = 0; i < 16; ++i) out[i] = v[i];
}
void kernel_floats_to_fp8x16(bool e4m3, const float* in, uint32_t* words) {
  float v[16];
  for (int i = 0; i < 16; ++i) v[i] = in[i];
  uint32_t w[4];
  if (e4m3) ropejit::floats_to_words<ropejit::StorageE4M3, 16>(v, w);
  else ropejit::floats_to_words<ropejit::StorageE5M2, 16>(v, w);
  for (int i = 0; i < 4; ++i) words[i] = w[i];
}

// NVFP4 (templates/ropejit/nvfp4.cuh, the integer path every arch but Blackwell's families takes).
#include "ropejit/nvfp4.cuh"

uint8_t kernel_e2m1(float x) { return static_cast<uint8_t>(ropejit::float_to_e2m1_bits(x)); }
uint32_t kernel_e2m1x8(const float* in) {
  float v[8];
  for (int i = 0; i < 8; ++i) v[i] = in[i];
  return ropejit::e2m1_bits<8>(v);
}
uint8_t kernel_nvfp4_block_scale(float amax, float inv_global, float* multiplier) {
  float m = 0.0f;
  const uint32_t code = ropejit::nvfp4_block_scale(amax, inv_global, m);
  *multiplier = m;
  return static_cast<uint8_t>(code);
}
float kernel_nvfp4_divide_by_scale(float a, uint32_t code) {
  return ropejit::nvfp4_divide_by_scale(a, ropejit::e4m3_scale_value(code));
}
