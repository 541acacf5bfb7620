// Plan → Source: thin generated CUDA text (includes, constexpr traits, baked tables, one entry).
#include "ropejit/source.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>

#include <fmt/format.h>

#include "codegen_ops.h"
#include "ropejit/embedded_templates.h"

namespace ropejit {

namespace codegen_detail {

// "padded_bhsd" -> "PaddedBhsd".
std::string camel_case(std::string_view name) {
  std::string out;
  bool upper = true;
  for (char ch : name) {
    if (ch == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch))) : ch;
    upper = false;
  }
  return out;
}

// Exact float literal (hex) of the constant `name`: the baked value is the float32 HF computes,
// bit for bit. A value that is no finite float32 would print as "inff"/"nanf", which does not
// compile: refused, naming the constant (spec validation keeps specs from getting here).
// `index` >= 0: the element of the table `name`.
std::string float_literal(std::string_view name, double v, int index) {
  const float f = static_cast<float>(v);
  if (!std::isfinite(f))
    throw Error(Status::internal, fmt::format("generated source: {}{} = {} is no finite float32, so it has no literal",
                                              name, index >= 0 ? fmt::format("[{}]", index) : "", v));
  return fmt::format("{:a}f", f);
}

void SourceText::table(const char* name, const std::vector<double>& values) {
  std::string& out = text;
  out += fmt::format("__device__ const float {}[{}] = {{", name, values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    out += (i % 6 == 0) ? "\n   " : "";
    out += " " + float_literal(name, values[i], static_cast<int>(i)) + ",";
  }
  out += "\n};\n";
}


namespace {

// Op rope's row: rope.cuh over q, k (and v) heads; its attention factor(s) baked.
WorkShape rope_work_shape(const Spec& spec, const Config& c) {
  return with_norm_scope(make_work_shape(spec.head_dim, spec.rotary_dim, spec.num_q_heads, spec.num_kv_heads,
                                         spec.layout == Layout::interleaved, spec.io.copy_v,
                                         spec.io.output == OutputForm::inplace, tail_changes(spec), c.vec,
                                         c.heads_per_thread, cooperative_heads(spec), c.spread),
                         all_heads_segment(spec), c.heads_per_thread, c.block_threads);  // as rope.cuh rope_shape
}

}  // namespace

void rope_frequency_traits(const Plan& plan, SourceText& out) {
  // Pairs from here on have inv_freq 0 (proportional) in every table: the kernel leaves them be.
  out.line("int", "kRotatedPairs", plan.freqs.rotated_pairs);
  // The caller's cos/sin carry their own factor (an unused float member would still be a PTX
  // global, which the pruned standalone file lacks).
  if (caller_cos_sin(plan.spec)) return;
  out.float_line("kAttentionFactor", plan.freqs.attention_factor);
  if (plan.spec.rope.type == RopeType::longrope)  // the long table's own factor (PhiMoE)
    out.float_line("kAttentionFactorLong", plan.freqs.attention_factor_long);
}

std::string rope_frequency_tables(const Plan& plan, SourceText& out) {
  out.table("kInvFreq", plan.freqs.inv_freq);
  const bool has_long = !plan.freqs.inv_freq_long.empty();
  if (has_long) out.table("kInvFreqLong", plan.freqs.inv_freq_long);
  return fmt::format("kInvFreq, {}", has_long ? "kInvFreqLong" : "kInvFreq");
}

namespace {

SharedAngleShape rope_shared_angles(const Plan& plan) {
  const Config& c = plan.config;
  const Spec& s = plan.spec;
  return shared_angle_shape(rope_work_shape(s, c), plan.freqs.rotated_pairs, c.block_threads,
                            c.sincos == SinCosMode::table || caller_cos_sin(s), all_heads_segment(s));
}

}  // namespace

WorkShape one_tensor_work_shape(const Spec& spec, const Config& c) {
  return make_work_shape(spec.head_dim, spec.rotary_dim, spec.num_q_heads, 0, spec.layout == Layout::interleaved,
                         false, true, false, c.vec, c.heads_per_thread, false);
}

SharedAngleShape one_tensor_shared_angles(const Plan& plan) {
  const Config& c = plan.config;
  return shared_angle_shape(one_tensor_work_shape(plan.spec, c), plan.freqs.rotated_pairs, c.block_threads,
                            c.sincos == SinCosMode::table, false);
}

