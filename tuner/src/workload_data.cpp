// Random workload data in the storage types, and the tuner's output comparison.
#include "workload_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>

namespace ropejit {

namespace {

uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even (inputs are finite)
  return static_cast<uint16_t>(bits >> 16);
}

float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_fp16(float f) {
  // Inputs lie in [-1, 1]: normal or subnormal halves, never overflow.
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const float a = std::fabs(f);
  if (a < 6.103515625e-05f) return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a / 5.9604644775390625e-08f)));
  int exponent = 0;
  const float mantissa = std::frexp(a, &exponent);  // a = mantissa * 2^exponent, mantissa in [0.5, 1)
  int m = static_cast<int>(std::nearbyint((mantissa * 2.0f - 1.0f) * 1024.0f));
  int e = exponent - 1 + 15;
  if (m == 1024) {
    m = 0;
    ++e;
  }
  return static_cast<uint16_t>(sign | (e << 10) | m);
}

float fp16_to_float(uint16_t h) {
  const int sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float v;
  if (e == 0) v = std::ldexp(float(m), -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp(float(m + 1024), e - 25);
  return sign ? -v : v;
}

std::string random_tensor(DType dtype, int64_t elements, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int esize = dtype_size(dtype);
  std::string bytes(static_cast<size_t>(elements * esize), '\0');
  for (int64_t i = 0; i < elements; ++i) {
    float f = dist(rng);
    if (f == 0.0f) f = 0.5f;  // never zeros
    if (dtype == DType::fp32) std::memcpy(&bytes[size_t(i) * 4], &f, 4);
    else {
      const uint16_t h = dtype == DType::bf16 ? float_to_bf16(f) : float_to_fp16(f);
      std::memcpy(&bytes[size_t(i) * 2], &h, 2);
    }
  }
  return bytes;
}

float element(DType dtype, const std::string& bytes, size_t i) {
  if (dtype == DType::fp32) {
    float f;
    std::memcpy(&f, &bytes[i * 4], 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, &bytes[i * 2], 2);
  return dtype == DType::bf16 ? bf16_to_float(h) : fp16_to_float(h);
}

}  // namespace

HostWorkload make_host_workload(const Spec& spec, const WorkloadShape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  HostWorkload w;
  const int64_t T = shape.tokens, D = spec.head_dim, Hq = spec.num_q_heads, Hkv = spec.num_kv_heads;
  if (spec.io.input == InputForm::packed_qkv) {
    w.inputs.push_back({"qkv", random_tensor(spec.dtype, T * (Hq + 2 * Hkv) * D, rng)});
  } else {
    w.inputs.push_back({"q", random_tensor(spec.dtype, T * Hq * D, rng)});
    w.inputs.push_back({"k", random_tensor(spec.dtype, T * Hkv * D, rng)});
    if (spec.io.copy_v) w.inputs.push_back({"v", random_tensor(spec.dtype, T * Hkv * D, rng)});
  }
  if (spec.io.output != OutputForm::inplace) {
    const int64_t rows = shape.rows;
    const int64_t esize = dtype_size(spec.dtype);
    w.outputs.push_back({"q_out", std::string(size_t(rows * Hq * D * esize), '\0')});
    w.outputs.push_back({"k_out", std::string(size_t(rows * Hkv * D * esize), '\0')});
    if (spec.io.copy_v) w.outputs.push_back({"v_out", std::string(size_t(rows * Hkv * D * esize), '\0')});
  }
  if (spec.io.qkv_bias) w.bias = random_tensor(spec.dtype, (Hq + 2 * Hkv) * D, rng);
  const int64_t max_position = std::max<int64_t>(1, std::min<int64_t>(spec.max_position_embeddings, int64_t(1) << 30));
  if (spec.io.positions == PositionsForm::varlen) {
    w.cu_seqlens.push_back(0);
    for (int b = 0; b < shape.batch; ++b) {
      const int64_t length = std::min<int64_t>(shape.max_seq_len, T - w.cu_seqlens.back());
      const int64_t room = std::max<int64_t>(1, max_position - length);
      w.start_pos.push_back(std::uniform_int_distribution<int64_t>(0, room - 1)(rng));
      w.seq_len = std::max(w.seq_len, w.start_pos.back() + length);
      w.cu_seqlens.push_back(static_cast<int32_t>(w.cu_seqlens.back() + length));
    }
  } else {
    std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(max_position - 1));
    for (int64_t t = 0; t < T; ++t) {
      w.positions.push_back(dist(rng));
      w.seq_len = std::max<int64_t>(w.seq_len, w.positions.back() + 1);
    }
  }
  return w;
}

std::string compare_output_bytes(DType dtype, const std::string& name, const std::string& actual,
                                  const std::string& reference) {
  if (actual.size() != reference.size())
    return fmt::format("{}: {} bytes, reference {} bytes", name, actual.size(), reference.size());
  const double relative = dtype == DType::fp32 ? 1e-5 : (dtype == DType::bf16 ? 1.0 / 64 : 1.0 / 512);
  const size_t n = actual.size() / size_t(dtype_size(dtype));
  for (size_t i = 0; i < n; ++i) {
    const float a = element(dtype, actual, i), r = element(dtype, reference, i);
    const bool a_nan = std::isnan(a), r_nan = std::isnan(r);
    const bool same = (a_nan && r_nan) ||
                      (!a_nan && !r_nan && std::fabs(double(a) - double(r)) <= relative * std::max(1.0, std::fabs(double(r))));
    if (!same) return fmt::format("{}[{}] = {} but the reference (default config) gives {}", name, i, a, r);
  }
  return {};
}

}  // namespace ropejit
