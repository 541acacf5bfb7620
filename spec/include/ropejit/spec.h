#pragma once
/// Spec: the validated, canonical description of one RoPE operator (docs/spec.md;
/// its place in the pipeline: docs/architecture.md §1).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ropejit/enums.h"
#include "ropejit/error.h"

namespace ropejit {

/// The `rope` block, with HF `rope_parameters` names. Optional fields absent from the input
/// stay nullopt; canonical JSON writes only what applies to the rope type, defaults filled.
/// Every member but `type` has exactly one row in the rope parameter table
/// (rope_param_rules(), spec/src/spec_validate.cpp), which names, validates, stores, hashes
/// and documents it; a new member needs a row there (tests/test_rope_params.cpp checks).
struct RopeParams {
  RopeType type = RopeType::default_;           ///< rope_type
  double theta = 10000.0;                       ///< rope_theta (base b)
  std::optional<double> factor;                 ///< linear/dynamic/yarn/llama3/longrope/proportional f
  std::optional<int64_t> original_max_position_embeddings;  ///< O
  std::optional<double> low_freq_factor;        ///< llama3
  std::optional<double> high_freq_factor;       ///< llama3
  std::optional<double> beta_fast;              ///< yarn, default 32
  std::optional<double> beta_slow;              ///< yarn, default 1
  std::optional<double> mscale;                 ///< yarn (DeepSeek)
  std::optional<double> mscale_all_dim;         ///< yarn (DeepSeek)
  std::optional<double> attention_factor;       ///< yarn/longrope explicit s
  std::optional<bool> truncate;                 ///< yarn, default true
  std::optional<double> alpha;                  ///< ntk (static NTK-aware) scale
  std::optional<int64_t> seq_len;               ///< dynamic: fixed length (vLLM behaviour)
  std::vector<double> short_factor;             ///< longrope, d/2 numbers
  std::vector<double> long_factor;              ///< longrope, d/2 numbers
  std::optional<double> partial_rotary_factor;  ///< proportional: share of the pairs with a frequency
  std::optional<double> short_mscale;           ///< longrope (PhiMoE): s with the short table
  std::optional<double> long_mscale;            ///< longrope (PhiMoE): s with the long table
};

/// io.axes (positions axes): the position axes of a vision tower's or diffusion transformer's
/// RoPE, each rotating its share of the rotary pairs by its own position stream of [A, T].
struct AxesSpec {
  std::vector<int> pairs;      ///< rotary pairs per axis (1 to kMaxAxes axes), summing to rotary_dim / 2
  std::vector<double> theta;   ///< each axis's base (own frequencies); rope_theta when not given
  AxisFrequencies frequencies = AxisFrequencies::own;   ///< each axis's table, or Pixtral's shared one
  AxisPlacement placement = AxisPlacement::contiguous;  ///< which pairs each axis rotates
};

/// Most position axes of io.axes (Flux 2: 4).
inline constexpr int kMaxAxes = 4;

/// The `io` block: how q/k/v arrive and leave, bias, and how positions are given.
struct IoSpec {
  InputForm input = InputForm::separate;        ///< separate q/k(/v) or packed QKV
  OutputForm output = OutputForm::inplace;      ///< inplace | separate | padded_bhsd
  bool qkv_bias = false;                        ///< add bias [(Hq+2Hkv)*D] before rotating
  bool copy_v = false;                          ///< v is read and written (with bias) too
  PositionsForm positions = PositionsForm::explicit_;  ///< explicit array or varlen
  /// mrope: pairs per position stream (temporal, height, width), summing to rotary_dim / 2.
  /// Contiguous sections (Qwen2-VL), or with mrope_interleaved the height and width streams
  /// take every third pair from pair 1 and 2 (Qwen3-VL). Empty unless positions is mrope.
  std::vector<int> mrope_section;
  bool mrope_interleaved = false;  ///< mrope: Qwen3-VL's interleaved sections
  AxesSpec axes;                   ///< positions axes only: the axes, else empty
  /// paged_kv only (defaults elsewhere): k and v go to separate K and V caches of pages.
  CacheLayout cache_layout = CacheLayout::nhd;  ///< page memory order
  CacheDType cache_dtype = CacheDType::auto_;   ///< cache element type (fp8: scaled, saturating)
  QScale cache_scale = QScale::static_;         ///< FP8 cache: k_scale / v_scale, or per (slot, kv head)
  BlockScaleLayout v_scale_layout = BlockScaleLayout::linear;  ///< NVFP4: V's block scales in a page
  CacheIndex cache_index = CacheIndex::slot_mapping;  ///< how a token finds its slot
  int page_size = 0;                            ///< tokens per page (paged_kv: >= 1)
  QOutput q_output = QOutput::inplace;          ///< rotated q back into q, or into q_out
  /// q_out's element type: the spec's dtype (auto), or FP8 (q_out only), scaled per q_scale.
  CacheDType q_output_dtype = CacheDType::auto_;
  QScale q_scale = QScale::static_;  ///< FP8 q_out: the launch's q_scale, or per (token, head) / token amax
  /// Computed FP8 scales (q_scale or cache_scale not static): as computed, or a power of two (ue8m0).
  ScaleRounding scale_rounding = ScaleRounding::none;
  /// Where the angles' cos/sin come from: computed from the rope block, or the caller's
  /// cos_sin_cache [rows, rotary_dim] (rotary_dim / 2 cos, then rotary_dim / 2 sin per position).
  AnglesSource angles = AnglesSource::computed;
  DType cos_sin_dtype = DType::fp32;  ///< cos_sin_cache's element type
};

/// The `qk_norm` block: an RMSNorm of every q and k head over its head_dim elements (scope head:
/// Qwen3, Gemma 3), or of a token's q heads together and its k heads together (scope all: OLMo 2),
/// in fp32, after the bias and before the rotation: x / sqrt(mean(x^2) + eps) * (offset + w).
/// type layernorm (scope head): (x - mean) / sqrt(var + eps) * w + b, the indexer's k_norm;
/// heads k leaves q as it is.
struct QkNorm {
  bool enabled = false;                      ///< the block is present
  NormType type = NormType::rmsnorm;         ///< rmsnorm, or layernorm (mean subtracted, a bias)
  double eps = 1e-6;                         ///< added to mean(x^2) (the variance, for layernorm)
  NormWeight weight = NormWeight::per_head;  ///< per_head: q_norm_weight / k_norm_weight at launch
  NormWeight bias = NormWeight::none;        ///< layernorm per_head: q_norm_bias / k_norm_bias at launch
  double weight_offset = 0.0;                ///< Gemma's (1 + w): 1.0
  NormScope scope = NormScope::head;         ///< all: one norm over a token's q heads, one over its k heads
  NormHeads heads = NormHeads::q_and_k;      ///< k: only k heads are normed (q's norm weight and bias unused)
};

/// The `attn_temperature` block (op attn_temperature, Llama 4's NoPE layers): q of a token at
/// position p is scaled by log1p(floor((p + 1) / floor_scale)) * attn_scale + 1.
struct AttnTemperature {
  int64_t floor_scale = 8192;  ///< HF's floor_scale (its default)
  double attn_scale = 0.1;     ///< HF's attn_scale (its default)
};

/// Op mla_append's parameters (the `mla_append` block).
struct MlaAppend {
  int kv_lora_rank = 512;  ///< elements of the latent kv_c (DeepSeek-V2/V3: 512); a multiple of 8
  /// Prefill's concat_mla_k in the same launch: k_out [T, Hq, D] = each head's k_nope [T, Hq, D - d]
  /// in the pass-through slice and the rotated k_pe (broadcast to every head) in the rotary one.
  bool concat_k = false;
  /// Absorbed-weight decode: q_out [T, Hq, kv_lora_rank + d] = each head's q_latent (q_nope times
  /// W_UK, computed upstream) then its rotated q_pe: the query FlashMLA-style kernels read.
  bool absorbed_q = false;
};

/// A validated spec. Build one with parse_spec(); every field is checked and canonical.
struct Spec {
  std::string name;                  ///< free text, part of the hash
  OpKind op = OpKind::rope;          ///< rope, or rerotate (keys already in a paged K cache)
  int head_dim = 0;                  ///< D
  int rotary_dim = 0;                ///< d (even, <= D); from partial_rotary_factor if given so
  int num_q_heads = 0;               ///< Hq
  int num_kv_heads = 0;              ///< Hkv (Hq % Hkv == 0)
  Layout layout = Layout::neox;
  RotarySlice rotary_slice = RotarySlice::leading;  ///< the first d elements of a head, or its last d
  /// Rotate by minus each angle (op rope): nanochat's rotate_half, cat((x2, -x1)), turns the other way.
  bool inverse = false;
  /// Op rope: each q and k head, once rotated (and before any FP8 rounding), goes through a
  /// Walsh-Hadamard transform scaled by 1 / sqrt(head_dim) (Sylvester order): DeepSeek-V3.2's
  /// indexer rotate_activation, which spreads outliers before its FP8 quantization. v is not.
  bool hadamard = false;
  DType dtype = DType::bf16;
  int64_t max_position_embeddings = 0;  ///< M
  AnglePrecision angle = AnglePrecision::fp32;
  RopeParams rope;                   ///< rerotate: the parameters the keys are rotated to
  /// An op whose facts say from_rope (rerotate): the parameters its data was written with
  /// (`rerotate.from`; the same as `rope` when absent: a shift of positions, or LongRoPE's short
  /// table to its long one). Unused otherwise.
  RopeParams from_rope;
  IoSpec io;
  QkNorm qk_norm;                    ///< absent: no normalization
  AttnTemperature attn_temperature;  ///< op attn_temperature only
  MlaAppend mla_append;              ///< op mla_append only
};

/// One validation problem: JSON pointer, and a message naming the value and what is allowed.
struct SpecIssue {
  std::string pointer;   ///< "/rope/factor"
  std::string message;   ///< "-2 is not allowed: must be a number >= 1"
  /// "pointer: message"; "(document): message" for the whole document (malformed JSON).
  std::string to_string() const { return (pointer.empty() ? "(document)" : pointer) + ": " + message; }
};

/// Thrown by parse_spec: every issue found, all at once.
class SpecError : public Error {
 public:
  /// Builds the combined message from the issues.
  explicit SpecError(std::vector<SpecIssue> issues);
  /// Every problem found.
  const std::vector<SpecIssue>& issues() const noexcept { return issues_; }

