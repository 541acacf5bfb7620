// Op inverse_rope's check row: the tensor after the launch in float64, each head's rope pairs
// rotated by minus their angle (HF modeling_deepseek_v4.py: apply_rotary_pos_emb(x, cos, -sin)),
// the rest as it was (its input: the harness's q buffer, problem_inputs_q); op rope_tensor's
// forward turn shares it.
#include <cmath>

#include <fmt/format.h>

#include "reference_detail.h"
#include "ropejit/internal/workload.h"

namespace ropejit::ref::detail {

RefOutputs reference_one_tensor_rotation(const Spec& spec, const RefProblem& problem) {
  const int64_t T = problem.num_tokens, D = spec.head_dim, H = spec.num_q_heads;
  if (!problem.q.data) bad_problem(fmt::format("op {} needs problem.q", to_string(spec.op)));
  const double sign = op_facts(spec.op).inverse ? -1.0 : 1.0;  // inverse_rope turns back
  const Sequences seqs = split_sequences(problem);
  RefOutputs out;
  out.token_positions = token_positions(spec, problem, seqs);
  int64_t max_position = -1;
  for (int64_t p : out.token_positions) max_position = std::max(max_position, p);
  out.run_length = max_position + 1;
  out.freqs = reference_freqs(spec, out.run_length, /*hf_fp32=*/true);
  const int64_t token_stride = problem.q.token_stride ? problem.q.token_stride : H * D;
  const int64_t head_stride = problem.q.head_stride ? problem.q.head_stride : D;
  out.tensors.push_back(make_tensor("q", RefLayout::token_major, 1, T, H, D));
  RefTensor& q = out.tensors.back();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t base = (t * H + h) * D;
      for (int64_t e = 0; e < D; ++e) {  // the pass-through part stays
        q.value[base + e] = load_value(spec.dtype, problem.q.data, t * token_stride + h * head_stride + e);
        q.scale[base + e] = std::fabs(q.value[base + e]);
      }
      rotate_row_pairs(spec, out.freqs, out.token_positions[t], sign, q.value, q.scale, base,
                       [&](int i) { return pair_elements(spec, i); });
    }
  return out;
}

extern const CheckOp kCheckOp_inverse_rope{OpKind::inverse_rope, reference_one_tensor_rotation, problem_inputs_q};

}  // namespace ropejit::ref::detail
