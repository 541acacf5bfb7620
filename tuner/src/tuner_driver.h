#pragma once
// The CUDA driver entry points the tuner needs beyond the Backend interface: device
// properties, events, device-to-device copies. libcuda is dlopen'ed (the cuda backend has
// loaded it already; this only adds a reference), never linked.
#include <string>

#include <cuda.h>

namespace ropejit {

/// Driver entry points the tuner uses; resolved once per process.
struct TunerDriver {
#define ROPEJIT_TUNER_CU_FUNCTIONS(X)                                                          \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetAttribute) \
  X(cuDeviceGetName) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                \
  X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxSynchronize) X(cuEventCreate)                \
  X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuEventDestroy)             \
  X(cuMemcpyDtoD) X(cuMemsetD8) X(cuGetErrorName)
#define ROPEJIT_TUNER_CU_MEMBER(fn) decltype(&::fn) fn = nullptr;
  ROPEJIT_TUNER_CU_FUNCTIONS(ROPEJIT_TUNER_CU_MEMBER)
#undef ROPEJIT_TUNER_CU_MEMBER
  std::string error;  ///< why the driver is unusable; empty when usable
  /// Throws Error(backend_error) naming the call when `r` is not CUDA_SUCCESS.
  void check(CUresult r, const char* call) const;
};

/// The process-wide driver table; throws Error(backend_error) when libcuda is unusable.
const TunerDriver& tuner_driver();

}  // namespace ropejit
