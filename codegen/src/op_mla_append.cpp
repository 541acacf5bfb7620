// Op mla_append's row of the codegen op table: mla_append.cuh over q's heads and the latent cache
// row (shape.cuh mla_work_shape), with op rope's frequency lines and tables and kv_lora_rank.
#include <algorithm>

#include "codegen_ops.h"

namespace ropejit::codegen_detail {

namespace {

// The pass-through lanes exist when q's tail moves (q_out) or k_out takes k_nope (concat_k).
bool tail_moves_op(const Spec& spec) { return !q_inplace(spec) || spec.mla_append.concat_k; }

WorkShape work_shape_op(const Spec& spec, const Config& c) {
  return mla_work_shape(spec.head_dim, spec.rotary_dim, spec.num_q_heads, spec.layout == Layout::interleaved,
                        !tail_moves_op(spec), c.vec, c.heads_per_thread,
                        spec.mla_append.absorbed_q ? spec.mla_append.kv_lora_rank : 0);
}

void traits_op(const Plan& plan, SourceText& out) {
  rope_frequency_traits(plan, out);
  out.line("int", "kKvLoraRank", plan.spec.mla_append.kv_lora_rank);
  out.line("bool", "kConcatK", plan.spec.mla_append.concat_k);
  out.line("bool", "kAbsorbedQ", plan.spec.mla_append.absorbed_q);
  out.line("bool", "kDsMlaCache", ds_mla_cache(plan.spec));
}

// concat_k with q_out holds q's words and k_nope's apart (mla_append.cuh MlaWords): two heads of
// them spill at the 64-register cap (112 bytes on sm_90).
std::optional<std::string> no_loads_ahead_op(const Spec& spec, const Config&) {
  if (spec.mla_append.concat_k && !q_inplace(spec))
    return std::string("concat_k with q_out holds q's and k_nope's words a head: two heads' spill");
  return std::nullopt;
}

// A thread's heads share its lane's angles, and the items of a token (head groups x lanes) carry
// its latent row too; about 64 items a token (DeepSeek-V3's 128 heads: 16 a thread, 19-22% of
// the H100 memory time in the static model; 4 a thread, 38-50%).
void default_heads_op(const Spec& spec, Config& c) { c.heads_per_thread = std::clamp(spec.num_q_heads / 8, 1, 16); }

}  // namespace

extern const CodegenOp kCodegenOp_mla_append = {
    OpKind::mla_append, "mla_append", tail_moves_op, work_shape_op, traits_op, rope_frequency_tables, nullptr,
    no_loads_ahead_op, default_heads_op};

}  // namespace ropejit::codegen_detail
