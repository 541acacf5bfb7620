// The process-wide CUDA driver table: dlopen + dlsym of each entry point, cuInit, error naming.
#include "ropejit/internal/cuda_driver.h"

#include <dlfcn.h>

#include <fmt/format.h>

#include "ropejit/error.h"

namespace ropejit {

namespace {

// Two-step stringification: the argument is macro-expanded first (cuMemAlloc -> "cuMemAlloc_v2").
#define ROPEJIT_CU_NAME(fn) ROPEJIT_CU_NAME_TEXT(fn)
#define ROPEJIT_CU_NAME_TEXT(fn) #fn

/// Names of the codes a missing or partial driver returns, for when cuGetErrorName cannot
/// (the toolkit's stub libcuda names nothing).
const char* fallback_name(CUresult r, const char** text) {
  switch (r) {
    case CUDA_ERROR_STUB_LIBRARY:
      *text = "libcuda.so.1 is the CUDA toolkit's stub library, not a real driver";
      return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_NO_DEVICE: *text = "no CUDA-capable device is detected"; return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_NOT_INITIALIZED: *text = "initialization error"; return "CUDA_ERROR_NOT_INITIALIZED";
    default: return nullptr;
  }
}

CudaDriver load_driver() {
  CudaDriver d;
  // The handle is never closed: modules and contexts may be released from static destructors.
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    d.error = fmt::format("libcuda.so.1 could not be loaded (no NVIDIA driver installed?): {}",
                          why ? why : "dlopen failed");
    return d;
  }
#define ROPEJIT_CU_RESOLVE(fn)                                                                      \
  d.fn = reinterpret_cast<decltype(&::fn)>(dlsym(handle, ROPEJIT_CU_NAME(fn)));                     \
  if (!d.fn) {                                                                                      \
    d.error = fmt::format("libcuda.so.1 lacks {} (driver too old for CUDA 12+?)", ROPEJIT_CU_NAME(fn)); \
    return d;                                                                                       \
  }
  ROPEJIT_CU_FUNCTIONS(ROPEJIT_CU_RESOLVE)
#undef ROPEJIT_CU_RESOLVE
  if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
    d.error = d.describe(r, "cuInit");
    return d;
  }
  d.cuDriverGetVersion(&d.version);
  if (CUresult r = d.cuDeviceGetCount(&d.device_count); r != CUDA_SUCCESS) {
    d.error = d.describe(r, "cuDeviceGetCount");
    return d;
  }
  if (d.device_count == 0) d.error = "the driver reports no CUDA device";
  return d;
}

}  // namespace

std::string CudaDriver::describe(CUresult r, const char* call) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName && cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (cuGetErrorString && cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  if (!name) name = fallback_name(r, &text);
  return fmt::format("{} failed: {}: {}", call, name ? name : fmt::format("CUresult {}", int(r)),
                     text ? text : "unknown error");
}

void CudaDriver::check(CUresult r, const char* call) const {
  if (r != CUDA_SUCCESS) throw Error(Status::backend_error, describe(r, call));
}

const CudaDriver& cuda_driver() {
  static const CudaDriver d = load_driver();
  return d;
}

CudaContextScope::CudaContextScope(const CudaDriver& d, CUcontext ctx) : d_(d) {
  CUcontext current = nullptr;
  d_.check(d_.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != ctx) {
    d_.check(d_.cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
    pushed_ = true;
  }
}

CudaContextScope::~CudaContextScope() {
  CUcontext popped = nullptr;
  if (pushed_) d_.cuCtxPopCurrent(&popped);
}

CudaPrimaryContext::CudaPrimaryContext(const CudaDriver& driver, int ordinal) : d(driver) {
  d.check(d.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  d.check(d.cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
}

CudaPrimaryContext::~CudaPrimaryContext() { d.cuDevicePrimaryCtxRelease(device); }

}  // namespace ropejit
