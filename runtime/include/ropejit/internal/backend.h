#pragma once
// Backends: where a Source becomes a launchable module (cuda: NVRTC CUBIN + driver API;
// host: Clang + ORC JIT), plus the memory operations the CLI and tests need.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ropejit/compile.h"
#include "ropejit/config.h"
#include "ropejit/params.cuh"

namespace ropejit {

class DiskCache;

/// One loaded kernel image on a backend.
class LoadedModule {
 public:
  virtual ~LoadedModule() = default;
  /// Launches with already-checked params (no allocation, no synchronization on cuda).
  virtual void launch(const LaunchDims& dims, const KernelParams& params, void* stream) const = 0;
  /// The binary it was loaded from (host: resource fields unset, image empty).
  virtual const Binary& binary() const = 0;
  /// True when it came from the disk cache rather than a compile.
  virtual bool from_disk_cache() const = 0;
  /// Compile or load time in milliseconds.
  virtual double load_ms() const = 0;
  /// Blocks of `block_threads` threads this kernel keeps resident per SM (the occupancy it
  /// really reaches: registers, shared memory, thread limits); sizes persistent grids.
  virtual int resident_blocks_per_sm(int block_threads) const = 0;
};

/// The device a backend runs on, as it reported itself when the backend opened it.
struct DeviceProperties {
  std::string name;                  ///< cuDeviceGetName ("NVIDIA H100 80GB HBM3"); "host"
  int compute_capability_major = 0;  ///< 9 for sm_90; 0 on host
  int compute_capability_minor = 0;  ///< 0 for sm_90; 0 on host
  int sm_count = 0;                  ///< SMs (cuda) or worker threads (host)
  int64_t l2_bytes = 0;              ///< L2 cache size; 0 on host
  int driver_version = 0;            ///< cuDriverGetVersion (13000 = 13.0); 0 on host
  int ordinal = 0;                   ///< the CUDA device ordinal the backend opened; 0 on host
};

/// A backend. Thread-safe.
class Backend {
 public:
  virtual ~Backend() = default;
  /// "cuda" or "host".
  virtual std::string name() const = 0;
  /// Compile target: "sm_90", "host-x86_64".
  virtual std::string arch() const = 0;
  /// SMs (cuda) or worker threads (host).
  virtual int sm_count() const = 0;
  /// The device this backend runs on.
  virtual DeviceProperties properties() const = 0;
  /// True when pointers are host memory (launch checks then read array contents).
  virtual bool host_memory() const = 0;
  /// Compiles (or loads from `disk`, which may be null) and loads `source`.
  virtual std::shared_ptr<LoadedModule> load(const Source& source, DiskCache* disk) = 0;

  /// Device memory for the CLI and tests (host backend: aligned host memory).
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  /// Waits for all work on the default stream.
  virtual void synchronize() = 0;
  /// Median time in microseconds of `repeats` calls of `launch(stream)`: between two events on
  /// the cuda backend, by the wall clock on the (synchronous) host backend.
  virtual double time_calls(const std::function<void(void* stream)>& launch, int repeats) = 0;
};

class Runtime;
/// The backend a Runtime uses (for the CLI and tests: memory and timing).
Backend& runtime_backend(Runtime& runtime);

/// The cuda backend for device `ordinal`; throws Error(backend_error) with the reason when
/// libcuda cannot be loaded or no device is usable. `arch_override` forces the target.
std::unique_ptr<Backend> make_cuda_backend(int ordinal, const std::string& arch_override,
                                           bool programmatic_dependent_launch = false);

/// Whether a CUDA device is usable (libcuda loads, cuInit succeeds, a device exists).
bool cuda_available() noexcept;

/// The host backend; throws Error(unsupported) when built without it.
std::unique_ptr<Backend> make_host_backend();

}  // namespace ropejit