std::optional<std::string> rope_no_loads_ahead(const Spec& spec, const Config& c) {
  if (all_heads_segment(spec)) return std::string("the all-heads kernel (qk_norm.scope all, per-token q scales) reads each head twice");
  const WorkShape w = work_shape(spec, c);  // the op's own (one tensor's: q's heads)
  if (w.whole_heads) return std::string("a thread owning whole QK-norm heads walks their lanes, not their heads");
  if (w.role_slots && cooperative_heads(spec))
    return std::string("the QK-norm's role slots carry k's vectors out of the heads loop");
  return std::nullopt;
}

extern const CodegenOp kCodegenOp_rope = {
    OpKind::rope, "rope",
    [](const Spec& spec) { return tail_moves(spec.io.output == OutputForm::inplace, tail_changes(spec)); },
    rope_work_shape, rope_frequency_traits, rope_frequency_tables, rope_shared_angles, rope_no_loads_ahead,
    rope_default_heads};

#define ROPEJIT_CODEGEN_OP_DECLARE(name) extern const CodegenOp kCodegenOp_##name;
ROPEJIT_OPS(ROPEJIT_CODEGEN_OP_DECLARE)
#undef ROPEJIT_CODEGEN_OP_DECLARE

const CodegenOp& codegen_op(OpKind op) {
#define ROPEJIT_CODEGEN_OP_ROW(name) &kCodegenOp_##name,
  static const CodegenOp* const rows[] = {ROPEJIT_OPS(ROPEJIT_CODEGEN_OP_ROW)};
#undef ROPEJIT_CODEGEN_OP_ROW
  const CodegenOp& row = *rows[static_cast<int>(op)];
  if (row.op != op) throw Error(Status::internal, fmt::format("codegen op table out of order at {}", to_string(op)));
  return row;
}

}  // namespace codegen_detail

using namespace codegen_detail;

namespace {

constexpr const char* kEntryName = "ropejit_rope";

const char* storage_tag(DType t) {
  switch (t) {
    case DType::fp32: return "ropejit::StorageF32";
    case DType::fp16: return "ropejit::StorageF16";
    case DType::bf16: return "ropejit::StorageBF16";
  }
  return "?";
}

// The KV cache's element type: the spec's, or an FP8 format.
// The element tag of an FP8 choice (a cache's, q_out's), or the spec's storage for auto.
const char* fp8_storage_tag(const Spec& s, CacheDType type) {
  switch (type) {
    case CacheDType::auto_: return storage_tag(s.dtype);
    case CacheDType::fp8_e4m3: return "ropejit::StorageE4M3";
    case CacheDType::fp8_e5m2: return "ropejit::StorageE5M2";
    case CacheDType::nvfp4: return "ropejit::StorageE2M1";
  }
  return "?";
}

}  // namespace

Hash128 hash_templates(const std::vector<EmbeddedFile>& files) {
  std::string all;
  for (const EmbeddedFile& f : files)
    all += fmt::format("{}:{}\n{}:{}\n", f.name.size(), f.name, f.text.size(), f.text);
  return hash_bytes(all);
}

Hash128 templates_hash() {
  static const Hash128 hash = hash_templates(embedded_templates());
  return hash;
}

Plan make_plan(const Spec& spec, const Config& config) {
  if (auto problem = config_problem(spec, config))
    throw Error(Status::unsupported, fmt::format("config {} cannot implement spec \"{}\": {}",
                                                 config_name(config), spec.name, *problem));
  Plan plan{spec, config, compute_freqs(spec, FreqMode::hf_fp32), {}};
  if (written_rope(spec)) plan.from_freqs = compute_freqs(from_rope_spec(spec), FreqMode::hf_fp32);
  return plan;
}

SharedAngleShape shared_angles(const Plan& plan) {
  const CodegenOp& op = codegen_op(plan.spec.op);
  return op.shared_angles ? op.shared_angles(plan) : SharedAngleShape{};
}

