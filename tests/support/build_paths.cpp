#include "support/build_paths.h"

namespace ropejit::test {

std::string cli_path() { return ROPEJIT_CLI_PATH; }
std::string library_dir() { return ROPEJIT_TEST_LIBRARY_DIR; }
std::string nvrtc_library() { return ROPEJIT_TEST_NVRTC_LIBRARY; }
std::string nvcc_path() { return ROPEJIT_TEST_NVCC; }
std::string configured_source_dir() { return ROPEJIT_SOURCE_DIR; }

}  // namespace ropejit::test
