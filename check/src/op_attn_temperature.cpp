// Op attn_temperature's check row: q after the launch in float64 (HF modeling_llama4.py:
// q * (log1p(floor((p + 1) / floor_scale)) * attn_scale + 1)), and the harness's input q.
#include <cmath>

#include "reference_detail.h"
#include "ropejit/internal/workload.h"

namespace ropejit::ref::detail {
namespace {

RefOutputs reference_op(const Spec& spec, const RefProblem& problem) {
  const int64_t T = problem.num_tokens, D = spec.head_dim, Hq = spec.num_q_heads;
  if (!problem.q.data) bad_problem("op attn_temperature needs problem.q");
  const Sequences seqs = split_sequences(problem);
  RefOutputs out;
  out.token_positions = token_positions(spec, problem, seqs);
  const int64_t token_stride = problem.q.token_stride ? problem.q.token_stride : Hq * D;
  const int64_t head_stride = problem.q.head_stride ? problem.q.head_stride : D;
  out.tensors.push_back(make_tensor("q", RefLayout::token_major, 1, T, Hq, D));
  RefTensor& q = out.tensors.back();
  const AttnTemperature& t = spec.attn_temperature;
  for (int64_t token = 0; token < T; ++token) {
    const int64_t floored = (out.token_positions[token] + 1) / t.floor_scale;  // floor: both >= 0
    const double scale = std::log1p(static_cast<double>(floored)) * t.attn_scale + 1.0;
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t e = 0; e < D; ++e) {
        const double x = load_value(spec.dtype, problem.q.data, token * token_stride + h * head_stride + e);
        const int64_t at = (token * Hq + h) * D + e;
        q.value[at] = x * scale;
        q.scale[at] = std::fabs(x * scale);
      }
  }
  return out;
}

}  // namespace

void problem_inputs_q(const Spec& spec, const HostWorkload& host, RefProblem& problem) {
  if (const HostBuffer* b = host.find("q")) problem.q = {b->bytes.data(), b->desc.row_stride, spec.head_dim};
}

extern const CheckOp kCheckOp_attn_temperature{OpKind::attn_temperature, reference_op, problem_inputs_q};

}  // namespace ropejit::ref::detail
