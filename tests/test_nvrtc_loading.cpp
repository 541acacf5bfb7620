// NVRTC is dlopen'ed on first use (compile/src/nvrtc_api.cpp): the library it loads, the error
// when none loads, and commands that never compile never loading it. The command runs in a
// child process, so each case starts with a fresh process-wide load-once state.
// ropejit-tier: compile+sanitize
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include <cuda.h>  // CUDA_VERSION: the NVRTC major these headers belong to
#include <gtest/gtest.h>

#include "support/build_paths.h"
#include "ropejit/compile.h"
#include "support/repo_paths.h"
#include "support/run_command.h"

namespace fs = std::filesystem;
using namespace ropejit;

namespace {

const std::string kBogusLibrary = "/nonexistent/libnvrtc.so";

bool have_cli() { return !std::string(ropejit::test::cli_path()).empty(); }

/// Exit status and stdout + stderr of `ENV... ropejit ARGS` (ENV: shell assignments or empty).
std::pair<int, std::string> cli(const std::string& env, const std::string& args) {
  return test::run_command(env + " '" + ropejit::test::cli_path() + "' " + args + " 2>&1");
}

std::string llama_spec() { return "'" + test::spec_path("llama-3.1-8b") + "'"; }

/// The dynamic loader, where it can run a program without its cache (ld.so.conf), else empty.
std::string loader_without_cache() {
  for (const char* ld : {"/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"})
    if (::access(ld, X_OK) == 0 && test::run_command(std::string(ld) + " --inhibit-cache /bin/true").first == 0)
      return ld;
  return {};
}

}  // namespace

TEST(NvrtcLoading, UnloadableVariableFailsTheCompileNamingPathAndVariable) {
  if (!have_cli()) GTEST_SKIP() << "SKIPPED: built without the ropejit command";
  const auto [status, out] = cli("ROPEJIT_NVRTC_LIBRARY=" + kBogusLibrary, "compile " + llama_spec());
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("error: NVRTC could not be loaded"), std::string::npos) << out;
  EXPECT_NE(out.find(kBogusLibrary), std::string::npos) << out;
  EXPECT_NE(out.find("ROPEJIT_NVRTC_LIBRARY"), std::string::npos) << out;
  // An explicit choice is the only one tried: no fallback to the library found at build time.
  EXPECT_EQ(out.find("configure time"), std::string::npos) << out;
}

TEST(NvrtcLoading, SpecValidateAndVersionNeverLoadIt) {
  if (!have_cli()) GTEST_SKIP() << "SKIPPED: built without the ropejit command";
  const auto [status, out] = cli("ROPEJIT_NVRTC_LIBRARY=" + kBogusLibrary, "spec validate " + llama_spec());
  EXPECT_EQ(status, 0) << out;
  // The loader's own account of every library it opens (glibc): libnvrtc must not be one.
  for (const std::string& args : {std::string("--version"), "spec validate " + llama_spec()}) {
    const auto [rc, trace] = cli("LD_DEBUG=files", args);
    EXPECT_EQ(rc, 0) << trace;
    if (trace.find("libropejit") == std::string::npos) GTEST_SKIP() << "SKIPPED: LD_DEBUG has no effect here";
    EXPECT_EQ(trace.find("libnvrtc"), std::string::npos) << args << " loaded NVRTC:\n" << trace;
  }
}

TEST(NvrtcLoading, InProcessCompileAndVersionOfTheHeadersMajor) {
  const std::string version = nvrtc_version();
  EXPECT_EQ(version.rfind(std::to_string(CUDA_VERSION / 1000) + ".", 0), 0u) << version;
  const Spec spec = load_spec_file(test::spec_path("llama-3.1-8b"));
  const Binary b = compile_nvrtc(generate_source(make_plan(spec, default_config(spec))), "sm_90");
  EXPECT_FALSE(b.image.empty());
  const std::vector<int> archs = nvrtc_supported_archs();
  EXPECT_TRUE(std::is_sorted(archs.begin(), archs.end()));
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
}

// libnvrtc in a folder on no loader path (as in the .deps/cuda prefix): NVRTC opens its builtins
// by bare name, so the compile works only because they are loaded from beside it first.
TEST(NvrtcLoading, VariableLibraryFindsItsBuiltinsWithoutTheLoaderCache) {
  if (!have_cli()) GTEST_SKIP() << "SKIPPED: built without the ropejit command";
  const std::string loader = loader_without_cache();
  if (loader.empty()) GTEST_SKIP() << "SKIPPED: the loader cannot run without its cache here";
  const fs::path real = fs::canonical(ropejit::test::nvrtc_library());
  const fs::path builtins = real.parent_path() / ("libnvrtc-builtins.so." + nvrtc_version());
  ASSERT_TRUE(fs::exists(builtins)) << builtins;
  const fs::path dir = fs::temp_directory_path() / ("ropejit-nvrtc-loading." + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path library = dir / ("libnvrtc.so." + std::to_string(CUDA_VERSION / 1000));
  fs::create_symlink(real, library);
  fs::create_symlink(fs::canonical(builtins), dir / builtins.filename());
  const auto [status, out] = test::run_command(
      "env -u LD_LIBRARY_PATH ROPEJIT_NVRTC_LIBRARY='" + library.string() + "' " + loader + " --inhibit-cache '" +
      ropejit::test::cli_path() + "' compile " + llama_spec() + " --arch sm_90 2>&1");
  fs::remove_all(dir);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("llama-3.1-8b"), std::string::npos) << out;
}
