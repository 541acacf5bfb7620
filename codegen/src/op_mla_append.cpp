// Op mla_append's row of the codegen op table: mla_append.cuh over q's heads and the latent cache
// row (shape.cuh mla_work_shape), with op rope's frequency lines and tables and kv_lora_rank.
#include "codegen_ops.h"

namespace ropejit::codegen_detail {

namespace {

WorkShape work_shape_op(const Spec& spec, const Config& c) {
  return mla_work_shape(spec.head_dim, spec.rotary_dim, spec.num_q_heads, spec.layout == Layout::interleaved,
                        q_inplace(spec), c.vec, c.heads_per_thread);
}

void traits_op(const Plan& plan, SourceText& out) {
  rope_frequency_traits(plan, out);
  out.line("int", "kKvLoraRank", plan.spec.mla_append.kv_lora_rank);
}

}  // namespace

extern const CodegenOp kCodegenOp_mla_append = {
    OpKind::mla_append, "mla_append",
    [](const Spec& spec) { return !q_inplace(spec); },  // a separate q output takes q_nope too
    work_shape_op, traits_op, rope_frequency_tables};

}  // namespace ropejit::codegen_detail
