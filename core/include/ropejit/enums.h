#pragma once
/// The one table of every enumerated spec value: parsing, validation messages, the schema,
/// the CLI and the generator all read these tables (never a second allow-list).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ropejit {

/// Every op, once, in enum order. Each layer builds its op table by expanding this list, so an
/// op is one row here, its facts row below, and its own files per layer (a missing row of a
/// layer is an undefined symbol at link time): docs/architecture.md §11.
#define ROPEJIT_OPS(X) X(rope) X(rerotate) X(attn_temperature) X(inverse_rope) X(mla_append) X(rope_tensor)
/// What a kernel does: rotate q and k as they are produced (rope), or rotate the keys already in
/// a paged K cache from the rope parameters and positions they were written with to new ones
/// (rerotate: the LongRoPE short-to-long switch, a context shift), or scale q in place by the
/// attention temperature of its position (attn_temperature: Llama 4's NoPE layers), or rotate the
/// rope slice of one [T, H, D] tensor by minus the angle, in place (inverse_rope: DeepSeek-V4's
/// attention output, HF `apply_rotary_pos_emb(attn_output, cos, -sin)`), or rotate the rope part of
/// q and of the shared rope key and write the latent cache row [kv_c | rotated k_pe] of
/// Multi-head Latent Attention (mla_append: DeepSeek-V2/V3/R1, Kimi K2), or rotate the rope slice
/// of one [T, H, D] tensor forward, in place (rope_tensor: a tensor whose partner has other
/// positions or none — DeepSeek-V4's indexer queries and compressed keys, vLLM's `key=None`).
enum class OpKind {
#define ROPEJIT_OP_ENUMERATOR(name) name,
  ROPEJIT_OPS(ROPEJIT_OP_ENUMERATOR)
#undef ROPEJIT_OP_ENUMERATOR
};
/// Rotation pairing: neox = (i, i + d/2) "rotate_half"; interleaved = (2i, 2i+1).
enum class Layout { neox, interleaved };
/// Where a head's rotary_dim rotated elements sit: its first d (every family but DeepSeek-V4 and
/// MLA's q) or its last d, after D - d pass-through ones (DeepSeek-V4's `[nope | rope]` heads).
enum class RotarySlice { leading, trailing };
/// Storage type of q/k/v (math always runs in fp32).
enum class DType { fp32, fp16, bf16 };
/// Frequency scaling method, named as HF's rope_type (plus ropejit's static `ntk`).
enum class RopeType { default_, linear, ntk, dynamic, yarn, longrope, llama3, proportional };
/// Angle precision: fp32 = HF's float32 product p*inv_freq; exact = the exact product.
enum class AnglePrecision { fp32, exact };
/// Input form: separate q/k(/v) tensors, or the packed QKV projection output.
enum class InputForm { separate, packed_qkv };
/// Output form: rotate in place, token-major separate outputs, head-major padded, or q out and
/// the rotated k and v written into a paged KV cache.
enum class OutputForm { inplace, separate, padded_bhsd, paged_kv };
/// How positions arrive: an explicit per-token array, varlen cu_seqlens + start positions,
/// one sequence at an offset (token t at start_pos[0] + t), or multimodal [3, T] positions
/// (temporal, height, width) whose streams rotate the sections of io.mrope_section, or
/// [A, T] positions of io.axes (vision towers, diffusion transformers: one stream per axis).
enum class PositionsForm { explicit_, varlen, offset, mrope, axes };
/// io.axes: each axis's frequencies: its own table over its pairs (theta_a^(-j / pairs_a)), or
/// every A-th entry of one table over the rotary pairs (Pixtral: axis a takes entries a, a + A, ...).
enum class AxisFrequencies { own, global_alternate };
/// io.axes: which pairs an axis rotates: consecutive runs, axis 0 first, or pair k to axis k % A.
enum class AxisPlacement { contiguous, alternating };
/// Where the cos/sin of each angle come from: computed from the rope block, or the caller's
/// cos_sin_cache [rows, rotary_dim] (vLLM's, FlashInfer's), one row gathered per position.
enum class AnglesSource { computed, cos_sin_cache };

