#include "ropejit/fp_convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace ropejit::ref {
namespace {

/// An IEEE binary format: explicit fraction bits and exponent bits.
struct Format {
  int frac_bits;
  int exp_bits;
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint32_t exp_all_ones() const { return (1u << exp_bits) - 1; }
  uint32_t sign_bit() const { return 1u << (exp_bits + frac_bits); }
};

constexpr Format kFp16{10, 5};
constexpr Format kBf16{7, 8};
constexpr Format kFp32{23, 8};

Format format_of(DType dtype) {
  switch (dtype) {
    case DType::fp16: return kFp16;
    case DType::bf16: return kBf16;
    case DType::fp32: break;
  }
  return kFp32;
}

/// Round half to even of a non-negative double, without depending on the FPU rounding mode.
double round_half_even(double x) {
  double floor_x = std::floor(x);
  double rest = x - floor_x;  // exact: x < 2^53
  if (rest > 0.5) return floor_x + 1;
  if (rest < 0.5) return floor_x;
  return std::fmod(floor_x, 2.0) == 0.0 ? floor_x : floor_x + 1;
}

uint32_t round_bits(double value, const Format& f) {
  const uint32_t sign = std::signbit(value) ? f.sign_bit() : 0u;
  const uint32_t inf_bits = f.exp_all_ones() << f.frac_bits;
  if (std::isnan(value)) return sign | inf_bits | (1u << (f.frac_bits - 1));  // quiet NaN
  const double magnitude = std::fabs(value);
  if (std::isinf(magnitude)) return sign | inf_bits;
  if (magnitude == 0.0) return sign;
  int frexp_exp = 0;
  std::frexp(magnitude, &frexp_exp);  // magnitude = m * 2^frexp_exp, m in [0.5, 1)
  int exponent = frexp_exp - 1;       // magnitude in [2^exponent, 2^(exponent+1))
  const int min_exponent = 1 - f.bias();
  if (exponent > f.bias()) return sign | inf_bits;
  if (exponent < min_exponent) exponent = min_exponent;  // subnormal range: fixed quantum
  // Scaling by a power of two is exact; the quotient counts quanta of 2^(exponent - frac).
  double quanta = round_half_even(std::ldexp(magnitude, f.frac_bits - exponent));
  const double hidden = std::ldexp(1.0, f.frac_bits);
  if (quanta >= 2 * hidden) {  // rounded up to the next binade
    quanta /= 2;
    exponent += 1;
    if (exponent > f.bias()) return sign | inf_bits;
  }
  if (quanta < hidden) return sign | static_cast<uint32_t>(quanta);  // subnormal (or zero)
  const uint32_t exp_field = static_cast<uint32_t>(exponent + f.bias());
  const uint32_t frac_field = static_cast<uint32_t>(quanta - hidden);
  return sign | (exp_field << f.frac_bits) | frac_field;
}

double bits_to_double(uint32_t bits, const Format& f) {
  const bool negative = (bits & f.sign_bit()) != 0;
  const uint32_t exp_field = (bits >> f.frac_bits) & f.exp_all_ones();
  const uint32_t frac_field = bits & ((1u << f.frac_bits) - 1);
  double magnitude;
  if (exp_field == f.exp_all_ones()) {
    magnitude = frac_field ? std::numeric_limits<double>::quiet_NaN()
                           : std::numeric_limits<double>::infinity();
  } else if (exp_field == 0) {
    magnitude = std::ldexp(static_cast<double>(frac_field), 1 - f.bias() - f.frac_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(frac_field | (1u << f.frac_bits)),
                           static_cast<int>(exp_field) - f.bias() - f.frac_bits);
  }
  return negative ? -magnitude : magnitude;
}

/// Every value of an FP8 format, decoded once from its definition. The positive finite codes
/// 0..max_code are contiguous and increasing, so rounding is a search among them.
struct Fp8Table {
  double value[256];
  uint8_t max_code;  // the largest finite positive code
  uint8_t sign;      // the sign bit: 0x80 (FP8), 0x08 (FP4)
  bool has_nan;
};

Fp8Table make_fp8_table(int exp_bits, int mant_bits, bool has_inf, bool has_nan = true) {
  Fp8Table t{};
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int exp_max = (1 << exp_bits) - 1, mant_max = (1 << mant_bits) - 1;
  const int codes = 2 << (exp_bits + mant_bits);
  t.sign = static_cast<uint8_t>(codes / 2);
  t.has_nan = has_nan;
  for (int code = 0; code < codes; ++code) {
    const int exp_field = (code >> mant_bits) & exp_max, mant = code & mant_max;
    double magnitude;
    if (has_inf && exp_field == exp_max) {  // IEEE-like (e5m2): top exponent is inf and NaN
      magnitude = mant ? std::numeric_limits<double>::quiet_NaN()
                       : std::numeric_limits<double>::infinity();
    } else if (has_nan && !has_inf && exp_field == exp_max && mant == mant_max) {  // e4m3 "FN": S.1111.111
      magnitude = std::numeric_limits<double>::quiet_NaN();
    } else if (exp_field == 0) {
      magnitude = std::ldexp(mant, 1 - bias - mant_bits);
    } else {
      magnitude = std::ldexp(mant + (1 << mant_bits), exp_field - bias - mant_bits);
    }
    t.value[code] = (code & t.sign) ? -magnitude : magnitude;
  }
  t.max_code = 0;
  while (t.max_code + 1 < t.sign && std::isfinite(t.value[t.max_code + 1])) ++t.max_code;
  return t;
}

const Fp8Table& fp8_table(Fp8Format format) {
  static const Fp8Table e4m3 = make_fp8_table(4, 3, false);
  static const Fp8Table e5m2 = make_fp8_table(5, 2, true);
  static const Fp8Table e2m1 = make_fp8_table(2, 1, false, false);
  return format == Fp8Format::e4m3 ? e4m3 : format == Fp8Format::e5m2 ? e5m2 : e2m1;
}

}  // namespace

