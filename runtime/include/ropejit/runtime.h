#pragma once
/// The C++ API: a Runtime turns specs into launchable Kernels on the cuda or host backend.
#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "ropejit/buckets.h"
#include "ropejit/compile.h"
#include "ropejit/config.h"
#include "ropejit/spec.h"

namespace ropejit {

/// Where kernels run. auto = cuda when a device is usable, else host.
enum class BackendKind { auto_, cuda, host };
inline constexpr std::array<EnumName<BackendKind>, 3> kBackendNames{{
    {BackendKind::auto_, "auto"}, {BackendKind::cuda, "cuda"}, {BackendKind::host, "host"}}};
template <> constexpr const auto& enum_table<BackendKind>() { return kBackendNames; }

/// Runtime options.
struct RuntimeOptions {
  BackendKind backend = BackendKind::auto_;
  std::string cache_dir;       ///< empty: ROPEJIT_CACHE_DIR, XDG_CACHE_HOME/ropejit, ~/.cache/ropejit
  bool disk_cache = true;      ///< false: memory cache only
  std::string tuning_db;       ///< tuning database path; empty: ROPEJIT_TUNING_DB or none
  std::string arch;            ///< override the compile target ("sm_90"); empty: the device's
  int device = 0;              ///< CUDA device ordinal
};

/// Integer type of an explicit positions array.
enum class PositionsType { int32, int64 };

/// One launch's arguments: device pointers (cuda backend) or host pointers (host backend).
/// Strides are in elements between consecutive tokens; 0 means dense.
struct Args {
  int64_t num_tokens = 0;            ///< T
  // Input, separate form: q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D] (v when the spec copies v).
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;
  // Input, packed form: qkv [T, (Hq + 2 Hkv) D].
  void* qkv = nullptr;
  int64_t qkv_stride = 0;
  const void* bias = nullptr;        ///< [(Hq + 2 Hkv) D] in the storage dtype, when qkv_bias
  // Outputs (separate: [T, H, D] token-major; padded_bhsd: [B, H, S, D] dense).
  void* q_out = nullptr;
  void* k_out = nullptr;
  void* v_out = nullptr;
  int64_t q_out_stride = 0, k_out_stride = 0, v_out_stride = 0;  ///< separate form only
  // Positions: explicit, or varlen.
  const void* positions = nullptr;   ///< [T]
  PositionsType positions_type = PositionsType::int32;
  const int32_t* cu_seqlens = nullptr;  ///< [batch + 1], cu_seqlens[batch] == T
  const int64_t* start_pos = nullptr;   ///< [batch] or null (all 0)
  int batch = 0;
  int max_seq_len = 0;               ///< S of padded_bhsd
  /// L = max(position) + 1 over the launch; required by dynamic NTK and LongRoPE.
  int64_t seq_len = 0;
};

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
