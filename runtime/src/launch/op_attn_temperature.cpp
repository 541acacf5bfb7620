// Op attn_temperature's row of the launch op table: q [T, Hq, D] scaled in place at the
// positions of the spec's positions form; no other tensor.
#include "launch/launch_checks.h"

namespace ropejit::launch_detail {

namespace {

int64_t bind_op(const FormContext& c, const Args& a, KernelParams& p) {
  return bind_q_inplace(c, a, p, "when the spec's op is attn_temperature (q is scaled in place)");
}

void buffers_op(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_q_inplace(s, shape, int64_t(s.num_q_heads) * s.head_dim, out);  // every element moves
}

}  // namespace

extern const LaunchOp kLaunchOp_attn_temperature = {OpKind::attn_temperature, bind_op, check_positions_form_host,
                                                    buffers_op};

}  // namespace ropejit::launch_detail
