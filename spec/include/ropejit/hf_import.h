#pragma once
// Hugging Face config.json import for callers outside the spec layer (the CLI, the Python
// extension): the parsed config is opaque, so nlohmann::json stays out of the installed headers.
// The importer itself, on the JSON value, is spec/src/hf_import.h.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ropejit/spec.h"

namespace ropejit {

/// Choices the config does not carry, from the CLI flags.
struct HfImportOptions {
  std::string name;                  ///< spec name (default: model_type)
  std::optional<DType> dtype;        ///< default bf16
  std::optional<Layout> layout;      ///< default: inferred from model_type
  std::string layer_type;            ///< the layer type whose rope block to take (per-layer-type configs), or "indexer"
  bool assume_generic = false;       ///< import an unknown model_type with Llama's conventions (else refused)
  OpKind op = OpKind::rope;          ///< the layer's op (hf_layer_ops): its block from the config's keys
};

/// A parsed config.json. Cheap to copy (the document is shared and immutable).
class HfConfig {
 public:
  /// Parses config.json text. Malformed JSON throws SpecError (issue pointer ""); a number that
  /// overflows a double (1e309) throws SpecError whose issue names its key ("rope_scaling.factor").
  static HfConfig parse(std::string_view text);

  /// The parsed document; complete only inside the spec layer (spec/src/hf_import.h).
  struct Document;
  /// The document parse() read.
  const Document& document() const { return *document_; }

 private:
  explicit HfConfig(std::shared_ptr<const Document> document) : document_(std::move(document)) {}
  std::shared_ptr<const Document> document_;
};

/// One entry per decoder layer: the layer type whose rope block it takes ("" when the config has
/// one block for all), or nullopt for a layer without RoPE. Throws SpecError naming the key when
/// the config's per-layer lists are malformed.
std::vector<std::optional<std::string>> hf_layer_rope_map(const HfConfig& config);

/// The op each layer runs: rope where hf_layer_rope_map has a block, the family's NoPE op on a
/// NoPE layer (Llama 4 with attn_temperature_tuning: attn_temperature), else nullopt (nothing).
std::vector<std::optional<OpKind>> hf_layer_ops(const HfConfig& config);

/// The validated spec of `config` as `options` choose. Throws SpecError listing every problem,
/// each issue's `pointer` a config.json key path ("rope_scaling.factor"); warnings (where HF only
/// warns) are appended to `warnings` when given.
Spec spec_from_hf(const HfConfig& config, const HfImportOptions& options,
                  std::vector<std::string>* warnings = nullptr);

}  // namespace ropejit
