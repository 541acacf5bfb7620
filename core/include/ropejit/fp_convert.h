#pragma once
/// Host storage-type conversions: float64 <-> fp32/fp16/bf16/fp8 bit patterns with
/// round-to-nearest-even, written from the format definitions alone. The one host converter: the
/// check harness, the tuner, the benchmarks and the tests build inputs, compute correctly
/// rounded expected values and measure distances in ulps with it.
/// Deliberately separate from templates/ropejit/numeric.cuh (the kernel's conversion, the code
/// under test): this is the independent oracle it is checked against.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ropejit/enums.h"

namespace ropejit::ref {

/// Rounds a double to the nearest fp16 (round half to even; overflow to inf; subnormals kept).
uint16_t round_to_fp16_bits(double value);
/// Rounds a double to the nearest bf16 (round half to even; overflow to inf; subnormals kept).
uint16_t round_to_bf16_bits(double value);
/// Rounds a double to the nearest fp32 and returns its bits.
uint32_t round_to_fp32_bits(double value);

/// Exact value of an fp16 bit pattern (inf and NaN included).
double fp16_bits_to_double(uint16_t bits);
/// Exact value of a bf16 bit pattern (inf and NaN included).
double bf16_bits_to_double(uint16_t bits);
/// Exact value of an fp32 bit pattern.
double fp32_bits_to_double(uint32_t bits);

/// Bits of `value` correctly rounded to `dtype` (low 16 bits used for fp16/bf16).
uint32_t round_to_dtype_bits(DType dtype, double value);
/// Value of a `dtype` bit pattern.
double dtype_bits_to_double(DType dtype, uint32_t bits);
/// `value` correctly rounded to `dtype`, as a double.
double round_to_dtype(DType dtype, double value);

/// Bit pattern of element `index` of a `dtype` array.
uint32_t load_bits(DType dtype, const void* data, int64_t index);
/// Value of element `index` of a `dtype` array.
double load_value(DType dtype, const void* data, int64_t index);
/// Stores `value` rounded to `dtype` into element `index`.
void store_value(DType dtype, void* data, int64_t index, double value);
/// Bytes of `values` rounded to `dtype`, densely packed.
std::vector<uint8_t> encode_values(DType dtype, const std::vector<double>& values);

/// Distance in ulps between two finite bit patterns of `dtype`, counted along the ordered
/// line of representable values (+0 and -0 are the same point, so sign crossings count the
/// steps through zero). Returns INT64_MAX when either is NaN or inf and they differ.
int64_t ulp_distance(DType dtype, uint32_t a_bits, uint32_t b_bits);

/// True when the bit pattern is NaN or inf in `dtype`.
bool is_nonfinite_bits(DType dtype, uint32_t bits);

/// OCP FP8 formats: e4m3 "FN" (bias 7, max 448, no inf, NaN 0x7f) and e5m2 (bias 15, max 57344);
/// and FP4 e2m1 (bias 1, max 6, no inf or NaN; a 4-bit code, sign 0x8), NVFP4's values.
enum class Fp8Format { e4m3, e5m2, e2m1 };

/// Rounds a double to FP8, half to even, saturating (inf too) to +-max finite; NaN is 0x7f | sign
/// (e2m1, which has no NaN: the code of 6 with the sign, as the kernel's integer path gives).
uint8_t round_to_fp8_bits(Fp8Format format, double value);
/// Exact value of an FP8 bit pattern (inf and NaN included).
double fp8_bits_to_double(Fp8Format format, uint8_t bits);
/// Ulps between two FP8 patterns as ulp_distance counts them (INT64_MAX for NaN or unequal inf).
int64_t fp8_ulp_distance(Fp8Format format, uint8_t a_bits, uint8_t b_bits);

}  // namespace ropejit::ref
