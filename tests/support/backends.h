#pragma once
// Which backends this test run has, asked through the public Runtime (no private backend
// headers): each answer is whether a Runtime of that backend opens, asked once per process.
#include <string>
#include <string_view>

#include "ropejit/error.h"
#include "ropejit/runtime.h"

namespace ropejit::test {

/// True when a Runtime on `kind` opens; false when it is refused as unsupported (the host backend
/// of a build without it, which auto falls back to without a device). Other errors propagate.
inline bool backend_opens(BackendKind kind, std::string* backend = nullptr) {
  RuntimeOptions options;
  options.backend = kind;
  options.disk_cache = false;
  options.on_warning = [](std::string_view) {};  // a probe: its warnings (a tuning database) are not the test's
  try {
    Runtime runtime(options);
    if (backend) *backend = runtime.backend();
    return true;
  } catch (const Error& e) {
    if (e.code() == Status::unsupported) return false;
    throw;
  }
}

/// True when this build has the host backend (configured with -DROPEJIT_HOST_BACKEND=ON).
inline bool host_backend_built() {
  static const bool built = backend_opens(BackendKind::host);
  return built;
}

/// True when a CUDA device is usable: the auto backend opens cuda (errors opening it propagate).
inline bool cuda_device_usable() {
  static const bool usable = [] {
    std::string backend;  // auto opens cuda exactly when the driver and a device are usable
    return backend_opens(BackendKind::auto_, &backend) && backend == "cuda";
  }();
  return usable;
}

}  // namespace ropejit::test