 private:
  std::vector<SpecIssue> issues_;
};

/// Parses and validates spec JSON text. Malformed JSON reports line and column.
/// Throws SpecError listing every problem.
Spec parse_spec(std::string_view json_text);

/// Reads a spec file (io_error if unreadable) and parses it.
Spec load_spec_file(const std::string& path);

/// Canonical JSON text: fixed key order, defaults filled, rotary_dim explicit, no whitespace.
std::string canonical_json(const Spec& spec);

/// Canonical JSON, indented for people (same content as canonical_json).
std::string pretty_json(const Spec& spec);

/// 128-bit content hash.
struct Hash128 {
  uint64_t hi = 0, lo = 0;
  /// 32 lowercase hex digits.
  std::string hex() const;
  bool operator==(const Hash128& o) const { return hi == o.hi && lo == o.lo; }
  bool operator!=(const Hash128& o) const { return !(*this == o); }
};

/// XXH3-128 of arbitrary bytes.
Hash128 hash_bytes(std::string_view bytes);

/// Stable content hash of a spec: XXH3-128 of canonical_json (ignores key order, formatting).
Hash128 spec_hash(const Spec& spec);

/// True when something rewrites the pass-through tail [d, D) of q and k heads even in place:
/// the QKV bias, the QK-norm (it normalizes the whole head), or the Hadamard transform (it mixes it).
inline bool tail_changes(const Spec& s) { return s.io.qkv_bias || s.qk_norm.enabled || s.hadamard; }
/// The first element of a head's rotated slice: 0, or D - d with rotary_slice trailing.
inline int rotary_begin(const Spec& s) {
  return s.rotary_slice == RotarySlice::trailing ? s.head_dim - s.rotary_dim : 0;
}
/// The first element of a head's pass-through part: d, or 0 with rotary_slice trailing.
inline int pass_begin(const Spec& s) { return s.rotary_slice == RotarySlice::trailing ? 0 : s.rotary_dim; }
/// True when the spec's QK-norm is over all heads of a token (qk_norm.scope "all").
inline bool all_heads_norm(const Spec& s) { return s.qk_norm.enabled && s.qk_norm.scope == NormScope::all; }
/// True when a QK-norm normalizes the q heads (not a k-only norm: an indexer's k_norm).
inline bool norm_of_q(const Spec& s) { return s.qk_norm.enabled && s.qk_norm.heads == NormHeads::q_and_k; }

/// The op's second rope block (the parameters its data was written with), or null when its op
/// has none (OpFacts::from_rope).
inline const RopeParams* written_rope(const Spec& s) { return op_facts(s.op).from_rope ? &s.from_rope : nullptr; }

/// The spec with `from_rope` as its rope block: the data as it was written (freqs of the old
/// parameters come from it).
inline Spec from_rope_spec(const Spec& s) {
  Spec from = s;
  from.rope = s.from_rope;
  return from;
}

/// True when an FP8 q_out takes a scale per (token, head), computed in the launch.
inline bool q_scale_per_head(const Spec& s) {
  return s.io.q_output_dtype != CacheDType::auto_ && s.io.q_scale == QScale::per_token_head;
}

/// True when an FP8 q_out takes one scale per token (over all its q heads), computed in the launch.
inline bool q_scale_per_token(const Spec& s) {
  return s.io.q_output_dtype != CacheDType::auto_ && s.io.q_scale == QScale::per_token;
}

/// True when an FP8 q_out's scales are computed in the launch (per (token, head) or per token).
inline bool q_scale_computed(const Spec& s) { return q_scale_per_head(s) || q_scale_per_token(s); }

/// True when a row's heads work in one warp segment (qk_norm_all.cuh): an all-heads QK-norm or
/// per-token FP8 q scales (a reduction over all of a token's heads).
inline bool all_heads_segment(const Spec& s) { return all_heads_norm(s) || q_scale_per_token(s); }

/// True when the spec writes k and v into a paged KV cache.
inline bool paged_kv(const Spec& s) { return s.io.output == OutputForm::paged_kv; }
/// True when launches gather cos/sin from the caller's cos_sin_cache (io.angles cos_sin_cache).
inline bool caller_cos_sin(const Spec& s) { return s.io.angles == AnglesSource::cos_sin_cache; }

/// Position streams of a token the kernel reads: 3 (mrope), the axes (axes), else 1.
int position_streams(const Spec& spec);
/// True when each rotary pair reads the position of its own stream (mrope, axes).
bool per_pair_positions(const Spec& spec);
/// io.axes: the axis (its row of the [A, T] positions) of rotary pair `pair`, and the pair's index
/// among that axis's pairs (its frequency's index in the axis's table).
struct PairAxis {
  int axis;
  int index;
};
/// The axis of rotary pair `pair` (< the axes' total pairs) under the axes' placement.
PairAxis pair_axis(const AxesSpec& axes, int pair);

/// True when the paged cache holds FP8 or NVFP4 codes (rounded, with scales), not the spec's dtype.
inline bool quantized_cache(const Spec& s) { return paged_kv(s) && s.io.cache_dtype != CacheDType::auto_; }

/// True when an FP8 paged cache takes a scale per (slot, kv head), computed in the launch.
inline bool cache_scale_per_head(const Spec& s) {
  return quantized_cache(s) && s.io.cache_scale == QScale::per_token_head;
}

/// True when op mla_append's latent cache is vLLM's fp8_ds_mla row: kv_lora_rank FP8 e4m3 codes,
/// a float32 scale per 128 of them (computed in the launch), then the rotated k_pe in the dtype.
inline bool ds_mla_cache(const Spec& s) { return paged_kv(s) && s.io.cache_layout == CacheLayout::fp8_ds_mla; }

/// The bytes of an fp8_ds_mla row: kv_lora_rank codes, kv_lora_rank / 128 scales, rotary_dim values.
inline int64_t ds_mla_row_bytes(const Spec& s) {
  return int64_t(s.mla_append.kv_lora_rank) + 4 * (s.mla_append.kv_lora_rank / kDsMlaTile) +
         int64_t(s.rotary_dim) * dtype_size(s.dtype);
}

/// True when the K cache is an indexer's (vLLM's indexer_k_quant_and_cache, SGLang's NSA index
/// buffer): pages of [page_size, D] FP8 codes, then [page_size] float32 scales, one a slot.
inline bool indexer_cache(const Spec& s) { return paged_kv(s) && s.io.cache_layout == CacheLayout::fp8_indexer; }

/// The bytes an indexer's K cache holds a slot: head_dim codes and a float32 scale.
inline int64_t indexer_slot_bytes(const Spec& s) { return int64_t(s.head_dim) + 4; }

/// True when the K cache is DeepSeek-V4's cell (FlashMLA's MODEL1, vLLM's and SGLang's V4 cache):
/// a page's slots of [448 FP8 e4m3 nope codes | 64 bf16 rotated rope values] (576 bytes), then
/// its slots' 8 bytes of ue8m0 scales (one a 64-value nope block, then a zero pad byte).
inline bool deepseek_v4_cache(const Spec& s) {
  return paged_kv(s) && s.io.cache_layout == CacheLayout::fp8_deepseek_v4;
}

/// True when a quantized paged cache takes the caller's k_scale / v_scale (FP8's static scale,
/// NVFP4's global one); false where the launch computes every scale (per (slot, head), fp8_ds_mla's
/// tiles, DeepSeek-V4's blocks) and for a cache in the spec's dtype.
inline bool caller_cache_scale(const Spec& s) {
  return quantized_cache(s) && !cache_scale_per_head(s) && !ds_mla_cache(s) && !deepseek_v4_cache(s);
}

/// True when the paged cache is NVFP4 (e2m1 values, an e4m3 scale per 16, k_scale / v_scale global).
inline bool nvfp4_cache(const Spec& s) { return paged_kv(s) && s.io.cache_dtype == CacheDType::nvfp4; }

/// True when a head's lanes work together (warp shuffles): a QK-norm, per-head FP8 scales, or
/// NVFP4 block scales (a 16-value block spans lanes).
inline bool cooperative_heads(const Spec& s) {
  return s.qk_norm.enabled || q_scale_per_head(s) || q_scale_per_token(s) || cache_scale_per_head(s) ||
         nvfp4_cache(s) || deepseek_v4_cache(s) || s.hadamard;
}

/// True when only some roles' heads meet at shuffles (a per-head FP8 scale of q or of the cache,
/// NVFP4 cache blocks): whole-warp shuffles then need role slots (shape.cuh warp_wide_shuffles).
inline bool per_role_shuffles(const Spec& s) {
  return q_scale_per_head(s) || cache_scale_per_head(s) || nvfp4_cache(s) || s.hadamard;
}

/// True when rotated q is written back where it was read (inplace output, or paged_kv with
/// q_output inplace).
inline bool q_inplace(const Spec& s) {
  return s.io.output == OutputForm::inplace || (paged_kv(s) && s.io.q_output == QOutput::inplace);
}

/// Heads per token that the kernel touches (OpFacts::heads): Hq + Hkv (+ Hkv when v is copied),
/// Hkv, or Hq.
inline int total_heads(const Spec& s) {
  switch (op_facts(s.op).heads) {
    case OpHeads::kv: return s.num_kv_heads;
    case OpHeads::q:
    case OpHeads::q_latent: return s.num_q_heads;  // MLA: the latent row's units are groups of their own
    case OpHeads::qkv: break;
  }
  return s.num_q_heads + s.num_kv_heads + (s.io.copy_v ? s.num_kv_heads : 0);
}

}  // namespace ropejit
