#pragma once
// Helpers shared by the reference's own tests (test_reference*.cpp).
#include <cstdio>
#include <random>
#include <vector>

#include "ropejit/spec.h"
#include "ropejit/fp_convert.h"
#include "ropejit/check/reference.h"

namespace ropejit::ref::test_util {

/// A small spec for rotation tests.
inline Spec small_spec(int head_dim, int rotary_dim, int hq, int hkv, Layout layout, DType dtype) {
  Spec s;
  s.head_dim = head_dim;
  s.rotary_dim = rotary_dim;
  s.num_q_heads = hq;
  s.num_kv_heads = hkv;
  s.layout = layout;
  s.dtype = dtype;
  s.max_position_embeddings = 4096;
  s.angle = AnglePrecision::exact;
  return s;
}

inline std::mt19937_64& rng() {
  static std::mt19937_64 engine([] {
    const uint64_t seed = std::random_device{}();
    std::printf("test_reference random seed %llu\n", static_cast<unsigned long long>(seed));
    return seed;
  }());
  return engine;
}

/// Fresh random values in [-2, -0.25] U [0.25, 2], exactly representable in `dtype`.
inline std::vector<double> random_values(DType dtype, size_t n) {
  std::uniform_real_distribution<double> magnitude(0.25, 2.0);
  std::vector<double> v(n);
  for (double& x : v) x = round_to_dtype(dtype, (rng()() & 1 ? 1 : -1) * magnitude(rng()));
  return v;
}

constexpr double kFloatUlp = 1.0 / (1 << 23);  // relative spacing of float32 at 1

/// Random separate q/k/v inputs (and bias) for a spec, kept as values and as bytes.
struct Inputs {
  std::vector<double> q, k, v, bias;
  std::vector<uint8_t> q_bytes, k_bytes, v_bytes, bias_bytes;
  Inputs(const Spec& spec, int64_t tokens) {
    const size_t D = static_cast<size_t>(spec.head_dim), T = static_cast<size_t>(tokens);
    q = random_values(spec.dtype, T * spec.num_q_heads * D);
    k = random_values(spec.dtype, T * spec.num_kv_heads * D);
    v = random_values(spec.dtype, T * spec.num_kv_heads * D);
    bias = random_values(spec.dtype, (spec.num_q_heads + 2 * spec.num_kv_heads) * D);
    q_bytes = encode_values(spec.dtype, q);
    k_bytes = encode_values(spec.dtype, k);
    v_bytes = encode_values(spec.dtype, v);
    bias_bytes = encode_values(spec.dtype, bias);
  }
  RefProblem problem(const Spec& spec, int64_t tokens) const {
    RefProblem p;
    p.num_tokens = tokens;
    p.q.data = q_bytes.data();
    p.k.data = k_bytes.data();
    p.v.data = v_bytes.data();
    if (spec.io.qkv_bias) p.bias = bias_bytes.data();
    return p;
  }
  /// Head row of a role at a token, plus the bias when asked.
  std::vector<double> row(const Spec& spec, int role, int64_t token, int64_t head, bool with_bias) const {
    const std::vector<double>& src = role == 0 ? q : role == 1 ? k : v;
    const int64_t H = role == 0 ? spec.num_q_heads : spec.num_kv_heads, D = spec.head_dim;
    const int64_t bias_head = (role == 0 ? 0 : role == 1 ? spec.num_q_heads : spec.num_q_heads + spec.num_kv_heads) + head;
    std::vector<double> r(static_cast<size_t>(D));
    for (int64_t e = 0; e < D; ++e) r[e] = src[(token * H + head) * D + e] + (with_bias ? bias[bias_head * D + e] : 0.0);
    return r;
  }
};

// ---------------------------------------------------------------- compare

/// Bytes of expected values correctly rounded to the storage type.
inline std::vector<uint8_t> rounded_bytes(DType dtype, const RefTensor& t) { return encode_values(dtype, t.value); }

}  // namespace ropejit::ref::test_util
