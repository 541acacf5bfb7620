#pragma once
// KernelVariant: one launchable form of a spec — a config's plan, its loaded module and (table
// mode) its cos/sin table — with the one path from Args to a launch. Runtime keeps one per
// distinct bucket config; the tuner's measurer one per candidate.
#include <memory>

#include "ropejit/cache.h"
#include "ropejit/internal/backend.h"
#include "ropejit/internal/launch_buffers.h"
#include "ropejit/internal/memory_cache.h"

namespace ropejit {

struct DeviceTable;  // runtime/src/cos_sin_table.h: only the runtime builds and reads tables

/// Shared caches a variant's parts may come from (each may be null: built afresh).
struct VariantCaches {
  MemoryCache<LoadedModule>* modules = nullptr;  ///< (source hash, backend, arch) → module
  MemoryCache<DeviceTable>* tables = nullptr;    ///< (table hash, backend, arch) → table
};

/// A spec compiled and loaded for one Config on one backend. Immutable and thread-safe.
class KernelVariant {
 public:
  /// Plans, generates and loads `config` for `spec` (through `disk` and `caches` when given).
  /// `backend` must outlive the variant. Throws Error (unsupported, compile_error, ...).
  static std::shared_ptr<const KernelVariant> create(Backend& backend, const Spec& spec, const Config& config,
                                                     DiskCache* disk, const VariantCaches& caches = {});

  /// The config it was built for.
  const Config& config() const { return config_; }
  /// The loaded module.
  const LoadedModule& module() const { return *module_; }
  /// True when create() compiled nothing (memory or disk cache hit).
  bool from_cache() const { return from_cache_; }

  /// Checks `args` (Error invalid_argument naming the bad one) and builds the kernel params,
  /// this variant's table included; `rows` 0 means there is nothing to launch.
  CheckedLaunch prepare(const Args& args) const;
  /// Grid and block over `rows` rows.
  LaunchDims dims(int64_t rows) const;
  /// Launches already prepared params (no checks, no allocation, no synchronization).
  void launch(const KernelParams& params, const LaunchDims& dims, void* stream) const;
  /// prepare() + launch(): the checked launch of Kernel::launch.
  void launch(const Args& args, void* stream) const;

 private:
  KernelVariant() = default;
  Backend* backend_ = nullptr;
  Spec spec_;
  Config config_;
  std::shared_ptr<LoadedModule> module_;
  std::shared_ptr<DeviceTable> table_;  // SinCosMode::table only
  struct UsedFields;                    // kernel_variant.cpp: ArgsFieldSet stays inside the runtime
  std::shared_ptr<const UsedFields> used_fields_;  // the Args fields the spec's launches read, for check_launch
  int blocks_per_sm_ = 0;               // resident blocks per SM (persistent grids only)
  bool from_cache_ = true;
};

}  // namespace ropejit
