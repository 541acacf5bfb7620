#pragma once
// Internal: the state of one HF config import — issues named by config.json key paths,
// warnings, and which config key each spec field came from — and type-checked readers.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf_families.h"
#include "ropejit/spec.h"

namespace ropejit {

/// Issues, warnings and spec-field sources of one import. Key paths are config.json paths
/// ("rope_scaling.factor", "text_config.num_attention_heads", "rope_scaling.long_factor[3]").
class HfContext {
 public:
  /// `prefix` starts every path of the text model ("text_config." for a nested one).
  explicit HfContext(std::string prefix = {}) : prefix_(std::move(prefix)) {}

  /// The config.json path of a key of the text model.
  std::string path(std::string_view key) const { return prefix_ + std::string(key); }

  /// An error at `key_path`; `spec_pointer` (may be empty) names the spec field it feeds.
  void error(const std::string& key_path, const std::string& spec_pointer, std::string message);
  /// "<value> is not allowed: must be <must>" at `key_path`.
  void not_allowed(const std::string& key_path, const nlohmann::json& value,
                   const std::string& must, const std::string& spec_pointer);
  /// A warning about `key_path` (where HF only warns, or ignores a key silently).
  void warn(const std::string& key_path, const std::string& message);
  /// Spec field `spec_pointer` holds the value of `key_path` (how its problems are named).
  void source(const std::string& spec_pointer, const std::string& key_path);
  /// Spec field `spec_pointer` is accounted for by an earlier error (its problems are dropped).
  void cover(const std::string& spec_pointer) { covered_.push_back(spec_pointer); }

  /// The member `key` (dots name a sub-config's key), unless absent or null (HF treats null as unset).
  static const nlohmann::json* member(const nlohmann::json& object, std::string_view key);
  /// The first non-null member among `keys` with its key ({"", nullptr} when none). With
  /// `agree`, another non-null member of a different value is an error (aliases of one value).
  std::pair<std::string_view, const nlohmann::json*> first_of(
      const nlohmann::json& object, const std::vector<std::string_view>& keys, bool agree,
      const std::string& spec_pointer);

  /// `value` as an integer >= min (JSON integers only: HF sizes are Python ints).
  std::optional<int64_t> integer(const nlohmann::json& value, const std::string& key_path,
                                 int64_t min, const std::string& spec_pointer);
  /// `value` as a boolean (a string "true" is an error, not truthy).
  std::optional<bool> boolean(const nlohmann::json& value, const std::string& key_path,
                              const std::string& spec_pointer);
  /// `value` as a finite number > 0.
  std::optional<double> positive(const nlohmann::json& value, const std::string& key_path,
                                 const std::string& spec_pointer);

  /// Every error so far, in the order found.
  const std::vector<SpecIssue>& issues() const { return issues_; }
  /// Every warning so far, each "key.path: message".
  const std::vector<std::string>& warnings() const { return warnings_; }

  /// Spec validation problems named by the config keys their fields came from, the spec
  /// field second; problems of fields already reported (covered) are left out.
  std::vector<SpecIssue> rename(const std::vector<SpecIssue>& spec_issues) const;

 private:
  std::string prefix_;
  std::vector<SpecIssue> issues_;
  std::vector<std::string> warnings_;
  std::vector<std::pair<std::string, std::string>> sources_;  // spec pointer -> key path
  std::vector<std::string> covered_;
};

/// Imports the rope block (v5 rope_parameters / v4 rope_scaling) and the base of the text
/// model `text` into spec["rope"], checked against HF v5's per-type rules (hf_rope.cpp).
/// `max_positions` is M when known, read from `max_key` (longrope's O defaults to it).
/// `layer_type` picks the block of a per-layer-type rope_parameters (required there, refused elsewhere).
void import_rope(const nlohmann::json& text, const ModelFamily& family,
                 std::optional<int64_t> max_positions, const std::string& max_key,
                 const std::string& layer_type, HfContext& context, nlohmann::json& spec);

/// The fused pre-attention form (packed input, qkv_bias, in place) when the family's bias key is
/// true and nothing but a fusable RMSNorm runs between the bias and RoPE (hf_norm.cpp).
void import_bias(const nlohmann::json& text, const ModelFamily& family, HfContext& context, nlohmann::json& spec);

/// spec["qk_norm"] for a family with an RMSNorm of q and k before RoPE (per head or over all
/// heads), unless a clamp runs between the norm and RoPE (hf_norm.cpp).
void import_qk_norm(const nlohmann::json& text, const ModelFamily& family, HfContext& context, nlohmann::json& spec);

/// The sizes and pairing of a family's sparse-attention indexer (layer_type "indexer",
/// ModelFamily::indexer, hf_indexer.cpp): index_n_heads q heads and one k head of index_head_dim,
/// qk_rope_head_dim rotated in the indexer's pairing and slice, k's LayerNorm as qk_norm.
void import_indexer_shape(const nlohmann::json& text, const ModelFamily& family, HfContext& context,
                          nlohmann::json& spec);

/// What an import's layer_type names of a family's sparse-attention indexer (hf_indexer.cpp).
struct IndexerPart {
  bool indexer = false;  ///< "indexer", or with keys apart "indexer_keys" / "compressor"
  bool apart = false;    ///< one tensor of an indexer whose keys rotate apart (import_indexer_apart)
};
/// The IndexerPart of `layer_type`; a SpecError names a part the family lacks, or `op` (other
/// than the default rope) given with a part the import writes the op of.
IndexerPart indexer_part(const ModelFamily& family, std::string_view model_type, std::string_view layer_type,
                         OpKind op);

/// One tensor of an indexer whose keys rotate apart (IndexerRotation::keys_apart, hf_indexer.cpp):
/// over the main attention's imported heads and rotation, `layer_type`'s sizes (the indexer's
/// queries, its compressed keys, the compressor's) and op rope_tensor, the indexer's slice.
void import_indexer_apart(const nlohmann::json& text, const ModelFamily& family, std::string_view layer_type,
                          HfContext& context, nlohmann::json& spec);

/// Whether a rope block is keyed by layer type ({"full_attention": {...}, "sliding_attention": null}).
bool is_per_layer_rope_block(const nlohmann::json& block);

/// The rotary fraction given inside the rope block (v5 keeps partial_rotary_factor there), of
/// `layer_type`'s block in a per-layer-type config; null for proportional RoPE (its own key).
const nlohmann::json* rope_block_fraction(const nlohmann::json& text, const std::string& layer_type);

}  // namespace ropejit