/// paged_kv: page memory order, NHD [pages, page_size, Hkv, D] or HND [pages, Hkv, page_size, D];
/// op mla_append also vLLM's fp8_ds_mla row (FP8 latent, a float32 scale per 128, the rope part);
/// fp8_indexer: a sparse-attention indexer's K cache (a page's FP8 codes, then its float32 scales);
/// fp8_deepseek_v4: DeepSeek-V4's cell (FP8 nope part, bf16 rope part, a page's ue8m0 scales after).
enum class CacheLayout { nhd, hnd, fp8_ds_mla, fp8_indexer, fp8_deepseek_v4 };
/// paged_kv: cache element type: the spec's dtype (auto), FP8 with a per-tensor scale, or NVFP4
/// (e2m1 values two a byte, an e4m3 scale per 16 values, the per-tensor k_scale / v_scale).
/// q_output_dtype takes the FP8 rows only.
enum class CacheDType { auto_, fp8_e4m3, fp8_e5m2, nvfp4 };
/// paged_kv: how a token finds its cache slot: slot_mapping [T] (slot = page * page_size +
/// offset, -1 = not cached), or block_tables [B, max_blocks] with the varlen sequences.
enum class CacheIndex { slot_mapping, block_tables };
/// paged_kv: where rotated q goes: back into q, or q_out.
enum class QOutput { inplace, separate };
/// An FP8 q_out's scale: given at launch (static: q_scale), or computed per (token, head) from
/// the head's amax (per_token_head) or per token from the amax of all its q heads (per_token),
/// and written to q_scale_out. A cache's scale takes static or per_token_head.
enum class QScale { static_, per_token_head, per_token };
/// Computed FP8 scales: as computed, or rounded up to a power of two (DeepSeek's scale_fmt
/// "ue8m0", vLLM's use_ue8m0: the scale an exponent-only byte holds).
enum class ScaleRounding { none, ue8m0 };
/// An NVFP4 V cache's block scales within a page and head: linear ([page_size, D / 16] rows, as
/// K's always are), or TensorRT-LLM's 4-token interleave (token t, block s at (t / 4) * 4 * D/16 +
/// 4 s + t % 4: what trtllm-gen's SM100 attention reads).
enum class BlockScaleLayout { linear, interleave4 };

/// QK-norm weight (and LayerNorm bias): one head_dim vector for q and one for k (shared by the
/// heads), or none.
enum class NormWeight { per_head, none };
/// QK-norm kind: RMSNorm x / sqrt(mean(x^2) + eps), or LayerNorm (x - mean) / sqrt(var + eps)
/// (the indexer's k_norm of DeepSeek-V3.2 and GLM-5).
enum class NormType { rmsnorm, layernorm };
/// Which heads a QK-norm normalizes: q and k, or k alone (an indexer's k_norm; q passes as it is).
enum class NormHeads { q_and_k, k };
/// QK-norm extent: each head over its head_dim (Qwen3, Gemma 3), or all heads of a token's q
/// (and of its k) together, over Hq·D (Hkv·D) values (OLMo 2 and 3, MiniMax-M2).
enum class NormScope { head, all };

/// One row of an enum table.
template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

#define ROPEJIT_OP_NAME_ROW(name) EnumName<OpKind>{OpKind::name, #name},
inline constexpr EnumName<OpKind> kOpNames[] = {ROPEJIT_OPS(ROPEJIT_OP_NAME_ROW)};
#undef ROPEJIT_OP_NAME_ROW
inline constexpr std::array<EnumName<Layout>, 2> kLayoutNames{{
    {Layout::neox, "neox"}, {Layout::interleaved, "interleaved"}}};
