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

// An FP8 cache moves one byte per element, so the per-element work weighs twice or four times as
// much against memory: every kv head of a key shares its angles (up to 8 a thread).
// A re-rotated key first finds its slot: with varlen positions a binary search over the
// sequences, with block tables the table's entry, each a dependent load before its first head's
// (rows.cuh locate_row). 16 heads a thread spread that chain (Phi-3.5's LongRoPE switch over 64
// sequences, 8 levels: 4 heads 51 % of the H200's copy ceiling in the static model, 16 heads 90 %).
void default_heads_op(const Spec& spec, Config& c) {
  const auto take = [&](int most) {
    Config trial = c;
    trial.heads_per_thread = std::min(total_heads(spec), most);
    if (!config_problem(spec, trial)) c = trial;
  };
  if (quantized_cache(spec)) take(8);
  if (spec.io.positions == PositionsForm::varlen || spec.io.cache_index == CacheIndex::block_tables) take(16);
}

}  // namespace

extern const CodegenOp kCodegenOp_rerotate = {
    OpKind::rerotate, "rerotate",
    [](const Spec&) { return false; },  // the cached tail stays where it is
    work_shape_op, traits_op, tables_op, nullptr, loads_ahead_always, default_heads_op};

}  // namespace ropejit::codegen_detail
