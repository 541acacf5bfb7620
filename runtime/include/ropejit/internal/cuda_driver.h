#pragma once
// The CUDA driver API for the whole library: libcuda.so.1 is dlopen'ed once per process, never
// linked, so ropejit loads and works (host backend) on machines without an NVIDIA driver. The
// cuda backend and the GPU tuner both call the driver through this one table.
#include <string>

#include <cuda.h>

namespace ropejit {

// cuda.h #defines many entry points to versioned names (cuMemAlloc -> cuMemAlloc_v2,
// cuStreamBeginCapture -> cuStreamBeginCapture_v2, cuGraphInstantiate ->
// cuGraphInstantiateWithFlags, stream calls through __CUDA_API_PTSZ): members are declared and
// resolved through those macros, so each is the symbol its prototype belongs to.
#define ROPEJIT_CU_FUNCTIONS(X)                                                              \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetAttribute) \
  X(cuDeviceGetName) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                \
  X(cuCtxGetCurrent) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxSynchronize)              \
  X(cuModuleLoadDataEx) X(cuModuleGetFunction) X(cuModuleUnload) X(cuLaunchKernel)           \
  X(cuLaunchKernelEx) X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                         \
  X(cuGetErrorName) X(cuGetErrorString) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD)           \
  X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemsetD8) X(cuEventCreate) X(cuEventRecord)            \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuEventDestroy) X(cuStreamCreate)            \
  X(cuStreamSynchronize) X(cuStreamDestroy) X(cuStreamBeginCapture) X(cuStreamEndCapture)    \
  X(cuGraphInstantiate) X(cuGraphUpload) X(cuGraphLaunch) X(cuGraphGetNodes)                 \
  X(cuGraphNodeGetType) X(cuGraphExecDestroy) X(cuGraphDestroy)

/// The driver entry points, resolved once per process; usable only when `available()`.
struct CudaDriver {
#define ROPEJIT_CU_MEMBER(fn) decltype(&::fn) fn = nullptr;
  ROPEJIT_CU_FUNCTIONS(ROPEJIT_CU_MEMBER)
#undef ROPEJIT_CU_MEMBER
  int version = 0;       ///< cuDriverGetVersion, e.g. 13000
  int device_count = 0;  ///< cuDeviceGetCount
  std::string error;     ///< why the driver is unusable ("libcuda.so.1 could not be loaded ..."); empty when usable

  /// True when libcuda loaded, every entry point resolved, cuInit succeeded and a device exists.
  bool available() const noexcept { return error.empty(); }
  /// "<call> failed: CUDA_ERROR_X: text" (names the codes of a missing or stub driver too).
  std::string describe(CUresult r, const char* call) const;
  /// Throws Error(backend_error, describe(r, call)) when `r` is not CUDA_SUCCESS.
  void check(CUresult r, const char* call) const;
};

/// The process-wide driver, loaded on first use (thread-safe) and never unloaded: modules and
/// contexts may be released from static destructors. Check `available()` before calling into it.
const CudaDriver& cuda_driver();

/// Makes `ctx` current on this thread for a scope; a no-op when it already is (the hot path of
/// a launch: no push/pop when the caller already works in that context).
class CudaContextScope {
 public:
  /// Throws Error(backend_error) when the context cannot be made current.
  CudaContextScope(const CudaDriver& d, CUcontext ctx);
  ~CudaContextScope();
  CudaContextScope(const CudaContextScope&) = delete;
  CudaContextScope& operator=(const CudaContextScope&) = delete;

 private:
  const CudaDriver& d_;
  bool pushed_ = false;
};

/// A device's primary context, retained for this object's lifetime.
struct CudaPrimaryContext {
  const CudaDriver& d;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  /// Retains the primary context of device `ordinal`; throws Error(backend_error) on failure.
  CudaPrimaryContext(const CudaDriver& driver, int ordinal);
  ~CudaPrimaryContext();
  CudaPrimaryContext(const CudaPrimaryContext&) = delete;
  CudaPrimaryContext& operator=(const CudaPrimaryContext&) = delete;
};

}  // namespace ropejit
