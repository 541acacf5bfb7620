#pragma once
// Private to check/src: the helpers every op's reference shares, and the per-op table through
// which reference_outputs and the harness reach an op's own code (one row per OpKind).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ropejit/check/reference.h"
#include "ropejit/fp_convert.h"

namespace ropejit {
struct HostWorkload;
}  // namespace ropejit

namespace ropejit::ref::detail {

/// Throws std::invalid_argument("reference_outputs: " + what).
[[noreturn]] void bad_problem(const std::string& what);

/// Sequence and row of every token, from cu_seqlens (empty when not given).
struct Sequences {
  int64_t batch = 0;
  std::vector<int64_t> sequence_of_token;
  std::vector<int64_t> row_of_token;
};

/// The sequences of problem.cu_seqlens, checked against num_tokens (batch 0 without them).
Sequences split_sequences(const RefProblem& problem);

/// Position of every token in the spec's positions form (mrope: its temporal stream).
std::vector<int64_t> token_positions(const Spec& spec, const RefProblem& problem, const Sequences& seqs);

/// The cache slot of every token (-1: not cached), from the slot mapping, or from its
/// sequence's block table at its position; checked against the caches' size.
std::vector<int64_t> cache_slots(const Spec& spec, const RefProblem& problem, const Sequences& seqs,
                                 const std::vector<int64_t>& positions);

/// A zero tensor of `layout` (padded_bhsd: every element padding until a row is stored).
/// The least power of two >= x > 0 (ue8m0 scales; frexp's mantissa is exactly 0.5 on a power of two).
inline double pow2_ceil(double x) {
  int exponent = 0;
  const double mantissa = std::frexp(x, &exponent);
  return std::ldexp(1.0, mantissa == 0.5 ? exponent - 1 : exponent);
}

RefTensor make_tensor(const std::string& name, RefLayout layout, int64_t batch, int64_t rows, int64_t heads,
                      int64_t head_dim);

/// A paged cache [pages, Hkv, page_size, D] of the spec's cache dtype, every element untouched
/// until a token's slot writes it; `fp8_scale` (named `scale_name` in errors) applies to FP8 caches.
RefTensor make_cache_tensor(const Spec& spec, const RefProblem& problem, const std::string& name, double fp8_scale,
                            const std::string& scale_name);
/// The same with `heads` heads of `head_dim` elements a slot (MLA's latent cache: 1 of kv_lora_rank + d).
RefTensor make_cache_tensor(const Spec& spec, const RefProblem& problem, const std::string& name, double fp8_scale,
                            const std::string& scale_name, int64_t heads, int64_t head_dim);

/// The FP8 format of a cache dtype (auto_ reads as e4m3; callers check for FP8 first).
Fp8Format fp8_format(CacheDType type);

/// The check layer's part of one op: its float64 reference and its share of the harness's
/// reference problem.
struct CheckOp {
  OpKind op;
  /// Expected outputs of one launch (reference_outputs for this op).
  RefOutputs (*reference)(const Spec& spec, const RefProblem& problem);
  /// Fills the problem's op-specific inputs from the harness's workload (the shared ones,
  /// positions, sequences and cache indexing, are the harness's).
  void (*problem_inputs)(const Spec& spec, const HostWorkload& host, RefProblem& problem);
};

/// Rotates the rotary pairs of one row in place: pair i's elements base + at(i), by `sign` times its
/// angle at `position`, times the attention factor (proportional's frequency-0 pairs only scaled);
/// a rotated element's scale becomes its pair's magnitude.
template <class At>
void rotate_row_pairs(const Spec& spec, const RefFreqs& freqs, int64_t position, double sign, std::vector<double>& value,
                      std::vector<double>& scale, int64_t base, At at) {
  const double s = freqs.attention_factor;
  for (int i = 0; i < spec.rotary_dim / 2; ++i) {
    const auto [a, b] = at(i);
    const double x = value[base + a], y = value[base + b];
    if (freqs.inv_freq[i] == 0.0) {
      value[base + a] = x * s;
      value[base + b] = y * s;
      continue;
    }
    const auto [rx, ry] = rotate_pair(x, y, sign * reference_angle(spec, position, freqs.inv_freq[i]), s);
    value[base + a] = rx;
    value[base + b] = ry;
    scale[base + a] = scale[base + b] = s * std::hypot(x, y);
  }
}

/// The problem input of an op over one tensor's heads (attn_temperature, inverse_rope): the
/// workload's q buffer.
void problem_inputs_q(const Spec& spec, const HostWorkload& host, RefProblem& problem);

/// The float64 outputs of an op that rotates one tensor's heads in place (inverse_rope,
/// rope_tensor): each head's rope pairs turned by the angle, negated where the op's facts say
/// inverse, the rest as it was (defined in op_inverse_rope.cpp).
RefOutputs reference_one_tensor_rotation(const Spec& spec, const RefProblem& problem);

/// Each op's row (kCheckOp_<op>), defined in the op's own file (op_<op>.cpp; op rope's in reference_rope.cpp).
#define ROPEJIT_CHECK_OP_DECLARE(name) extern const CheckOp kCheckOp_##name;
ROPEJIT_OPS(ROPEJIT_CHECK_OP_DECLARE)
#undef ROPEJIT_CHECK_OP_DECLARE

/// The row of `op`.
const CheckOp& check_op(OpKind op);

}  // namespace ropejit::ref::detail
