// Op rope_tensor's row of the spec layer's op table: one [T, num_q_heads, head_dim] tensor whose
// rope slice turns forward by the angle of its token's position, in place — a tensor rotated
// without a partner at the same positions (DeepSeek-V4's indexer queries and compressed keys).
#include "spec_ops.h"

namespace ropejit::spec_detail {

extern const SpecOp kSpecOp_rope_tensor = {
    OpKind::rope_tensor,
    "rope_tensor: rotate the rope slice of each head of one [T, num_q_heads, head_dim] tensor by its position's "
    "angle, in place (a tensor without a partner at the same positions: DeepSeek-V4's indexer queries, its "
    "compressed keys)",
    nullptr, nullptr, read_one_tensor_rotation, nullptr, nullptr, nullptr};

}  // namespace ropejit::spec_detail
