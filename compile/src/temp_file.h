#pragma once
// Temporary files for tools that only take paths (nvdisasm, NVRTC's --time table): created in
// $TMPDIR (else /tmp), removed when they go out of scope.
#include <string>

namespace ropejit {

/// A new empty file ropejit-<tag>-XXXXXX<suffix>, unlinked by the destructor.
struct TempFile {
  std::string path;
  TempFile(const std::string& tag, const std::string& suffix);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
};

/// The whole file, empty when it cannot be read.
std::string read_all(const std::string& path);

}  // namespace ropejit