inline constexpr std::array<EnumName<RotarySlice>, 2> kRotarySliceNames{{
    {RotarySlice::leading, "leading"}, {RotarySlice::trailing, "trailing"}}};
inline constexpr std::array<EnumName<DType>, 3> kDTypeNames{{
    {DType::fp32, "fp32"}, {DType::fp16, "fp16"}, {DType::bf16, "bf16"}}};
inline constexpr std::array<EnumName<RopeType>, 8> kRopeTypeNames{{
    {RopeType::default_, "default"}, {RopeType::linear, "linear"}, {RopeType::ntk, "ntk"},
    {RopeType::dynamic, "dynamic"}, {RopeType::yarn, "yarn"}, {RopeType::longrope, "longrope"},
    {RopeType::llama3, "llama3"}, {RopeType::proportional, "proportional"}}};
inline constexpr std::array<EnumName<AnglePrecision>, 2> kAngleNames{{
    {AnglePrecision::fp32, "fp32"}, {AnglePrecision::exact, "exact"}}};
inline constexpr std::array<EnumName<InputForm>, 2> kInputNames{{
    {InputForm::separate, "separate"}, {InputForm::packed_qkv, "packed_qkv"}}};
inline constexpr std::array<EnumName<OutputForm>, 4> kOutputNames{{
    {OutputForm::inplace, "inplace"}, {OutputForm::separate, "separate"},
    {OutputForm::padded_bhsd, "padded_bhsd"}, {OutputForm::paged_kv, "paged_kv"}}};
inline constexpr std::array<EnumName<PositionsForm>, 5> kPositionsNames{{
    {PositionsForm::explicit_, "explicit"}, {PositionsForm::varlen, "varlen"},
    {PositionsForm::offset, "offset"}, {PositionsForm::mrope, "mrope"}, {PositionsForm::axes, "axes"}}};
inline constexpr std::array<EnumName<AxisFrequencies>, 2> kAxisFrequenciesNames{{
    {AxisFrequencies::own, "own"}, {AxisFrequencies::global_alternate, "global_alternate"}}};
inline constexpr std::array<EnumName<AxisPlacement>, 2> kAxisPlacementNames{{
    {AxisPlacement::contiguous, "contiguous"}, {AxisPlacement::alternating, "alternating"}}};
inline constexpr std::array<EnumName<AnglesSource>, 2> kAnglesSourceNames{{
    {AnglesSource::computed, "computed"}, {AnglesSource::cos_sin_cache, "cos_sin_cache"}}};
inline constexpr std::array<EnumName<CacheLayout>, 5> kCacheLayoutNames{{
    {CacheLayout::nhd, "nhd"}, {CacheLayout::hnd, "hnd"}, {CacheLayout::fp8_ds_mla, "fp8_ds_mla"},
    {CacheLayout::fp8_indexer, "fp8_indexer"}, {CacheLayout::fp8_deepseek_v4, "fp8_deepseek_v4"}}};
inline constexpr std::array<EnumName<CacheDType>, 4> kCacheDTypeNames{{
    {CacheDType::auto_, "auto"}, {CacheDType::fp8_e4m3, "fp8_e4m3"}, {CacheDType::fp8_e5m2, "fp8_e5m2"},
    {CacheDType::nvfp4, "nvfp4"}}};
inline constexpr std::array<EnumName<CacheIndex>, 2> kCacheIndexNames{{
    {CacheIndex::slot_mapping, "slot_mapping"}, {CacheIndex::block_tables, "block_tables"}}};
inline constexpr std::array<EnumName<QOutput>, 2> kQOutputNames{{
    {QOutput::inplace, "inplace"}, {QOutput::separate, "separate"}}};
inline constexpr std::array<EnumName<QScale>, 3> kQScaleNames{{
    {QScale::static_, "static"}, {QScale::per_token_head, "per_token_head"}, {QScale::per_token, "per_token"}}};
inline constexpr std::array<EnumName<ScaleRounding>, 2> kScaleRoundingNames{{
    {ScaleRounding::none, "none"}, {ScaleRounding::ue8m0, "ue8m0"}}};
