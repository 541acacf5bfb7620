#pragma once
// HF config.json import: v4 rope_scaling / v5 rope_parameters → spec JSON (then validated).
// Strict: every key the import reads is type-checked and named in errors as config.json
// spells it; what HF only warns about comes back as warnings (the library never prints).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropejit/spec.h"

namespace ropejit {

/// Choices the config does not carry, from the CLI flags.
struct HfImportOptions {
  std::string name;                  ///< spec name (default: model_type)
  std::optional<DType> dtype;        ///< default bf16
  std::optional<Layout> layout;      ///< default: inferred from model_type
};

/// Parses config.json text. Malformed JSON throws SpecError (issue pointer ""); a number that
/// overflows a double (1e309) throws SpecError whose issue names its key ("rope_scaling.factor").
nlohmann::json parse_hf_config(std::string_view text);

/// The spec JSON for an HF config, not yet validated. Throws SpecError when the config is
/// wrong: each issue's `pointer` is the config.json key path ("rope_scaling.factor",
/// "text_config.num_attention_heads"), its message names the value, what is allowed and the
/// spec field. Warnings (where HF only warns) are appended to `warnings` when given.
nlohmann::json spec_json_from_hf(const nlohmann::json& config, const HfImportOptions& options,
                                 std::vector<std::string>* warnings = nullptr);

/// spec_json_from_hf, then spec validation; every problem of either step is reported at once
/// in one SpecError, validation problems renamed to the config keys their fields came from.
Spec spec_from_hf(const nlohmann::json& config, const HfImportOptions& options,
                  std::vector<std::string>* warnings = nullptr);

}  // namespace ropejit
