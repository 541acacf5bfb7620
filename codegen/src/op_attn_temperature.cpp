// Op attn_temperature's row of the codegen op table: attn_temperature.cuh over the q heads,
// one vector per lane; floor_scale and attn_scale baked.
#include "codegen_ops.h"

namespace ropejit::codegen_detail {

namespace {

// attn_temperature.cuh attn_temperature_shape: the q heads, every vector of a head a lane.
WorkShape work_shape_op(const Spec& spec, const Config& c) {
  return make_work_shape(spec.head_dim, spec.head_dim, spec.num_q_heads, 0, true, false, true, false, c.vec,
                         c.heads_per_thread, false);
}

void traits_op(const Plan& plan, SourceText& out) {
  out.line("long long", "kFloorScale", plan.spec.attn_temperature.floor_scale);
  out.float_line("kAttnScale", plan.spec.attn_temperature.attn_scale);
}

std::string tables_op(const Plan&, SourceText&) { return {}; }  // no frequency table

}  // namespace

extern const CodegenOp kCodegenOp_attn_temperature = {
    OpKind::attn_temperature, "attn_temperature",
    [](const Spec&) { return false; },  // a lane scales every element of its vector: no tail apart
    work_shape_op, traits_op, tables_op};

}  // namespace ropejit::codegen_detail
