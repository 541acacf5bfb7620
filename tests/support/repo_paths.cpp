#include "support/repo_paths.h"

#include <cstdlib>

namespace ropejit::test {

std::string source_dir() {
  const char* env = std::getenv("ROPEJIT_SOURCE_DIR");
  return env && *env ? env : ROPEJIT_SOURCE_DIR;
}

std::string spec_path(const std::string& name) { return source_dir() + "/specs/" + name + ".json"; }

std::string data_path(const std::string& relative) { return source_dir() + "/tests/data/" + relative; }

}  // namespace ropejit::test
