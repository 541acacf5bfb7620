// Op inverse_rope's row of the codegen op table: rope.cuh's kernel over the one tensor's heads
// (the Traits say no kv heads and kInverseRotation), with op rope's frequency lines and tables.
#include "codegen_ops.h"

namespace ropejit::codegen_detail {

namespace {

// rope.cuh rope_shape with kNumKvHeads 0, in place, no copied v, bias or norm: the rotating lanes
// of each head (its pass-through part is left where it is).
WorkShape work_shape_op(const Spec& spec, const Config& c) {
  return make_work_shape(spec.head_dim, spec.rotary_dim, spec.num_q_heads, 0, spec.layout == Layout::interleaved,
                         false, true, false, c.vec, c.heads_per_thread, false);
}

SharedAngleShape shared_angles_op(const Plan& plan) {
  const Config& c = plan.config;
  return shared_angle_shape(work_shape_op(plan.spec, c), plan.freqs.rotated_pairs, c.block_threads,
                            c.sincos == SinCosMode::table, false);
}

}  // namespace

extern const CodegenOp kCodegenOp_inverse_rope = {
    OpKind::inverse_rope, "rope", [](const Spec&) { return false; },  // in place: the pass-through part stays
    work_shape_op, rope_frequency_traits, rope_frequency_tables, shared_angles_op, rope_no_loads_ahead};

}  // namespace ropejit::codegen_detail
