// Op rope_tensor's row of the codegen op table: inverse_rope's kernel turned forward (rope.cuh
// over the one tensor's heads, no kv heads), with op rope's frequency lines and tables.
#include "codegen_ops.h"

namespace ropejit::codegen_detail {

extern const CodegenOp kCodegenOp_rope_tensor = {
    OpKind::rope_tensor, "rope", [](const Spec&) { return false; },  // in place: the pass-through part stays
    one_tensor_work_shape, rope_frequency_traits, rope_frequency_tables, one_tensor_shared_angles,
    rope_no_loads_ahead};

}  // namespace ropejit::codegen_detail
