#pragma once
// Internal: Spec <-> JSON, the per-rope-type parameter table (validation and the schema both
// read it), and the JSON Schema text.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropejit/spec.h"

namespace ropejit {

/// Upper bounds the validator enforces (sane limits, documented in docs/spec.md).
inline constexpr int kMaxHeadDim = 1024;
/// Most q or kv heads per token.
inline constexpr int kMaxHeads = 1024;
/// Largest max_position_embeddings / original_max_position_embeddings / seq_len (int32 range).
inline constexpr int64_t kMaxPositions = 2147483647;

/// The JSON type of a rope parameter.
enum class ParamKind { number, integer, boolean, number_list };

/// One rope parameter: name (HF rope_parameters spelling), type, lower bound, description.
struct RopeParamRule {
  std::string_view key;
  ParamKind kind;
  double min;           ///< lower bound of the value (list kinds: of each element)
  bool min_exclusive;   ///< true: value > min; false: value >= min
  std::string_view doc;
};

/// Every rope parameter except rope_type (an enum, always first), in canonical key order.
const std::vector<RopeParamRule>& rope_param_rules();

/// The rule of a rope parameter key, or nullptr.
const RopeParamRule* find_rope_param(std::string_view key);

/// Parameters of one rope type besides rope_type (rope_theta is required for all).
struct RopeTypeParams {
  RopeType type;
  std::vector<std::string_view> required;
  std::vector<std::string_view> optional;
};

/// The parameter sets of a rope type.
const RopeTypeParams& rope_type_params(RopeType type);

/// Top-level keys of a spec, in canonical order (rotary_dim before partial_rotary_factor).
const std::vector<std::string_view>& spec_top_level_keys();

/// Top-level keys a spec must have (the others have defaults).
const std::vector<std::string_view>& spec_required_keys();

/// Keys of the io block, in canonical order.
const std::vector<std::string_view>& spec_io_keys();

/// True when io requires v to be copied (packed input with separate output, or with a bias).
bool io_requires_copy_v(const IoSpec& io);

/// Validates a parsed JSON document; appends every problem to `issues`. The returned spec is
/// canonical (defaults filled) and meaningful only when no issue was added.
Spec spec_from_json(const nlohmann::json& document, std::vector<SpecIssue>& issues);

/// spec_from_json; throws SpecError when any issue was found.
Spec spec_from_json(const nlohmann::json& document);

/// Canonical JSON value of a spec: fixed key order, defaults filled, only applicable keys.
nlohmann::ordered_json spec_to_json(const Spec& spec);

/// Pretty text of a JSON value: 2-space indent, number lists kept on wrapped lines.
std::string pretty_json_text(const nlohmann::ordered_json& value);

/// The JSON Schema (draft 2020-12) of the spec format, generated from the enum tables and
/// rope_param_rules (specs/schema.json is this text).
std::string spec_schema_json();

/// Closest candidate by edit distance if close enough to be a likely typo, else empty.
std::string nearest_key(std::string_view key, const std::vector<std::string_view>& candidates);

}  // namespace ropejit