inline constexpr std::array<EnumName<BlockScaleLayout>, 2> kBlockScaleLayoutNames{{
    {BlockScaleLayout::linear, "linear"}, {BlockScaleLayout::interleave4, "interleave4"}}};
inline constexpr std::array<EnumName<NormWeight>, 2> kNormWeightNames{{
    {NormWeight::per_head, "per_head"}, {NormWeight::none, "none"}}};
inline constexpr std::array<EnumName<NormType>, 2> kNormTypeNames{{
    {NormType::rmsnorm, "rmsnorm"}, {NormType::layernorm, "layernorm"}}};
inline constexpr std::array<EnumName<NormHeads>, 2> kNormHeadsNames{{
    {NormHeads::q_and_k, "q_and_k"}, {NormHeads::k, "k"}}};
inline constexpr std::array<EnumName<NormScope>, 2> kNormScopeNames{{
    {NormScope::head, "head"}, {NormScope::all, "all"}}};

/// The table for an enum type.
template <class E> constexpr const auto& enum_table();
template <> constexpr const auto& enum_table<OpKind>() { return kOpNames; }
template <> constexpr const auto& enum_table<Layout>() { return kLayoutNames; }
template <> constexpr const auto& enum_table<RotarySlice>() { return kRotarySliceNames; }
template <> constexpr const auto& enum_table<DType>() { return kDTypeNames; }
template <> constexpr const auto& enum_table<RopeType>() { return kRopeTypeNames; }

/// Facts of a rope type, kept on its row so that every use reads them instead of restating them.
struct RopeTypeFacts {
  RopeType type;
  bool run_length;  ///< its frequencies depend on the run length max(position) + 1 (launch seq_len)
};
inline constexpr std::array<RopeTypeFacts, 8> kRopeTypeFacts{{
    {RopeType::default_, false}, {RopeType::linear, false}, {RopeType::ntk, false}, {RopeType::dynamic, true},
    {RopeType::yarn, false}, {RopeType::longrope, true}, {RopeType::llama3, false}, {RopeType::proportional, false}}};
static_assert(kRopeTypeFacts.size() == kRopeTypeNames.size(), "a rope type without its facts row");
/// Facts of an output form, on its row.
struct OutputFormFacts {
  OutputForm form;
  bool padded_rows;  ///< the grid covers every (sequence, slot) of batch x max_seq_len, not the tokens
};
inline constexpr std::array<OutputFormFacts, 4> kOutputFormFacts{{
    {OutputForm::inplace, false}, {OutputForm::separate, false}, {OutputForm::padded_bhsd, true},
    {OutputForm::paged_kv, false}}};
static_assert(kOutputFormFacts.size() == kOutputNames.size(), "an output form without its facts row");

