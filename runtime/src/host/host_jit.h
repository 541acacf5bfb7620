#pragma once
// Host backend: compiles generated kernel source with Clang 19 in process, JITs it with
// LLVM ORC, and runs the grid on the CPU. No LLVM types here (that TU builds with -fno-rtti).
#include <memory>
#include <string>

#include "ropejit/params.cuh"

namespace ropejit {

/// Grid and block sizes of one launch, as CUDA's dim3.
struct HostLaunchDims {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
};

/// One generated kernel compiled for the CPU.
class HostModule {
 public:
  /// Compiles `source_text` (the exact text NVRTC gets) with the host shim and JITs it;
  /// `entry` is the kernel symbol. Throws Error(compile_error) with clang's diagnostics.
  static std::unique_ptr<HostModule> compile(const std::string& source_text,
                                             const std::string& entry);
  virtual ~HostModule() = default;
  /// Runs every block and thread of the grid (blocks spread over CPU threads).
  virtual void launch(const HostLaunchDims& dims, const KernelParams& params) const = 0;
  /// Wall time of the clang + JIT compile in milliseconds.
  virtual double compile_ms() const = 0;
};

/// True when this build has the host backend.
bool host_backend_available() noexcept;

}  // namespace ropejit
