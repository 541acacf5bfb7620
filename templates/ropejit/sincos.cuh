#pragma once
// Accurate sin/cos for angles up to ~2^31 rad without fast-math and without local memory:
// reduce by pi/2 in double (Cody-Waite, two constants), then float minimax polynomials on
// [-pi/4, pi/4]. Explicit fmaf keeps GPU and host backend results bit-identical.

namespace ropejit {

struct SinCos {
  float sin;
  float cos;
};

__device__ __forceinline__ SinCos sincos_reduced(double angle) {
  const double kTwoOverPi = 0.63661977236758138243;
  const double kPiOver2Hi = 1.5707963267948966;       // pi/2 rounded to double
  const double kPiOver2Lo = 6.123233995736766e-17;    // pi/2 - kPiOver2Hi
  const double q = rint(angle * kTwoOverPi);
  double r = fma(-q, kPiOver2Hi, angle);
  r = fma(-q, kPiOver2Lo, r);
  const float x = (float)r;
  const float z = x * x;
  // Cephes sinf/cosf coefficients: about 1 ulp on [-pi/4, pi/4].
  float s = fmaf(fmaf(fmaf(-1.9515295891e-4f, z, 8.3321608736e-3f), z, -1.6666654611e-1f), z * x, x);
  float c = fmaf(fmaf(fmaf(2.443315711809948e-5f, z, -1.388731625493765e-3f), z,
                      4.166664568298827e-2f), z * z, fmaf(-0.5f, z, 1.0f));
  // Quadrant by selects, not branches, so the pairs' chains interleave: odd quadrants swap
  // sin and cos; sin is negated in quadrants 2, 3 and cos in 1, 2 (bit-identical to a switch).
  const int quadrant = (int)((long long)q & 3);
  const float sin_mag = (quadrant & 1) ? c : s;
  const float cos_mag = (quadrant & 1) ? s : c;
  SinCos out;
  out.sin = (quadrant & 2) ? -sin_mag : sin_mag;
  out.cos = ((quadrant + 1) & 2) ? -cos_mag : cos_mag;
#if !defined(ROPEJIT_HOST_BACKEND) && defined(__CUDA_ARCH__)
  // Computed here, where the caller asks: NVVM sank it into a heads loop (once per head).
  asm volatile("" : "+f"(out.sin), "+f"(out.cos));
#endif
  return out;
}

}  // namespace ropejit
