// Op inverse_rope's row of the codegen op table: rope.cuh's kernel over the one tensor's heads
// (the Traits say no kv heads and kInverseRotation), with op rope's frequency lines and tables.
#include "codegen_ops.h"

namespace ropejit::codegen_detail {

extern const CodegenOp kCodegenOp_inverse_rope = {
    OpKind::inverse_rope, "rope", [](const Spec&) { return false; },  // in place: the pass-through part stays
    one_tensor_work_shape, rope_frequency_traits, rope_frequency_tables, one_tensor_shared_angles,
    rope_no_loads_ahead};

}  // namespace ropejit::codegen_detail
