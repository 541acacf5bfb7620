#pragma once
// Internal: JSON text -> DOM, reporting a number that overflows a double at its field (spec
// files name fields by JSON pointer, HF configs by key path).
#include <string_view>

#include <nlohmann/json.hpp>

#include "ropejit/spec.h"

namespace ropejit {

/// How a parse error names the field it happened in.
enum class FieldNaming {
  json_pointer,  ///< "/rope/factor/2" (spec files)
  key_path,      ///< "rope_scaling.long_factor[2]" (HF config.json)
};

/// Parses `text`; throws SpecError with one issue (the field, or "" for malformed JSON, a NUL
/// byte or nesting deeper than kMaxJsonDepth).
nlohmann::json parse_json_reporting_field(std::string_view text, FieldNaming naming);

}  // namespace ropejit