uint16_t round_to_fp16_bits(double value) { return static_cast<uint16_t>(round_bits(value, kFp16)); }
uint16_t round_to_bf16_bits(double value) { return static_cast<uint16_t>(round_bits(value, kBf16)); }
uint32_t round_to_fp32_bits(double value) { return round_bits(value, kFp32); }

double fp16_bits_to_double(uint16_t bits) { return dtype_bits_to_double(DType::fp16, bits); }
double bf16_bits_to_double(uint16_t bits) { return dtype_bits_to_double(DType::bf16, bits); }
double fp32_bits_to_double(uint32_t bits) { return bits_to_double(bits, kFp32); }

uint32_t round_to_dtype_bits(DType dtype, double value) {
  return round_bits(value, format_of(dtype));
}

double dtype_bits_to_double(DType dtype, uint32_t bits) {
  // 16-bit formats: every value decoded once (tests decode millions of elements).
  static const std::vector<double> fp16_table = [] {
    std::vector<double> t(65536);
    for (uint32_t b = 0; b < 65536; ++b) t[b] = bits_to_double(b, kFp16);
    return t;
  }();
  static const std::vector<double> bf16_table = [] {
    std::vector<double> t(65536);
    for (uint32_t b = 0; b < 65536; ++b) t[b] = bits_to_double(b, kBf16);
    return t;
  }();
  switch (dtype) {
    case DType::fp16: return fp16_table[bits & 0xFFFFu];
    case DType::bf16: return bf16_table[bits & 0xFFFFu];
    case DType::fp32: break;
  }
  return bits_to_double(bits, kFp32);
}

double round_to_dtype(DType dtype, double value) {
  return dtype_bits_to_double(dtype, round_to_dtype_bits(dtype, value));
}

uint32_t load_bits(DType dtype, const void* data, int64_t index) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (dtype == DType::fp32) {
    uint32_t bits;
    std::memcpy(&bits, bytes + index * 4, 4);
    return bits;
  }
  uint16_t bits;
  std::memcpy(&bits, bytes + index * 2, 2);
  return bits;
}

double load_value(DType dtype, const void* data, int64_t index) {
  return dtype_bits_to_double(dtype, load_bits(dtype, data, index));
}

