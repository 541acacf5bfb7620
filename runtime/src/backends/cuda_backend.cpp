// The cuda backend: NVRTC CUBIN for the device's exact sm_XX, loaded and launched through the
// CUDA driver API (cuda_driver.h: libcuda is dlopen'ed at run time, never linked).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ropejit/internal/backend.h"
#include "caches/cached_binary.h"
#include "ropejit/internal/cuda_driver.h"
#include "ropejit/cache.h"
#include "ropejit/error.h"

namespace ropejit {

namespace {

/// Driver results that mean "this image cannot run here; a PTX the driver JITs may".
bool image_rejected(CUresult r) {
  return r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE ||
         r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == CUDA_ERROR_INVALID_PTX ||
         r == CUDA_ERROR_INVALID_SOURCE;
}

class CudaModule final : public LoadedModule {
 public:
  CudaModule(std::shared_ptr<CudaPrimaryContext> context, CUmodule module, CUfunction function,
             Binary binary, bool from_disk, double load_ms, bool programmatic_dependent_launch)
      : context_(std::move(context)), module_(module), function_(function),
        binary_(std::move(binary)), from_disk_(from_disk), load_ms_(load_ms),
        pdl_(programmatic_dependent_launch && arch_number(binary_.arch) >= 90) {}

  ~CudaModule() override {
    // Errors are ignored: at process exit the driver may already be deinitialized.
    CUcontext current = nullptr;
    const CudaDriver& d = context_->d;
    const bool push = d.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current != context_->ctx &&
                      d.cuCtxPushCurrent(context_->ctx) == CUDA_SUCCESS;
    d.cuModuleUnload(module_);
    if (push) d.cuCtxPopCurrent(&current);
  }

  void launch(const LaunchDims& dims, const KernelParams& params, void* stream) const override {
    const CudaDriver& d = context_->d;
    CudaContextScope scope(d, context_->ctx);
    void* args[] = {const_cast<KernelParams*>(&params)};
    if (!pdl_) {
      d.check(d.cuLaunchKernel(function_, dims.grid, 1, 1, dims.block, 1, 1, 0,
                               static_cast<CUstream>(stream), args, nullptr),
              "cuLaunchKernel");
      return;
    }
    // Programmatic dependent launch: this grid may start while the previous kernel in the
    // stream finishes; the kernel's griddepcontrol.wait (sm_90+) holds every input read back.
    CUlaunchAttribute attribute{};
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = dims.grid;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = dims.block;
    config.blockDimY = config.blockDimZ = 1;
    config.hStream = static_cast<CUstream>(stream);
    config.attrs = &attribute;
    config.numAttrs = 1;
    d.check(d.cuLaunchKernelEx(&config, function_, args, nullptr), "cuLaunchKernelEx");
  }
  const Binary& binary() const override { return binary_; }
  bool from_disk_cache() const override { return from_disk_; }
  double load_ms() const override { return load_ms_; }
  int resident_blocks_per_sm(int block_threads) const override {
    const CudaDriver& d = context_->d;
    CudaContextScope scope(d, context_->ctx);
    int blocks = 0;
    d.check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, function_, block_threads, 0),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    return std::max(1, blocks);
  }
  CUfunction function() const { return function_; }

