#pragma once
// NVRTC for the whole library: libnvrtc is dlopen'ed on first use, never linked, so processes
// that never compile (host backend, `spec validate`, `--version`) never pay for loading it.
// Lookup order: $ROPEJIT_NVRTC_LIBRARY (only it, when set), the library CMake found at configure
// time, then libnvrtc.so.<CUDA major> through the loader's search path.
#include <string>

#include <nvrtc.h>  // types and prototypes only; every call goes through NvrtcApi

namespace ropejit {

#define ROPEJIT_NVRTC_FUNCTIONS(X)                                                          \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)       \
  X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetPTXSize) \
  X(nvrtcGetPTX) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetNumSupportedArchs)         \
  X(nvrtcGetSupportedArchs)

/// The NVRTC entry points, resolved once per process; usable only when `available()`.
struct NvrtcApi {
#define ROPEJIT_NVRTC_MEMBER(fn) decltype(&::fn) fn = nullptr;
  ROPEJIT_NVRTC_FUNCTIONS(ROPEJIT_NVRTC_MEMBER)
#undef ROPEJIT_NVRTC_MEMBER
  std::string library;  ///< the file that loaded, as the loader resolved it
  std::string error;    ///< every library tried and why it failed; empty when usable

  /// True when a libnvrtc loaded and every entry point resolved.
  bool available() const noexcept { return error.empty(); }
};

/// The process-wide NVRTC, loaded on first use (thread-safe) and never unloaded: programs may
/// be destroyed from static destructors. Check `available()` before calling into it.
const NvrtcApi& nvrtc_api();

/// nvrtc_api() when available, else throws Error(compile_error) with its `error`.
const NvrtcApi& nvrtc();

}  // namespace ropejit
