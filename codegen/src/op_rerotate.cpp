// Op rerotate's row of the codegen op table: rerotate.cuh, the K heads' rotating lanes, the
// old parameters' flags, tables and the ratio of attention factors.
#include <algorithm>

#include "codegen_ops.h"

namespace ropejit::codegen_detail {

namespace {

// rerotate.cuh rerotate_shape: the K heads, rotating lanes only.
WorkShape work_shape_op(const Spec& spec, const Config& c) {
  return make_work_shape(spec.head_dim, spec.rotary_dim, 0, spec.num_kv_heads, spec.layout == Layout::interleaved,
                         false, true, false, c.vec, c.heads_per_thread, false);
}

// Pairs past both tables' rotated_pairs have no angle; the ratio replaces each factor (an unused
// float member would still be a global in the PTX, which the pruned standalone file lacks).
void traits_op(const Plan& plan, SourceText& out) {
  out.line("int", "kRotatedPairs", std::max(plan.freqs.rotated_pairs, plan.from_freqs.rotated_pairs));
  out.flags("FromRope", plan.spec.from_rope.type);  // the old parameters (rerotate.cuh delta_angles)
  out.float_line("kAttentionRatio", plan.freqs.attention_factor / plan.from_freqs.attention_factor);
}

std::string tables_op(const Plan& plan, SourceText& out) {
  out.table("kInvFreq", plan.freqs.inv_freq);
  const bool has_long = !plan.freqs.inv_freq_long.empty();
  if (has_long) out.table("kInvFreqLong", plan.freqs.inv_freq_long);
  out.table("kInvFreqFrom", plan.from_freqs.inv_freq);
  const bool from_long = !plan.from_freqs.inv_freq_long.empty();
  if (from_long) out.table("kInvFreqFromLong", plan.from_freqs.inv_freq_long);
  return fmt::format("kInvFreq, {}, kInvFreqFrom, {}", has_long ? "kInvFreqLong" : "kInvFreq",
                     from_long ? "kInvFreqFromLong" : "kInvFreqFrom");
}

}  // namespace

extern const CodegenOp kCodegenOp_rerotate = {
    OpKind::rerotate, "rerotate",
    [](const Spec&) { return false; },  // the cached tail stays where it is
    work_shape_op, traits_op, tables_op, nullptr, loads_ahead_always};

}  // namespace ropejit::codegen_detail
