// Device metadata for the tuning database, and the tuner's own driver entry points.
#include "device_info.h"

#include <dlfcn.h>

#include <fmt/format.h>

#include "ropejit/compile.h"
#include "ropejit/source.h"
#include "tuner_driver.h"

namespace ropejit {

namespace {

#define ROPEJIT_TUNER_CU_NAME(fn) ROPEJIT_TUNER_CU_NAME_TEXT(fn)
#define ROPEJIT_TUNER_CU_NAME_TEXT(fn) #fn

TunerDriver load_tuner_driver() {
  TunerDriver d;
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    d.error = fmt::format("libcuda.so.1 could not be loaded (no NVIDIA driver installed?): {}",
                          why ? why : "dlopen failed");
    return d;
  }
#define ROPEJIT_TUNER_CU_RESOLVE(fn)                                                              \
  d.fn = reinterpret_cast<decltype(&::fn)>(dlsym(handle, ROPEJIT_TUNER_CU_NAME(fn)));             \
  if (!d.fn) {                                                                                    \
    d.error = fmt::format("libcuda.so.1 lacks {} (driver too old?)", ROPEJIT_TUNER_CU_NAME(fn)); \
    return d;                                                                                     \
  }
  ROPEJIT_TUNER_CU_FUNCTIONS(ROPEJIT_TUNER_CU_RESOLVE)
#undef ROPEJIT_TUNER_CU_RESOLVE
  if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS) d.error = fmt::format("cuInit failed: CUresult {}", int(r));
  return d;
}

int attribute(const TunerDriver& d, CUdevice device, CUdevice_attribute which, const char* what) {
  int value = 0;
  d.check(d.cuDeviceGetAttribute(&value, which, device), what);
  return value;
}

}  // namespace

void TunerDriver::check(CUresult r, const char* call) const {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  throw Error(Status::backend_error,
              fmt::format("{} failed: {}", call, name ? name : fmt::format("CUresult {}", int(r))));
}

const TunerDriver& tuner_driver() {
  static const TunerDriver d = load_tuner_driver();
  if (!d.error.empty()) throw Error(Status::backend_error, "tuner: " + d.error);
  return d;
}

int resolve_device_ordinal(const Backend& backend, int ordinal) {
  if (backend.name() != "cuda") return 0;
  if (ordinal >= 0) return ordinal;
  const TunerDriver& d = tuner_driver();
  int count = 0;
  d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    d.check(d.cuDeviceGet(&device, i), "cuDeviceGet");
    const int major = attribute(d, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cuDeviceGetAttribute");
    const int minor = attribute(d, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cuDeviceGetAttribute");
    const int sms = attribute(d, device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "cuDeviceGetAttribute");
    // arch() may carry a suffix ("sm_90a") or be a PTX target; compare the number only.
    const std::string arch = backend.arch();
    const bool arch_matches = arch.find(fmt::format("_{}{}", major, minor)) != std::string::npos;
    if (sms == backend.sm_count() && arch_matches) return i;
  }
  return 0;
}

DeviceMetadata device_metadata(const Backend& backend, int ordinal) {
  DeviceMetadata m;
  m.ropejit_version = version();
  m.nvrtc_version = nvrtc_version();
  m.sm_count = backend.sm_count();
  if (backend.name() != "cuda") {
    m.gpu_name = "host";
    m.compute_capability = backend.arch();
    return m;
  }
  const TunerDriver& d = tuner_driver();
  CUdevice device = 0;
  d.check(d.cuDeviceGet(&device, resolve_device_ordinal(backend, ordinal)), "cuDeviceGet");
  char name[256] = {};
  d.check(d.cuDeviceGetName(name, sizeof name - 1, device), "cuDeviceGetName");
  m.gpu_name = name;
  const int major = attribute(d, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cuDeviceGetAttribute");
  const int minor = attribute(d, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cuDeviceGetAttribute");
  m.compute_capability = fmt::format("{}.{}", major, minor);
  m.sm_count = attribute(d, device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "cuDeviceGetAttribute");
  m.l2_bytes = attribute(d, device, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "cuDeviceGetAttribute");
  d.check(d.cuDriverGetVersion(&m.driver_version), "cuDriverGetVersion");
  return m;
}

}  // namespace ropejit
