#pragma once
// The spec format's JSON Schema, for `ropejit spec schema` (specs/schema.json is its output).
#include <string>

namespace ropejit {

/// The JSON Schema (draft 2020-12) of the spec format, generated from the enum tables and the
/// rope parameter rules (specs/schema.json is this text).
std::string spec_schema_json();

}  // namespace ropejit
