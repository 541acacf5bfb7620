#pragma once
// Internal: Spec <-> JSON, the rope parameter table (validation, storing, canonical JSON and
// the schema all read it), and the JSON Schema text.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropejit/json_fields.h"  // show_json, nearest_key
#include "ropejit/spec.h"

namespace ropejit {

/// Upper bounds the validator enforces (sane limits, documented in docs/spec.md).
inline constexpr int kMaxHeadDim = 1024;
/// Most q or kv heads per token.
inline constexpr int kMaxHeads = 1024;
/// Largest max_position_embeddings / original_max_position_embeddings / seq_len (int32 range).
inline constexpr int64_t kMaxPositions = 2147483647;

/// The JSON type of a rope parameter; fixed by the type of its RopeParams member.
enum class ParamKind { number, integer, boolean, number_list };

/// The RopeParams member holding a rope parameter. Its type fixes the JSON kind, so a row
/// naming a member that does not exist, or of another type, does not compile.
using RopeField =
    std::variant<double RopeParams::*, std::optional<double> RopeParams::*,
                 std::optional<int64_t> RopeParams::*, std::optional<bool> RopeParams::*,
                 std::vector<double> RopeParams::*>;

/// A set of rope types (bit i: the RopeType of value i).
struct RopeTypeSet {
  uint32_t bits = 0;
  /// The empty set.
  constexpr RopeTypeSet() = default;
  /// The listed types.
  constexpr RopeTypeSet(std::initializer_list<RopeType> types) {
    for (RopeType t : types) bits |= 1u << static_cast<unsigned>(t);
  }
  /// Every rope type (the enum's values are 0..n-1).
  static constexpr RopeTypeSet all() {
    RopeTypeSet out;
    out.bits = (1u << kRopeTypeNames.size()) - 1;
    return out;
  }
  /// True when `type` is in the set.
  constexpr bool has(RopeType type) const { return (bits >> static_cast<unsigned>(type)) & 1u; }
  /// Union.
  constexpr RopeTypeSet operator|(RopeTypeSet o) const {
    RopeTypeSet out;
    out.bits = bits | o.bits;
    return out;
  }
  /// Same set.
  constexpr bool operator==(RopeTypeSet o) const { return bits == o.bits; }
};

/// One rope parameter, the only place it is described: JSON name, RopeParams member, range,
/// the rope types that require or allow it, its default and its doc line. Validation, storing,
/// canonical JSON (hence spec_hash), the JSON schema and the HF importer all read this row.
struct RopeParamRule {
  std::string_view key;   ///< JSON name (HF rope_parameters spelling)
  RopeField field;        ///< where the value lives in RopeParams
  ParamKind kind;         ///< JSON type, derived from `field`
  double min;             ///< lower bound of the value (list kinds: of each element)
  bool min_exclusive;     ///< true: value > min; false: value >= min
  std::optional<double> max;  ///< upper bound (inclusive) of a number, if it has one
  RopeTypeSet required;   ///< rope types that must give it
  RopeTypeSet optional;   ///< rope types that may give it
  nlohmann::json fallback;             ///< value when absent (null: stays absent)
  RopeTypeSet fallback_max_positions;  ///< rope types where absent means max_position_embeddings
  std::string_view doc;   ///< one line for the schema
  /// True when the parameter belongs to rope type `type` (required or optional).
  bool applies(RopeType type) const { return required.has(type) || optional.has(type); }
};

/// Every rope parameter except rope_type (an enum, always first), in canonical key order.
const std::vector<RopeParamRule>& rope_param_rules();

/// The rule of a rope parameter key, or nullptr.
const RopeParamRule* find_rope_param(std::string_view key);

/// The value of a rope parameter in `rope`, or null when unset (plain and list members are
/// always set).
nlohmann::json rope_param_value(const RopeParams& rope, const RopeParamRule& rule);

/// The keys of one rope type besides rope_type, in canonical order (derived from the rules).
struct RopeTypeParams {
  RopeType type;
  std::vector<std::string_view> required;  ///< rope_theta included (every type requires it)
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

}  // namespace ropejit