/// The heads of a token an op's kernel touches: q, k and v; the K cache's; q's; or q's and the
/// latent cache row (MLA).
enum class OpHeads { qkv, kv, q, q_latent };
/// The quantized forms an op's kernel takes (spec validation refuses the others by name).
struct OpQuantForms {
  bool fp8_q_out;             ///< q written to q_out in FP8 (io.q_output_dtype fp8_*)
  bool computed_q_scale;      ///< an FP8 q_out's scales computed in the kernel (io.q_scale per_token_head, per_token)
  bool per_head_cache_scale;  ///< FP8 cache scales computed per (token, head) (io.cache_scale per_token_head)
  bool nvfp4_cache;           ///< an NVFP4 paged cache (io.cache_dtype nvfp4)
  bool ds_mla_cache = false;       ///< vLLM's fp8_ds_mla latent rows (io.cache_layout fp8_ds_mla)
  bool indexer_cache = false;      ///< an indexer's FP8 K cache (io.cache_layout fp8_indexer)
  bool deepseek_v4_cache = false;  ///< DeepSeek-V4's cell (io.cache_layout fp8_deepseek_v4)
};
/// Facts of an op that stages other than its own files read (docs/architecture.md §11).
struct OpFacts {
  OpKind op;
  OpHeads heads;      ///< q, k and v (v when copied), the K heads only, or the q heads only
  bool uses_rope;     ///< its kernel reads the rope block's frequencies (else the block only describes the model)
  bool from_rope;     ///< it carries a second rope block `<op>.from`: the parameters its data was written with
  bool table_sincos;  ///< each angle is one position's, so a cos/sin table can serve it
  bool inverse;       ///< it rotates by minus the angle (sin negated)
  bool cache_lanes;   ///< its lanes load the paged cache's elements (io.cache_dtype's size), not q/k/v's
  OpQuantForms quant;  ///< {fp8_q_out, computed_q_scale, per_head_cache_scale, nvfp4_cache}
  bool caller_cos_sin;  ///< it takes the caller's cos_sin_cache (io.angles cos_sin_cache)
  bool inverse_key = false;  ///< the spec's `inverse` can turn its rotation around
  bool hadamard_key = false;  ///< the spec's `hadamard` can transform its q and k heads after the rotation
};
inline constexpr OpFacts kOpFacts[] = {
    {OpKind::rope, OpHeads::qkv, true, false, true, false, false, {true, true, true, true, false, true, true}, true,
     true, true},
    // Angles are differences of two positions' angles; its keys are read from the K cache.
    {OpKind::rerotate, OpHeads::kv, true, true, false, false, true, {false, false, false, false}, false},
    // No angle at all.
    {OpKind::attn_temperature, OpHeads::q, false, false, false, false, false, {false, false, false, false}, false},
    // rope.cuh over the one tensor's heads.
    {OpKind::inverse_rope, OpHeads::q, true, false, true, true, false, {false, false, false, false}, false},
    {OpKind::mla_append, OpHeads::q_latent, true, false, true, false, false, {true, false, false, false, true}, false},
    // inverse_rope's kernel turned forward.
    {OpKind::rope_tensor, OpHeads::q, true, false, true, false, false, {false, false, false, false}, false},
};
static_assert(std::size(kOpFacts) == std::size(kOpNames), "an op without its facts row");
/// The facts row of `op` (rows are in enum order).
constexpr const OpFacts& op_facts(OpKind op) { return kOpFacts[static_cast<int>(op)]; }
/// The rows a launch's grid covers: the tokens, or batch x max_seq_len for a padded output.
constexpr int64_t grid_rows(OutputForm form, int64_t tokens, int64_t batch, int64_t max_seq_len) {
  for (const OutputFormFacts& row : kOutputFormFacts)
    if (row.form == form && row.padded_rows) return batch * max_seq_len;
  return tokens;
}
/// The grid's row count as text, for reports.
constexpr std::string_view grid_rows_text(OutputForm form) {
  return grid_rows(form, 0, 1, 1) == 1 ? "batch * max_seq_len" : "num_tokens";
}

