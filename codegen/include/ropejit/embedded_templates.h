#pragma once
// The template headers of templates/, embedded at build time (cmake/EmbedTemplates.cmake).
#include <string_view>
#include <vector>

#include "ropejit/spec.h"

namespace ropejit {

/// One embedded header: include name ("ropejit/rope.cuh") and its text.
struct EmbeddedFile {
  std::string_view name;
  std::string_view text;
};

/// Every header under templates/, sorted by name.
const std::vector<EmbeddedFile>& embedded_templates();

/// XXH3-128 over the names and contents of `files` (each length-prefixed, so no two sets of
/// files hash alike by moving bytes across a boundary).
Hash128 hash_templates(const std::vector<EmbeddedFile>& files);

}  // namespace ropejit
