// Op attn_temperature's row of the launch op table: q [T, Hq, D] scaled in place at the
// positions of the spec's positions form; no other tensor.
#include "launch/launch_checks.h"

namespace ropejit::launch_detail {

namespace {

int64_t bind_op(const FormContext& c, const Args& a, KernelParams& p) {
  if (c.any) check_present(a.q, "q", "when the spec's op is attn_temperature (q is scaled in place)");
  check_aligned(a.q, c.align, "q");
  p.in[kRoleQ] = token_major(a.q, resolve_stride(a.q_stride, c.Hq * c.D, c.vec, "q_stride", a.num_tokens, c.esize), c.D);
  p.out[kRoleQ] = p.in[kRoleQ];
  bind_positions(c, a, p);
  return a.num_tokens;
}

void buffers_op(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  const int64_t row = int64_t(s.num_q_heads) * s.head_dim;
  out.push_back(data_buffer(s, "q", BufferKind::inout, shape.tokens, row, row, true,
                            bind_to<&ropejit_args::q, &ropejit_args::q_stride>, {"T", "Hq", "D"}, "q_stride"));
  buffers_positions(s, shape, out);
}

}  // namespace

extern const LaunchOp kLaunchOp_attn_temperature = {OpKind::attn_temperature, bind_op, check_positions_form_host,
                                                    buffers_op};

}  // namespace ropejit::launch_detail
