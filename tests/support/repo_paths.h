#pragma once
/// Where the repository's data (specs/) lives for tests and benchmarks: $ROPEJIT_SOURCE_DIR
/// when set (a tree copied elsewhere, e.g. onto a GPU machine), else the build's source dir.
#include <string>

namespace ropejit::test {

/// The repository root.
std::string source_dir();

/// source_dir() + "/specs/" + name + ".json".
std::string spec_path(const std::string& name);

/// source_dir() + "/tests/data/" + relative: test data kept in the repository.
std::string data_path(const std::string& relative);

}  // namespace ropejit::test
