#pragma once
/// The C++ API: a Runtime turns specs into launchable Kernels on the cuda or host backend.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "ropejit/buckets.h"
#include "ropejit/compile.h"
#include "ropejit/config.h"
#include "ropejit/introspect.h"
#include "ropejit/roofline.h"
#include "ropejit/ropejit.h"
#include "ropejit/spec.h"

namespace ropejit {

/// Where kernels run. auto = cuda when a device is usable, else host.
enum class BackendKind { auto_, cuda, host };
inline constexpr std::array<EnumName<BackendKind>, 3> kBackendNames{{
    {BackendKind::auto_, "auto"}, {BackendKind::cuda, "cuda"}, {BackendKind::host, "host"}}};
template <> constexpr const auto& enum_table<BackendKind>() { return kBackendNames; }

/// Runtime options.
struct RuntimeOptions {
  BackendKind backend = BackendKind::auto_;  ///< where kernels run
  std::string cache_dir;       ///< empty: ROPEJIT_CACHE_DIR, XDG_CACHE_HOME/ropejit, ~/.cache/ropejit
  bool disk_cache = true;      ///< false: memory cache only
  std::string tuning_db;       ///< tuning database path; empty: ROPEJIT_TUNING_DB or none
  /// Folder of shipped tuning files, read when the tuning database has no section for this
  /// device (docs/tuning.md); empty: ROPEJIT_SHIPPED_TUNING_DIR, else the one installed with
  /// the library; "none": no shipped file is read.
  std::string shipped_tuning_dir;
  std::string arch;            ///< override the compile target ("sm_90"); empty: the device's
  int device = 0;              ///< CUDA device ordinal
  /// Launch with programmatic dependent launch (cuda backend, sm_90+ kernels): a kernel may
  /// start while the previous kernel in its stream finishes; it waits in-kernel
  /// (griddepcontrol.wait) before reading any input. Ignored on the host backend and below sm_90.
  bool programmatic_dependent_launch = false;
  /// Receives each warning (a disabled disk cache, an ignored or mismatched tuning database)
  /// as its text without the "ropejit: warning: " prefix, on the thread that raised it (inside
  /// the Runtime constructor or get()). Empty: "ropejit: warning: <text>" on stderr, once per
  /// warning. Must not throw (an exception is dropped) nor call back into this Runtime.
  std::function<void(std::string_view)> on_warning;
};

/// One launch's arguments: device pointers (cuda backend) or host pointers (host backend).
/// Strides are in elements between consecutive tokens; 0 means dense. The fields, their
/// meaning and layout are the C API's ropejit_args (ropejit/ropejit.h), their one definition:
/// an Args is a ropejit_args, so either converts to the other by a plain copy.
/// PositionsType (int32 or int64 positions) is declared there too.
struct Args : ropejit_args {
  /// Every field zero (positions int32), struct_size = sizeof(ropejit_args), as
  /// ropejit_args_init: so an Args can also be passed to ropejit_kernel_launch.
  Args() : ropejit_args{} { struct_size = sizeof(ropejit_args); }
};
static_assert(sizeof(Args) == sizeof(ropejit_args) && std::is_standard_layout_v<Args> &&
                  std::is_trivially_copyable_v<Args>,
              "Args must stay exactly a ropejit_args: no fields of its own");

class Backend;
class KernelImpl;
class RuntimeImpl;

/// A compiled, loaded kernel for one spec (one module per tuned token bucket). Copies share it;
/// it keeps its backend alive, so it may outlive the Runtime that made it.
class Kernel {
 public:
  /// Checks every argument, then launches on `stream` (a CUstream; ignored on host).
  /// Never allocates or synchronizes on the cuda backend.
  void launch(const Args& args, void* stream = nullptr) const;
  /// The spec this kernel implements.
  const Spec& spec() const;
  /// The config used for a token count.
  const Config& config_for(int64_t num_tokens) const;
  /// The compiled binary used for a token count (host backend: image empty).
  const Binary& binary_for(int64_t num_tokens) const;
  /// "cuda" or "host".
  std::string backend() const;
  /// True when the last get() found every module in a cache (no compile).
  bool from_cache() const;
  /// Milliseconds spent compiling or loading in get().
  double load_ms() const;

 private:
  friend class Runtime;
  explicit Kernel(std::shared_ptr<const KernelImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const KernelImpl> impl_;
};

/// Bytes one launch moves through memory, each counted once: q/k elements read and written
/// (the rotated part, plus the tail [d, D) when it moves), v when copied, the bias once,
/// positions (explicit) or cu_seqlens + start_pos (varlen, `batch` sequences), and every
/// output row of the padded form (batch * max_seq_len rows, zero padding included); int32
/// positions. The sum over the launch's buffers (ropejit/internal/launch_buffers.h).
int64_t bytes_moved(const Spec& spec, int64_t tokens, int batch, int64_t max_seq_len);

/// What a launch of `spec` with `config` at `shape` does to memory, for the calibrated model
/// (ropejit/roofline.h roofline): bytes_moved, the same in 32-byte sectors, the separate runs and
/// partly written sectors its buffers' layouts make, the kernel's second reads and the index
/// loads before a thread's first data load (docs/static-report.md §3).
MemoryAccess memory_access(const Spec& spec, const Config& config, const LaunchShape& shape);

/// Owns the backend, the caches and the tuning database. Thread-safe.
class Runtime {
 public:
  /// Opens the backend (Error backend_error if an explicit cuda backend is unusable).
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  /// A kernel with tuned configs where the database has them, else the default config.
  Kernel get(const Spec& spec);
  /// A kernel with one fixed config for every token count.
  Kernel get(const Spec& spec, const Config& config);
  /// The backend in use ("cuda" or "host").
  std::string backend() const;
  /// Compile target ("sm_90"; "host" on the host backend).
  std::string arch() const;
  /// Number of SMs (host: CPU threads).
  int sm_count() const;

 private:
  friend Backend& runtime_backend(Runtime&);
  Backend& backend_impl();
  Kernel make_kernel(const Spec& spec, const std::array<Config, kNumBuckets>& configs);
  std::shared_ptr<const KernelImpl> build_kernel(const Spec& spec, const std::array<Config, kNumBuckets>& configs);
  std::unique_ptr<RuntimeImpl> impl_;
};

/// Whether ropejit can implement a spec on this build; `why` gets the reason when not.
bool can_implement(const Spec& spec, std::string* why = nullptr);

}  // namespace ropejit
