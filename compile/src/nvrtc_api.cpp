// The process-wide NVRTC table: which libnvrtc to dlopen, dlsym of each entry point, and the
// builtins library beside it.
#include "nvrtc_api.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include <cuda.h>  // CUDA_VERSION only: the soname fallback asks for the headers' major
#include <fmt/format.h>

#include "ropejit/error.h"

namespace ropejit {

namespace {

constexpr const char* kLibraryVariable = "ROPEJIT_NVRTC_LIBRARY";

/// A library to try and where its name came from (for the error message).
struct Candidate {
  std::string path;
  std::string origin;
};

std::vector<Candidate> candidates(const char* from_env) {
  if (from_env) return {{from_env, kLibraryVariable}};  // an explicit choice is the only one tried
  std::vector<Candidate> out;
#ifdef ROPEJIT_NVRTC_CONFIGURED_LIBRARY
  out.push_back({ROPEJIT_NVRTC_CONFIGURED_LIBRARY, "found at configure time"});
#endif
  out.push_back({fmt::format("libnvrtc.so.{}", CUDA_VERSION / 1000), "loader search path"});
  return out;
}

/// Resolves every entry point of `path` into `api`; returns why it is unusable, empty when usable.
std::string try_load(const std::string& path, NvrtcApi& api) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* error = dlerror();  // a second call returns null: read once
    std::string why = error ? error : "dlopen failed";
    if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);  // dlerror repeats the path
    return why;
  }
#define ROPEJIT_NVRTC_RESOLVE(fn)                                          \
  api.fn = reinterpret_cast<decltype(&::fn)>(dlsym(handle, #fn));          \
  if (!api.fn) {                                                           \
    dlclose(handle);                                                       \
    return "lacks " #fn " (not libnvrtc, or one older than CUDA 12)";      \
  }
  ROPEJIT_NVRTC_FUNCTIONS(ROPEJIT_NVRTC_RESOLVE)
#undef ROPEJIT_NVRTC_RESOLVE
  Dl_info info{};
  const bool named = dladdr(reinterpret_cast<void*>(api.nvrtcVersion), &info) != 0 && info.dli_fname;
  api.library = named ? info.dli_fname : path;
  return {};
}

/// NVRTC dlopen()s libnvrtc-builtins.so.<M>.<m> by bare name, which finds nothing where its folder
/// is on no loader path (the .deps/cuda prefix, $ROPEJIT_NVRTC_LIBRARY); loaded here from beside
/// libnvrtc first, the loader matches that name to it by soname.
void preload_builtins(const NvrtcApi& api) {
  int major = 0, minor = 0;
  const size_t slash = api.library.rfind('/');
  if (slash == std::string::npos || api.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return;
  const std::string builtins =
      fmt::format("{}/libnvrtc-builtins.so.{}.{}", api.library.substr(0, slash), major, minor);
  // Never closed, like libnvrtc; on failure NVRTC still searches on its own and names the file.
  if (::access(builtins.c_str(), R_OK) == 0) dlopen(builtins.c_str(), RTLD_NOW | RTLD_LOCAL);
}

NvrtcApi load_nvrtc() {
  const char* env = std::getenv(kLibraryVariable);
  const char* from_env = env && *env ? env : nullptr;
  std::string tried;
  for (const Candidate& c : candidates(from_env)) {
    NvrtcApi api;
    const std::string why = try_load(c.path, api);
    if (why.empty()) {
      preload_builtins(api);
      return api;
    }
    tried += fmt::format("{}{} ({}): {}", tried.empty() ? "" : "; ", c.path, c.origin, why);
  }
  const std::string soname = fmt::format("libnvrtc.so.{}", CUDA_VERSION / 1000);
  NvrtcApi failed;
  failed.error =
      from_env ? fmt::format("NVRTC could not be loaded: tried {}. Point {} at a {} or unset it.", tried,
                             kLibraryVariable, soname)
               : fmt::format("NVRTC could not be loaded: tried {}. Install the CUDA toolkit or run "
                             "scripts/setup.sh, or set {} to the path of a {}.",
                             tried, kLibraryVariable, soname);
  return failed;
}

}  // namespace

const NvrtcApi& nvrtc_api() {
  static const NvrtcApi api = load_nvrtc();
  return api;
}

const NvrtcApi& nvrtc() {
  const NvrtcApi& api = nvrtc_api();
  if (!api.available()) throw Error(Status::compile_error, api.error);
  return api;
}

}  // namespace ropejit
