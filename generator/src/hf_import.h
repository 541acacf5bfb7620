#pragma once
// HF config.json import: v4 rope_scaling / v5 rope_parameters → spec JSON (then validated).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ropejit/spec.h"

namespace ropejit {

/// Choices the config does not carry, from the CLI flags.
struct HfImportOptions {
  std::string name;                  ///< spec name (default: model_type)
  std::optional<DType> dtype;        ///< default bf16
  std::optional<Layout> layout;      ///< default: inferred from model_type
};

/// The spec JSON for an HF config (not yet validated).
nlohmann::json spec_json_from_hf(const nlohmann::json& config, const HfImportOptions& options);

/// spec_json_from_hf, then parse and validate (SpecError lists problems).
Spec spec_from_hf(const nlohmann::json& config, const HfImportOptions& options);

}  // namespace ropejit
