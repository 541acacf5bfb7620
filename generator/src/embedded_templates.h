#pragma once
// The template headers of templates/, embedded at build time (cmake/EmbedTemplates.cmake).
#include <string_view>
#include <vector>

namespace ropejit {

/// One embedded header: include name ("ropejit/rope.cuh") and its text.
struct EmbeddedFile {
  std::string_view name;
  std::string_view text;
};

/// Every header under templates/, sorted by name.
const std::vector<EmbeddedFile>& embedded_templates();

}  // namespace ropejit