void store_value(DType dtype, void* data, int64_t index, double value) {
  auto* bytes = static_cast<unsigned char*>(data);
  const uint32_t bits = round_to_dtype_bits(dtype, value);
  if (dtype == DType::fp32) {
    std::memcpy(bytes + index * 4, &bits, 4);
  } else {
    const uint16_t half_bits = static_cast<uint16_t>(bits);
    std::memcpy(bytes + index * 2, &half_bits, 2);
  }
}

std::vector<uint8_t> encode_values(DType dtype, const std::vector<double>& values) {
  std::vector<uint8_t> bytes(values.size() * static_cast<size_t>(dtype_size(dtype)));
  for (size_t i = 0; i < values.size(); ++i)
    store_value(dtype, bytes.data(), static_cast<int64_t>(i), values[i]);
  return bytes;
}

bool is_nonfinite_bits(DType dtype, uint32_t bits) {
  const Format f = format_of(dtype);
  return ((bits >> f.frac_bits) & f.exp_all_ones()) == f.exp_all_ones();
}

int64_t ulp_distance(DType dtype, uint32_t a_bits, uint32_t b_bits) {
  const Format f = format_of(dtype);
  const uint32_t all_bits = f.sign_bit() | (f.sign_bit() - 1);
  a_bits &= all_bits;
  b_bits &= all_bits;
  const bool a_bad = is_nonfinite_bits(dtype, a_bits), b_bad = is_nonfinite_bits(dtype, b_bits);
  if (a_bad || b_bad) {
    const bool a_nan = a_bad && (a_bits & ((1u << f.frac_bits) - 1));
    return (a_bits == b_bits && !a_nan) ? 0 : std::numeric_limits<int64_t>::max();
  }
  // Sign-magnitude to a signed position on the ordered line; +0 and -0 both map to 0.
  auto ordered = [&](uint32_t bits) -> int64_t {
    const int64_t magnitude = static_cast<int64_t>(bits & (f.sign_bit() - 1));
    return (bits & f.sign_bit()) ? -magnitude : magnitude;
  };
  const int64_t diff = ordered(a_bits) - ordered(b_bits);
  return diff < 0 ? -diff : diff;
}

uint8_t round_to_fp8_bits(Fp8Format format, double value) {
  const Fp8Table& t = fp8_table(format);
  const uint8_t sign = std::signbit(value) ? t.sign : 0x00;
  if (std::isnan(value)) return static_cast<uint8_t>(sign | (t.has_nan ? t.sign - 1 : t.max_code));
  const double magnitude = std::fabs(value);
  if (magnitude >= t.value[t.max_code]) return static_cast<uint8_t>(sign | t.max_code);  // saturate
  // The nearest finite code: `lo` is the largest value <= magnitude, `lo + 1` the next one up.
  const double* end = t.value + t.max_code + 1;  // the positive finite values
  const int lo = static_cast<int>(std::upper_bound(t.value, end, magnitude) - t.value) - 1;
  if (t.value[lo] == magnitude) return static_cast<uint8_t>(sign | lo);
  // The midpoint of two FP8 values is exact in double (a few significant bits).
  const double mid = (t.value[lo] + t.value[lo + 1]) / 2;
  int code = magnitude < mid ? lo : lo + 1;
  if (magnitude == mid) code = (lo % 2 == 0) ? lo : lo + 1;  // tie: the even mantissa
  return static_cast<uint8_t>(sign | code);
}

double fp8_bits_to_double(Fp8Format format, uint8_t bits) { return fp8_table(format).value[bits]; }

int64_t fp8_ulp_distance(Fp8Format format, uint8_t a_bits, uint8_t b_bits) {
  const Fp8Table& t = fp8_table(format);
  const double a = t.value[a_bits], b = t.value[b_bits];
  if (!std::isfinite(a) || !std::isfinite(b)) {
    return (a_bits == b_bits && !std::isnan(a)) ? 0 : std::numeric_limits<int64_t>::max();
  }
  // Sign-magnitude to a signed position on the ordered line; +0 and -0 both map to 0.
  auto ordered = [&t](uint8_t bits) -> int64_t {
    const int64_t magnitude = bits & (t.sign - 1);
    return (bits & t.sign) ? -magnitude : magnitude;
  };
  const int64_t diff = ordered(a_bits) - ordered(b_bits);
  return diff < 0 ? -diff : diff;
}

}  // namespace ropejit::ref
