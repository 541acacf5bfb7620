#pragma once
/// Paths the build knows (the ropejit command, the library's folder, NVRTC, nvcc). Kept out of
/// compile definitions of every test file so that a copy of the tree elsewhere (the standalone
/// check) compiles the same objects and finds them in the compiler cache; one file holds them.
#include <string>

namespace ropejit::test {

/// The built ropejit command, or "" when the build has none (ROPEJIT_BUILD_CLI=OFF).
std::string cli_path();

/// The folder of the built libropejit.so.
std::string library_dir();

/// The NVRTC library the build linked.
std::string nvrtc_library();

/// The toolkit's nvcc, or "" when CMake found none.
std::string nvcc_path();

/// The repository root this build was configured from (source_dir() without $ROPEJIT_SOURCE_DIR).
std::string configured_source_dir();

}  // namespace ropejit::test