/// True for dynamic NTK and LongRoPE: the table a launch uses depends on its run length
/// (dynamic with a fixed rope.seq_len excepted, a spec-level choice).
constexpr bool frequencies_depend_on_run_length(RopeType type) {
  for (const RopeTypeFacts& row : kRopeTypeFacts)
    if (row.type == type) return row.run_length;
  return false;
}
template <> constexpr const auto& enum_table<AnglePrecision>() { return kAngleNames; }
template <> constexpr const auto& enum_table<InputForm>() { return kInputNames; }
template <> constexpr const auto& enum_table<OutputForm>() { return kOutputNames; }
template <> constexpr const auto& enum_table<PositionsForm>() { return kPositionsNames; }
template <> constexpr const auto& enum_table<AxisFrequencies>() { return kAxisFrequenciesNames; }
template <> constexpr const auto& enum_table<AxisPlacement>() { return kAxisPlacementNames; }
template <> constexpr const auto& enum_table<NormWeight>() { return kNormWeightNames; }
template <> constexpr const auto& enum_table<NormScope>() { return kNormScopeNames; }
template <> constexpr const auto& enum_table<NormType>() { return kNormTypeNames; }
template <> constexpr const auto& enum_table<NormHeads>() { return kNormHeadsNames; }
template <> constexpr const auto& enum_table<CacheLayout>() { return kCacheLayoutNames; }
template <> constexpr const auto& enum_table<CacheDType>() { return kCacheDTypeNames; }
template <> constexpr const auto& enum_table<AnglesSource>() { return kAnglesSourceNames; }
template <> constexpr const auto& enum_table<CacheIndex>() { return kCacheIndexNames; }
template <> constexpr const auto& enum_table<QOutput>() { return kQOutputNames; }
template <> constexpr const auto& enum_table<QScale>() { return kQScaleNames; }
template <> constexpr const auto& enum_table<ScaleRounding>() { return kScaleRoundingNames; }
template <> constexpr const auto& enum_table<BlockScaleLayout>() { return kBlockScaleLayoutNames; }

/// Name of an enum value ("neox").
template <class E>
constexpr std::string_view to_string(E value) {
  for (const auto& row : enum_table<E>())
    if (row.value == value) return row.name;
  return "?";
}

/// Value for a name, or nullopt.
template <class E>
constexpr std::optional<E> enum_from_string(std::string_view name) {
  for (const auto& row : enum_table<E>())
    if (row.name == name) return row.value;
  return std::nullopt;
}

/// The allowed names joined for messages: "neox | interleaved".
template <class E>
std::string allowed_names() {
  std::string out;
  for (const auto& row : enum_table<E>()) {
    if (!out.empty()) out += " | ";
    out += row.name;
  }
  return out;
}

/// "op rope" or "ops rope, mla_append": the ops whose quantized forms include `form`, for the
/// messages that refuse it under another op.
template <class Takes>
std::string ops_where(Takes takes) {
  std::string names;
  int count = 0;
  for (const OpFacts& row : kOpFacts) {
    if (!takes(row)) continue;
    names += (count++ ? ", " : "") + std::string(to_string(row.op));
  }
  return (count == 1 ? "op " : "ops ") + names;
}
inline std::string ops_taking(bool OpQuantForms::*form) {
  return ops_where([form](const OpFacts& row) { return row.quant.*form; });
}
/// The same for a fact of the row itself (OpFacts::caller_cos_sin).
inline std::string ops_taking(bool OpFacts::*fact) {
  return ops_where([fact](const OpFacts& row) { return row.*fact; });
}
/// Bytes per element of a storage type.
constexpr int dtype_size(DType t) { return t == DType::fp32 ? 4 : 2; }
/// Bytes per element of a KV cache of `cache` type for q/k/v of `dtype` (NVFP4: 1, of a head row
/// counted in bytes: cache_row_elements).
constexpr int cache_dtype_size(CacheDType cache, DType dtype) {
  return cache == CacheDType::auto_ ? dtype_size(dtype) : 1;
}
/// Elements of the cache's storage in a head row of `head_dim` values: NVFP4 packs two a byte.
constexpr int64_t cache_row_elements(CacheDType cache, int64_t head_dim) {
  return cache == CacheDType::nvfp4 ? head_dim / 2 : head_dim;
}
/// NVFP4: values per e4m3 block scale.
inline constexpr int kNvfp4Block = 16;
/// fp8_ds_mla: latent values per float32 scale (vLLM's tile).
inline constexpr int kDsMlaTile = 128;
/// fp8_deepseek_v4: nope values per ue8m0 scale byte, and a token's bytes of data and of scales
/// (448 codes + 64 bf16; 7 scales + a pad byte).
inline constexpr int kDeepseekV4Block = 64;
inline constexpr int kDeepseekV4TokenBytes = 576;
inline constexpr int kDeepseekV4ScaleBytes = 8;

}  // namespace ropejit
