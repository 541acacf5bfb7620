// nvrtcVersion, then a tiny kernel compiled to PTX (NVRTC dlopen()s libnvrtc-builtins for
// that), then where libnvrtc was loaded from. cuda.h must come from the same include folder.
#include <cstdio>
#include <string>

#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>

int probe_nvrtc() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 1;
  std::printf("probe: nvrtc %d.%d, cuda.h CUDA_VERSION %d\n", major, minor, CUDA_VERSION);
  const char* source = "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n";
  nvrtcProgram program = nullptr;
  if (nvrtcCreateProgram(&program, source, "probe.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) return 1;
  const char* options[] = {"--gpu-architecture=compute_80"};
  const nvrtcResult result = nvrtcCompileProgram(program, 1, options);
  size_t log_size = 0, ptx_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(program, &log[0]);
  if (result == NVRTC_SUCCESS) nvrtcGetPTXSize(program, &ptx_size);
  nvrtcDestroyProgram(&program);
  if (result != NVRTC_SUCCESS || ptx_size == 0) {
    std::printf("probe: NVRTC compile failed: %s\n%s\n", nvrtcGetErrorString(result), log.c_str());
    return 1;
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) == 0 || info.dli_fname == nullptr) return 1;
  std::printf("probe: compiled %zu bytes of PTX; libnvrtc: %s\n", ptx_size, info.dli_fname);
  return 0;
}
