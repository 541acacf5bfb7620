// The host backend: the same generated source compiled in process by Clang and run on the
// CPU (ropejit/internal/host_jit.h). Memory is ordinary aligned host memory.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "ropejit/internal/backend.h"
#include "caches/cached_binary.h"
#include "ropejit/internal/host_jit.h"
#include "ropejit/cache.h"
#include "ropejit/error.h"
#include "ropejit/version.h"

namespace ropejit {

namespace {

/// "host-x86_64": the CPU the JIT targets (the machine this process runs on).
std::string host_arch() {
#if defined(__x86_64__)
  return "host-x86_64";
#elif defined(__aarch64__)
  return "host-aarch64";
#elif defined(__powerpc64__)
  return "host-ppc64";
#else
  return "host-unknown";
#endif
}

class HostLoadedModule final : public LoadedModule {
 public:
  HostLoadedModule(std::unique_ptr<HostModule> module, Binary binary, bool from_disk, double load_ms)
      : module_(std::move(module)), binary_(std::move(binary)), from_disk_(from_disk), load_ms_(load_ms) {}

  void launch(const LaunchDims& dims, const KernelParams& params, void*) const override {
    HostLaunchDims host_dims;
    host_dims.grid_x = dims.grid;
    host_dims.block_x = dims.block;
    module_->launch(host_dims, params);
  }
  const Binary& binary() const override { return binary_; }
  bool from_disk_cache() const override { return from_disk_; }
  double load_ms() const override { return load_ms_; }
  // One block per worker thread: the host runs a block's threads in sequence.
  int resident_blocks_per_sm(int) const override { return 1; }

 private:
  std::unique_ptr<HostModule> module_;
  Binary binary_;
  bool from_disk_;
  double load_ms_;
};

class HostBackend final : public Backend {
 public:
  std::string name() const override { return "host"; }
  std::string arch() const override { return host_arch(); }
  int sm_count() const override { return std::max(1u, std::thread::hardware_concurrency()); }
  DeviceProperties properties() const override {
    DeviceProperties p;
    p.name = "host";
    p.sm_count = sm_count();
    return p;
  }
  bool host_memory() const override { return true; }

  // The disk cache holds the object code (image), keyed by the CPU and its features, since
  // -march=native code must not run on a CPU without them.
  std::shared_ptr<LoadedModule> load(const Source& source, DiskCache* disk) override {
    const auto start = std::chrono::steady_clock::now();
    const CacheKey key = cache_key(source);
    auto usable = [&](const Binary& b) {
      return b.entry == source.entry && b.source_hash == source.hash && !b.is_ptx && !b.image.empty();
    };
    auto compile = [&] { return compile_binary(source); };
    bool from_disk = false;
    Binary binary = cached_binary(disk, key, usable, compile, from_disk);
    std::unique_ptr<HostModule> module;
    try {
      module = HostModule::load_object(binary.image, binary.entry);
    } catch (const Error&) {
      if (!from_disk) throw;
      // An entry with a valid checksum the JIT linker still rejects: compile afresh and overwrite.
      binary = recompile_binary(disk, key, compile);
      from_disk = false;
      module = HostModule::load_object(binary.image, binary.entry);
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return std::make_shared<HostLoadedModule>(std::move(module), std::move(binary), from_disk, ms);
  }

  void* alloc(size_t bytes) override {
    // aligned_alloc wants a multiple of the alignment; 64 covers every vector access.
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    void* ptr = std::aligned_alloc(64, rounded);
    if (!ptr) throw Error(Status::backend_error, fmt::format("host backend: allocating {} bytes failed", bytes));
    return ptr;
  }
  void free(void* ptr) override { std::free(ptr); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void synchronize() override {}  // launches run to completion before returning
  // Host launches are synchronous: the wall clock around each call is its time.
  double time_calls(const std::function<void(void*)>& launch, int repeats) override {
    if (repeats < 1)
      throw Error(Status::invalid_argument, "time_calls: repeats " + std::to_string(repeats) +
                                                " is not allowed: must be >= 1");
    std::vector<double> us(static_cast<size_t>(repeats));
    for (double& t : us) {
      const auto start = std::chrono::steady_clock::now();
      launch(nullptr);
      t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    }
    std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
    return us[us.size() / 2];
  }

 private:
  /// Every input of the object code: source, compiler and flags, CPU and features, versions.
  CacheKey cache_key(const Source& source) const {
    CacheKey key;
    key.source_hash_hex = source.hash.hex();
    key.options = host_jit_flags();
    key.arch = target_;
    key.nvrtc_version = host_jit_compiler();
    key.ropejit_version = version();
    key.backend = "host";
    return key;
  }

  Binary compile_binary(const Source& source) const {
    const auto start = std::chrono::steady_clock::now();
    Binary binary;
    binary.image = HostModule::compile_object(source.text, source.entry);
    binary.arch = host_arch();
    binary.entry = source.entry;
    binary.source_hash = source.hash;
    binary.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return binary;
  }

  const std::string target_ = host_jit_target();
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() {
#ifndef ROPEJIT_HAVE_HOST_BACKEND
  throw Error(Status::unsupported,
              "this ropejit was built without the host backend (ROPEJIT_HOST_BACKEND=OFF)");
#else
  return std::make_unique<HostBackend>();
#endif
}

}  // namespace ropejit
