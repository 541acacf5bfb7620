// Op inverse_rope's row of the spec layer's op table (DeepSeek-V4's attention output): one
// [T, num_q_heads, head_dim] tensor whose rope slice turns back by the angle of its token's
// position, in place; no block of its own, and what the op rules out.
#include "spec_ops.h"

namespace ropejit::spec_detail {

extern const SpecOp kSpecOp_inverse_rope = {
    OpKind::inverse_rope,
    "inverse_rope: rotate the rope slice of each head of one [T, num_q_heads, head_dim] tensor by minus its "
    "position's angle, in place (DeepSeek-V4's attention output)",
    nullptr, nullptr, read_one_tensor_rotation, nullptr, nullptr, nullptr};

}  // namespace ropejit::spec_detail
