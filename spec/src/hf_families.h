#pragma once
// Internal: the per-model_type conventions of the HF import, in one table (docs/hf-import.md
// "Model families"). Each row copies what the named transformers source file does.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ropejit/enums.h"

namespace ropejit {

/// How a family finds its key/value head count.
enum class KvRule {
  keys,     ///< the first of kv_keys, else num_q_heads (HF's default: no GQA)
  falcon,   ///< new_decoder_architecture or not multi_query: kv_keys (else q heads); else 1
  chatglm,  ///< multi_query_attention: multi_query_group_num; else num_q_heads
};

/// A sparse-attention indexer's rotation (DeepSeek-V3.2's lightning indexer), imported with
/// layer_type "indexer": index_n_heads q heads and one k head of index_head_dim, qk_rope_head_dim
/// of them rotated with the model's rope block, in the indexer's own pairing, after k's LayerNorm.
struct IndexerRotation {
  bool present = false;
  Layout layout = Layout::neox;              ///< its apply function's pairing (V3.2: neox beside interleaved MLA)
  RotarySlice slice = RotarySlice::leading;  ///< where the rotated elements sit: torch.split([rope, rest])
  double k_norm_eps = 1e-6;                  ///< k_norm = nn.LayerNorm(index_head_dim, eps), weight and bias
  /// Its keys rotate at other positions than its queries (DeepSeek-V4's compressed keys, at window
  /// positions): each tensor is its own op rope_tensor spec (layer types "indexer",
  /// "indexer_keys", "compressor"), the rotation of the model's main attention with the
  /// indexer's sizes; the keys' norm (kv_norm, before the rotation) stays the caller's.
  bool keys_apart = false;
};

/// One model_type's conventions. Rows start from the generic row and change what differs.
struct ModelFamily {
  std::string_view model_type;                        ///< HF model_type; "" = the generic row
  std::string_view source = "models/llama/modeling_llama.py";  ///< the HF file it follows
  Layout layout = Layout::neox;                       ///< rotation pairing of the checkpoint
  std::string_view layout_key;                        ///< boolean: true interleaved, false neox (DeepSeek's rope_interleave)
  std::vector<std::string_view> head_keys{"num_attention_heads", "n_head"};  ///< q heads
  std::vector<std::string_view> hidden_keys{"hidden_size", "n_embd"};  ///< for hidden / heads
  std::vector<std::string_view> head_dim_keys{"head_dim"};  ///< first non-null, else hidden/heads
  std::vector<std::string_view> bias_keys{"attention_bias"};  ///< booleans meaning a QKV bias
  bool bias_default = false;                          ///< the bias when no bias key is present
  KvRule kv_rule = KvRule::keys;                      ///< how num_kv_heads is found
  std::vector<std::string_view> kv_keys{"num_key_value_heads"};  ///< kv head count keys
  std::vector<std::string_view> max_keys{"max_position_embeddings", "n_positions",
                                         "seq_length"};  ///< first non-null wins
  std::optional<int64_t> max_default;                 ///< when no max_keys member is present
  std::vector<std::string_view> theta_keys{"rope_theta"};  ///< top-level base keys
  bool theta_from_rope_ratio = false;                 ///< ChatGLM: base = 10000 * rope_ratio
  double theta_default = 10000.0;                     ///< when no base key is present
  std::optional<double> rotary_fraction_default;      ///< partial rotary when none is given
  std::optional<int64_t> rotary_dim_default;          ///< rotary_dim when none is given
  bool rope_head_only = false;                        ///< MLA: head_dim is the rope part only
  std::string_view text_config;                       ///< sub-config with the text model
  std::string_view qk_norm_key;                       ///< boolean: a LayerNorm of q and k before RoPE
  std::string_view no_rope_key;                       ///< boolean: true means no RoPE (ALiBi)
  /// no_rope_layers absent (HF's __post_init__): a NoPE layer every `no_rope_layer_interval`-th
  /// layer, this interval by default (SmolLM3, Llama 4, Mistral Large 4); nullopt: all rotate.
  std::optional<int64_t> no_rope_interval;
  bool no_rope_empty_is_default = false;  ///< an empty no_rope_layers takes the default too (Llama 4: `if not`)
  /// NoPE layers run this op when the boolean `nope_op_key` is true (default `nope_op_default`):
  /// Llama 4's attn_temperature_tuning scales q by the attention temperature (op attn_temperature).
  std::string_view nope_op_key;
  OpKind nope_op = OpKind::rope;
  bool nope_op_default = false;
  std::string_view not_rope;                          ///< non-empty: why there is no RoPE at all
  std::string_view unsupported;                       ///< non-empty: why ropejit cannot express its RoPE
  bool longrope_mscale = false;  ///< longrope's short_mscale / long_mscale scale cos and sin (PhiMoE)
  bool mrope = false;  ///< the rope block may hold mrope_section / mrope_interleaved (VL models)
  bool mrope_interleaved = false;  ///< mrope: HF's module interleaves the streams (a config's key is ignored)
  /// mrope: the section HF's rotary module takes when the rope block has none
  /// (`rope_parameters.get("mrope_section", [16, 24, 24])` in modeling_qwen2_vl.py).
  std::vector<int> mrope_default;
  bool qk_rmsnorm = false;           ///< RMSNorm of q and k before RoPE, always: imported as qk_norm
  bool qk_norm_weightless = false;   ///< ... with no weight (nanochat's RMSNorm): qk_norm weight none
  bool inverse_rotation = false;     ///< HF rotates by minus the angle (nanochat): the spec's inverse
  double qk_norm_weight_offset = 0;  ///< Gemma: (1 + w)
  double rms_norm_eps_default = 1e-6;  ///< qk_rmsnorm's eps when the config has no rms_norm_eps
  /// qk_rmsnorm over each head (Qwen3's q_norm of head_dim), or over all heads of the projection
  /// before the reshape (OLMo 2's q_norm of num_attention_heads * head_dim).
  NormScope qk_norm_scope = NormScope::head;
  /// A boolean HF's modeling file does not read (MiniMax-M2's use_qk_norm): false is a warning.
  std::string_view qk_norm_unread_key;
  /// A number (or null): q, k and v clamped to [-c, c] after the projection and norm, before RoPE
  /// (OLMo's clip_qkv): neither the bias nor the norm can be fused then.
  std::string_view clip_key;
  RotarySlice rotary_slice = RotarySlice::leading;  ///< DeepSeek-V4: each head's last d elements rotate
  /// Rope blocks keyed by labels instead of layer types (DeepSeek-V4's rope_parameters.main and
  /// .compress): each layer type's label; a row with the type "" labels every other type.
  std::vector<std::pair<std::string_view, std::string_view>> rope_block_labels;
  /// Said once when the QK-norm is imported: how the model's norms differ from the spec's (V4's
  /// unweighted q norm: pass ones as q's weight).
  std::string_view qk_norm_note;
  IndexerRotation indexer;  ///< a sparse-attention indexer (layer_type "indexer"), when present
  /// A v4 rope_scaling applies to this layer type only; the others rotate with rope_type
  /// default and the same base (Olmo3Config.convert_rope_params_to_dict).
  std::string_view scaling_layer_type;
};

/// The rope block label of `layer_type` for a family with rope_block_labels (DeepSeek-V4's
/// sliding_attention -> main); the layer type itself otherwise, or when it already is a label.
std::string rope_block_label(const ModelFamily& family, const std::string& layer_type);

/// The layer_type that imports a family's sparse-attention indexer (ModelFamily::indexer); with
/// keys apart, its queries.
inline constexpr std::string_view kIndexerLayerType = "indexer";
/// The layer_types of an indexer with keys apart (IndexerRotation::keys_apart): the indexer's
/// compressed keys (one head of index_head_dim) and the attention compressor's (one of head_dim).
inline constexpr std::string_view kIndexerKeysLayerType = "indexer_keys";
inline constexpr std::string_view kCompressorLayerType = "compressor";
/// A family whose indexer rotates its keys at other positions than its queries.
inline bool has_indexer_keys_apart(const ModelFamily& f) { return f.indexer.present && f.indexer.keys_apart; }

/// The model_types of the families `has` says yes to, comma-separated, for messages.
std::string model_types_where(bool (*has)(const ModelFamily&));
/// A family with a sparse-attention indexer; one whose rope block may carry multimodal RoPE keys.
inline bool has_indexer(const ModelFamily& f) { return f.indexer.present; }
inline bool has_mrope(const ModelFamily& f) { return f.mrope; }

/// Every row; the generic row (model_type "") first.
const std::vector<ModelFamily>& model_families();

/// The row of a model_type, or nullptr when the table has none (callers use the generic row).
const ModelFamily* find_model_family(std::string_view model_type);

/// The generic row: Llama's key names and conventions.
const ModelFamily& generic_model_family();

}  // namespace ropejit