Source generate_source(const Plan& plan) {
  const Spec& s = plan.spec;
  const Config& c = plan.config;
  std::string t;
  t.reserve(4096);
  // Only what changes the code goes in: configs differing in launch-only fields (grid mode)
  // share one source, hence one compile and one cache entry.
  t += fmt::format("// Generated by ropejit {}. spec \"{}\" {}.\n", version(), s.name, spec_hash(s).hex());
  const CodegenOp& op = codegen_op(s.op);
  SourceText text{t};
  t += fmt::format("#include \"ropejit/{}.cuh\"\n\nnamespace {{\n\nstruct Traits {{\n", op.kernel);
  t += fmt::format("  typedef {} Storage;\n", storage_tag(s.dtype));
  if (s.io.q_output_dtype != CacheDType::auto_)  // FP8 q_out (rope.cuh store_head)
    t += fmt::format("  typedef {} QOutStorage;\n", fp8_storage_tag(s, s.io.q_output_dtype));
  auto line = [&](const char* type, const char* name, auto value) { text.line(type, name, value); };
  line("int", "kHeadDim", s.head_dim);
  line("int", "kRotaryDim", s.rotary_dim);
  line("int", "kRotaryBegin", rotary_begin(s));  // rotary_slice: where a head's rotated elements start
  line("int", "kPassBegin", pass_begin(s));      // ... and its pass-through ones
  line("int", "kNumQHeads", s.num_q_heads);
  // The kv heads the kernel touches: none for an op over q's heads alone (rope.cuh rope_shape).
  const OpHeads heads = op_facts(s.op).heads;
  line("int", "kNumKvHeads", heads == OpHeads::q || heads == OpHeads::q_latent ? 0 : s.num_kv_heads);
  line("bool", "kInverseRotation", op_facts(s.op).inverse || s.inverse);  // angles.cuh: sin negated
  line("bool", "kInterleaved", s.layout == Layout::interleaved);
  line("bool", "kCopyV", s.io.copy_v);
  line("bool", "kHasBias", s.io.qkv_bias);
  text.flags("Input", s.io.input);
  text.flags("Output", s.io.output);
  text.flags("Positions", s.io.positions);
  if (s.io.positions == PositionsForm::mrope) {  // pairs per position stream (rope.cuh mrope_stream)
    line("int", "kMropeTemporal", s.io.mrope_section.at(0));
    line("int", "kMropeHeight", s.io.mrope_section.at(1));
    line("int", "kMropeWidth", s.io.mrope_section.at(2));
    line("bool", "kMropeInterleaved", s.io.mrope_interleaved);
  }
  if (per_pair_positions(s)) line("int", "kPositionStreams", position_streams(s));  // rows.cuh locate_row
  if (s.io.positions == PositionsForm::axes) {  // which axis each pair takes (rows.cuh axis_stream)
    line("bool", "kAxesAlternating", s.io.axes.placement == AxisPlacement::alternating);
    int end = 0;  // contiguous: the first pair past axes 0, 1, 2 (past the pairs when there is no such axis)
    for (int a = 0; a < kMaxAxes - 1; ++a) {
      end += a < position_streams(s) ? s.io.axes.pairs[a] : 0;
      text.line("int", fmt::format("kAxisEnd{}", a).c_str(), a < position_streams(s) ? end : s.rotary_dim);
    }
  }
  if (paged_kv(s)) {  // k and v into a paged cache (rope.cuh locate_cache_slot, cache_head)
    t += fmt::format("  typedef {} CacheStorage;\n", fp8_storage_tag(s, s.io.cache_dtype));
    line("int", "kPageSize", s.io.page_size);
    line("bool", "kCacheFp8", quantized_cache(s) && !nvfp4_cache(s));
    line("bool", "kCacheNvfp4", nvfp4_cache(s));  // head_lanes.cuh store_nvfp4_vector
    line("bool", "kCacheDeepseekV4", deepseek_v4_cache(s));  // ... store_deepseek_v4_vector
    line("bool", "kVScaleInterleave4", s.io.v_scale_layout == BlockScaleLayout::interleave4);
    text.flags("CacheIndex", s.io.cache_index);
    line("bool", "kQOutputInplace", s.io.q_output == QOutput::inplace);
  }
  line("bool", "kQOutFp8", s.io.q_output_dtype != CacheDType::auto_);
  line("bool", "kQScalePerHead", q_scale_per_head(s));          // rope.cuh per_head_scale
  line("bool", "kQScalePerToken", q_scale_per_token(s));        // qk_norm_all.cuh: amax over the row
  line("bool", "kAllHeadsSegment", all_heads_segment(s));       // qk_norm_all.cuh's kernel
  line("bool", "kCacheScalePerHead", cache_scale_per_head(s));  // ... for the k and v cache heads
  line("bool", "kIndexerCache", indexer_cache(s));              // ... after each page's codes (rope.cuh)
  line("bool", "kScaleUe8m0", s.io.scale_rounding == ScaleRounding::ue8m0);  // head_lanes.cuh fp8_group_scale
  line("bool", "kCooperativeHeads", cooperative_heads(s));      // a head's lanes meet at shuffles
  line("bool", "kPerRoleShuffles", per_role_shuffles(s));       // ... only some roles' (shape.cuh)
  line("bool", "kQkNorm", s.qk_norm.enabled);
  line("bool", "kNormQ", norm_of_q(s));  // false: a k-only norm (an indexer's k_norm)
  line("bool", "kHadamard", s.hadamard);  // head_lanes.cuh hadamard_lane: q and k heads after the rotation
  if (s.hadamard) text.float_line("kHadamardScale", 1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  line("bool", "kNormLayer", s.qk_norm.enabled && s.qk_norm.type == NormType::layernorm);  // mean subtracted
  line("bool", "kNormBias", s.qk_norm.enabled && s.qk_norm.bias == NormWeight::per_head);  // a LayerNorm's bias
  text.flags("QkNormScope", s.qk_norm.scope);  // kQkNormScopeAll: qk_norm_all.cuh's kernel
  if (s.qk_norm.enabled) {  // RMSNorm / LayerNorm of heads before the rotation (rope.cuh head_norm)
    text.float_line("kNormEps", s.qk_norm.eps);
    line("bool", "kNormWeight", s.qk_norm.weight == NormWeight::per_head);
    text.float_line("kNormWeightOffset", s.qk_norm.weight_offset);
  }
  line("bool", "kAngleExact", s.angle == AnglePrecision::exact);
  text.flags("Rope", s.rope.type);  // kRopeDynamic, kRopeLongrope, ...: run-time frequency hooks
  op.traits(plan, text);
  line("int", "kVec", c.vec);
  line("int", "kHeadsPerThread", c.heads_per_thread);
  line("int", "kBlockThreads", c.block_threads);  // angles.cuh: rows one block pass covers
  // A table row per position: the runtime's fp32 table, or the caller's cache (angles.cuh).
  line("bool", "kTableSinCos", c.sincos == SinCosMode::table || caller_cos_sin(s));
  line("bool", "kCallerCosSin", caller_cos_sin(s));
  if (caller_cos_sin(s)) t += fmt::format("  typedef {} CosSinStorage;\n", storage_tag(s.io.cos_sin_dtype));
  line("bool", "kLoadsAhead", c.ahead);  // rope.cuh heads_trips
  line("bool", "kSpreadTail", c.spread);  // Config::spread: a partial head's tail over fewer lanes (shape.cuh)
  t += "};\n\n";
  const std::string table_args = op.tables(plan, text);
  t += "\n}  // namespace\n\n";
  // Min blocks per SM caps registers at 64 (half occupancy): without it ptxas aims for full
  // occupancy (32 registers at 256 threads) and spills.
  const int threads_per_sm = 1024;
  const std::string call = fmt::format("{}_kernel<Traits>(p{}{})", op.kernel, table_args.empty() ? "" : ", ", table_args);
  t += fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}, {}) {}(const ropejit::KernelParams p) {{\n"
      "  ropejit::{};\n}}\n",
      c.block_threads, std::max(1, threads_per_sm / c.block_threads), kEntryName, call);
  Source out;
  out.entry = kEntryName;
  // The text only #includes the templates: hash what they are too.
  out.hash = hash_bytes(t + templates_hash().hex());
  out.text = std::move(t);
  return out;
}

DistinctSources distinct_sources(const Spec& spec, const std::vector<Config>& configs,
                                 const std::function<bool(size_t)>& keep) {
  DistinctSources out;
  out.source_of.assign(configs.size(), SIZE_MAX);
  std::map<std::string, size_t> by_hash;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (keep && !keep(i)) continue;
    Source source = generate_source(make_plan(spec, configs[i]));
    const auto [it, added] = by_hash.emplace(source.hash.hex(), out.sources.size());
    if (added) {
      out.sources.push_back(std::move(source));
      out.first_config.push_back(i);
    }
    out.source_of[i] = it->second;
  }
  return out;
}

}  // namespace ropejit
