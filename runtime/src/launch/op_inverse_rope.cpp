// Op inverse_rope's row of the launch op table: one tensor [T, Hq, D] (its q fields) whose rope
// slice turns back in place at the positions of the spec's positions form; nothing else.
#include "launch/launch_checks.h"

namespace ropejit::launch_detail {

namespace {

int64_t bind_op(const FormContext& c, const Args& a, KernelParams& p) {
  return bind_q_inplace(c, a, p, "when the spec's op is inverse_rope (the tensor rotated back in place)");
}

// Only the rope slice of each head moves; the pass-through part is neither read nor written.
void buffers_op(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_q_inplace(s, shape, int64_t(s.num_q_heads) * s.rotary_dim, out);
}

}  // namespace

extern const LaunchOp kLaunchOp_inverse_rope = {OpKind::inverse_rope, bind_op, check_positions_form_host, buffers_op};

}  // namespace ropejit::launch_detail