 private:
  std::shared_ptr<CudaPrimaryContext> context_;
  CUmodule module_;
  CUfunction function_;
  Binary binary_;
  bool from_disk_;
  double load_ms_;
  bool pdl_;  // launch with programmatic stream serialization (only for sm_90+ images)
};

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

/// What device `ordinal` reports about itself.
DeviceProperties query_properties(const CudaDriver& d, int ordinal) {
  CUdevice device = 0;
  d.check(d.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  auto attribute = [&](CUdevice_attribute which, const char* call) {
    int value = 0;
    d.check(d.cuDeviceGetAttribute(&value, which, device), call);
    return value;
  };
  DeviceProperties p;
  p.ordinal = ordinal;
  p.compute_capability_major =
      attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)");
  p.compute_capability_minor =
      attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
  p.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  p.l2_bytes = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "cuDeviceGetAttribute(L2_CACHE_SIZE)");
  char name[256] = {};
  d.check(d.cuDeviceGetName(name, sizeof name - 1, device), "cuDeviceGetName");
  p.name = name;
  p.driver_version = d.version;
  return p;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const CudaDriver& d, int ordinal, const std::string& arch_override,
              bool programmatic_dependent_launch)
      : d_(d), properties_(query_properties(d, ordinal)),
        programmatic_dependent_launch_(programmatic_dependent_launch) {
    device_arch_ = properties_.compute_capability_major * 10 + properties_.compute_capability_minor;
    arch_ = arch_override.empty() ? fmt::format("sm_{}", device_arch_) : arch_override;
    context_ = std::make_shared<CudaPrimaryContext>(d_, ordinal);
    // A GPU newer than this NVRTC: no CUBIN possible, so PTX the driver JITs from the start.
    const std::vector<int> archs = nvrtc_supported_archs();
    if (arch_override.empty() && !archs.empty() &&
        std::find(archs.begin(), archs.end(), device_arch_) == archs.end() && device_arch_ > archs.back())
      use_ptx_.store(true);
  }

  std::string name() const override { return "cuda"; }
  std::string arch() const override { return arch_; }
  int sm_count() const override { return properties_.sm_count; }
  DeviceProperties properties() const override { return properties_; }
  bool host_memory() const override { return false; }

  std::shared_ptr<LoadedModule> load(const Source& source, DiskCache* disk) override {
    const auto start = std::chrono::steady_clock::now();
    const bool ptx_only = arch_.rfind("compute_", 0) == 0 || use_ptx_.load();
    std::string target = ptx_only ? ptx_target() : arch_;
    bool from_disk = false;
    Binary binary = compile_or_read(source, target, ptx_only, disk, from_disk);
    CUmodule module = nullptr;
    CUresult r = load_image(binary, module);
    if (r != CUDA_SUCCESS && image_rejected(r) && from_disk) {
      // A cached image the driver rejects (damaged, or written by another toolchain): compile
      // afresh and overwrite the entry before concluding anything about the device.
      binary = compile_and_store(source, target, binary.is_ptx, disk);
      from_disk = false;
      r = load_image(binary, module);
    }
    if (r != CUDA_SUCCESS && image_rejected(r) && !binary.is_ptx) {
      // The driver cannot run this NVRTC's CUBIN (e.g. a GPU newer than NVRTC knows): PTX,
      // JIT-compiled by the driver, for the rest of this backend's life.
      const std::string cubin_error = d_.describe(r, "cuModuleLoadDataEx");
      use_ptx_.store(true);
      binary = compile_or_read(source, ptx_target(), true, disk, from_disk);
      r = load_image(binary, module);
      if (r != CUDA_SUCCESS)
        throw Error(Status::backend_error,
                    fmt::format("{} (CUBIN for {}); PTX fallback for {}: {}", cubin_error, arch_,
                                binary.arch, d_.describe(r, "cuModuleLoadDataEx")));
    }
    d_.check(r, "cuModuleLoadDataEx");
    CUfunction function = nullptr;
    if (CUresult fr = d_.cuModuleGetFunction(&function, module, binary.entry.c_str()); fr != CUDA_SUCCESS) {
      CudaContextScope scope(d_, context_->ctx);
      d_.cuModuleUnload(module);
      throw Error(Status::backend_error,
                  fmt::format("{} (entry \"{}\")", d_.describe(fr, "cuModuleGetFunction"), binary.entry));
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return std::make_shared<CudaModule>(context_, module, function, std::move(binary), from_disk, ms,
                                        programmatic_dependent_launch_);
  }

  void* alloc(size_t bytes) override {
    CudaContextScope scope(d_, context_->ctx);
    CUdeviceptr ptr = 0;
    d_.check(d_.cuMemAlloc(&ptr, std::max<size_t>(bytes, 1)), "cuMemAlloc");
    return reinterpret_cast<void*>(ptr);
  }
  void free(void* ptr) override {
    if (!ptr) return;
    CudaContextScope scope(d_, context_->ctx);
    d_.check(d_.cuMemFree(reinterpret_cast<CUdeviceptr>(ptr)), "cuMemFree");
  }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    CudaContextScope scope(d_, context_->ctx);
    d_.check(d_.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, bytes), "cuMemcpyHtoD");
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    CudaContextScope scope(d_, context_->ctx);
    d_.check(d_.cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoH");
  }
  void synchronize() override {
    CudaContextScope scope(d_, context_->ctx);
    d_.check(d_.cuCtxSynchronize(), "cuCtxSynchronize");
  }

  double time_calls(const std::function<void(void*)>& launch, int repeats) override {
    if (repeats < 1)
      throw Error(Status::invalid_argument, fmt::format("repeats {} is not allowed: must be >= 1", repeats));
    CudaContextScope scope(d_, context_->ctx);
    struct Events {
      const CudaDriver& d;
      CUevent start = nullptr, stop = nullptr;
      ~Events() {
        if (start) d.cuEventDestroy(start);
        if (stop) d.cuEventDestroy(stop);
      }
    } events{d_};
    d_.check(d_.cuEventCreate(&events.start, CU_EVENT_DEFAULT), "cuEventCreate");
    d_.check(d_.cuEventCreate(&events.stop, CU_EVENT_DEFAULT), "cuEventCreate");
    std::vector<double> us;
    us.reserve(static_cast<size_t>(repeats));
    for (int i = 0; i < repeats; ++i) {
      d_.check(d_.cuEventRecord(events.start, nullptr), "cuEventRecord");
      launch(nullptr);
      d_.check(d_.cuEventRecord(events.stop, nullptr), "cuEventRecord");
      d_.check(d_.cuEventSynchronize(events.stop), "cuEventSynchronize");
      float ms = 0.0f;
      d_.check(d_.cuEventElapsedTime(&ms, events.start, events.stop), "cuEventElapsedTime");
      us.push_back(double(ms) * 1000.0);
    }
    std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
    return us[us.size() / 2];
  }

 private:
  /// compute_XX for the PTX fallback: the forced or device arch, capped at the newest arch
  /// NVRTC knows (the driver JITs older PTX for newer GPUs).
  std::string ptx_target() const {
    if (arch_.rfind("compute_", 0) == 0) return arch_;
    const std::vector<int> archs = nvrtc_supported_archs();
    int wanted = device_arch_;
    try {
      wanted = arch_number(arch_);
    } catch (const Error&) {
    }
    int target = wanted;
    if (!archs.empty() && std::find(archs.begin(), archs.end(), target) == archs.end()) {
      target = archs.front();
      for (int a : archs)
        if (a <= wanted) target = a;
    }
    return fmt::format("compute_{}", target);
  }

  /// The binary for `target`: from `disk` when present, else compiled and stored.
  Binary compile_or_read(const Source& source, const std::string& target, bool ptx, DiskCache* disk,
                         bool& from_disk) const {
    auto usable = [&](const Binary& b) {
      return b.entry == source.entry && b.source_hash == source.hash && b.is_ptx == ptx && !b.image.empty();
    };
    return cached_binary(disk, cache_key(source, target, ptx), usable,
                         [&] { return compile_nvrtc(source, target, ptx); }, from_disk);
  }

  /// Compiles `source` for `target` and overwrites its disk entry (when `disk` is usable).
  Binary compile_and_store(const Source& source, const std::string& target, bool ptx, DiskCache* disk) const {
    return recompile_binary(disk, cache_key(source, target, ptx), [&] { return compile_nvrtc(source, target, ptx); });
  }

  static CacheKey cache_key(const Source& source, const std::string& target, bool ptx) {
    CacheKey key;
    key.source_hash_hex = source.hash.hex();
    key.options = join(nvrtc_options(target, ptx));
    key.arch = target;
    key.nvrtc_version = nvrtc_version();
    key.ropejit_version = version();
    key.backend = "cuda";
    return key;
  }

  CUresult load_image(const Binary& binary, CUmodule& module) const {
    CudaContextScope scope(d_, context_->ctx);
    // PTX text must be NUL-terminated for the driver; std::string guarantees it.
    return d_.cuModuleLoadDataEx(&module, binary.image.c_str(), 0, nullptr, nullptr);
  }

  const CudaDriver& d_;
  DeviceProperties properties_;
  int device_arch_ = 0;
  std::string arch_;
  std::shared_ptr<CudaPrimaryContext> context_;
  std::atomic<bool> use_ptx_{false};
  bool programmatic_dependent_launch_ = false;
};

}  // namespace

bool cuda_available() noexcept {
  try {
    return cuda_driver().available();
  } catch (...) {
    return false;
  }
}

std::unique_ptr<Backend> make_cuda_backend(int ordinal, const std::string& arch_override,
                                           bool programmatic_dependent_launch) {
  const CudaDriver& d = cuda_driver();
  if (!d.available()) throw Error(Status::backend_error, "cuda backend: " + d.error);
  if (ordinal < 0 || ordinal >= d.device_count)
    throw Error(Status::invalid_argument,
                fmt::format("cuda device {} is not allowed: this machine has {} device(s), ordinals 0..{}",
                            ordinal, d.device_count, d.device_count - 1));
  if (!arch_override.empty() && arch_override.rfind("sm_", 0) != 0 && arch_override.rfind("compute_", 0) != 0)
    throw Error(Status::invalid_argument,
                fmt::format("arch \"{}\" is not allowed: must be sm_XX (CUBIN) or compute_XX (PTX)", arch_override));
  return std::make_unique<CudaBackend>(d, ordinal, arch_override, programmatic_dependent_launch);
}

}  // namespace ropejit
