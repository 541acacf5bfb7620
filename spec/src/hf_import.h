#pragma once
// HF config.json import: v4 rope_scaling / v5 rope_parameters → spec JSON (then validated).
// Strict: every key the import reads is type-checked and named in errors as config.json
// spells it; what HF only warns about comes back as warnings (the library never prints).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropejit/hf_import.h"
#include "ropejit/spec.h"

namespace ropejit {

/// The JSON value behind the public, opaque HfConfig.
struct HfConfig::Document {
  nlohmann::json json;
};

/// The layer types of a per-layer-type rope block (rope_parameters keyed by layer type, HF v5),
/// in the order of the config's `layer_types` (each once), else the block's keys; empty when the
/// block is a single one. A v4 Olmo 3 config's types too (its config class scales only the
/// full_attention layers: ModelFamily::scaling_layer_type). `config` is the text model's config (text_config already taken).
std::vector<std::string> hf_rope_layer_types(const nlohmann::json& config);

/// One entry per decoder layer (num_hidden_layers, else the length of layer_types): the layer type
/// whose rope block it takes ("" when the config has one block for all), or nullopt for a layer
/// without RoPE (no_rope_layers[i] == 0 as in SmolLM3 and Llama 4 — absent, HF's default of a NoPE
/// layer every no_rope_layer_interval-th — or a null per-layer block).
/// Throws SpecError naming the key when those lists are malformed.
std::vector<std::optional<std::string>> hf_layer_rope_map(const nlohmann::json& config);

/// The op each layer runs: rope where hf_layer_rope_map has a block, the family's NoPE op on a
/// NoPE layer (Llama 4 with attn_temperature_tuning: attn_temperature), else nullopt (nothing).
std::vector<std::optional<OpKind>> hf_layer_ops(const nlohmann::json& config);

/// The text model of a config: the family row's sub-config (`text_config`, `decoder`,
/// `thinker_config.text_config`, ...), `text_config` where the top level has no heads, else the config.
const nlohmann::json& hf_text_model(const nlohmann::json& config);

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
