#pragma once
// Host backend: compiles generated kernel source with Clang 19 in process, JITs it with
// LLVM ORC, and runs the grid on the CPU. No LLVM types here (that TU builds with -fno-rtti).
#include <memory>
#include <string>
#include <string_view>

#include "ropejit/params.cuh"

namespace ropejit {

/// Grid and block sizes of one launch, as CUDA's dim3.
struct HostLaunchDims {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
};

/// One generated kernel compiled for the CPU. Concrete, not virtual: its implementation (LLVM's
/// JIT) is compiled with -fno-rtti, and a vtable without type_info would fail UBSan's vptr check
/// at every call from RTTI'd code.
class HostModule {
 public:
  /// Compiles `source_text` (the exact text NVRTC gets) with the host shim and JITs it;
  /// `entry` is the kernel symbol. Throws Error(compile_error) with clang's diagnostics.
  static std::unique_ptr<HostModule> compile(const std::string& source_text,
                                             const std::string& entry);
  /// The first half of compile(): `source_text` as a relocatable object for this CPU (the
  /// bytes the disk cache stores). Throws like compile().
  static std::string compile_object(const std::string& source_text, const std::string& entry);
  /// The second half: JIT-links an object made by compile_object on this CPU target
  /// (host_jit_target()). Throws Error(backend_error) when the bytes are not such an object.
  static std::unique_ptr<HostModule> load_object(std::string_view object, const std::string& entry);
  /// The JIT and the kernel's launcher (host_jit.cpp); made only by load_object.
  struct Impl;
  /// Takes the JIT that load_object made.
  explicit HostModule(std::unique_ptr<Impl> impl);
  HostModule(const HostModule&) = delete;
  HostModule& operator=(const HostModule&) = delete;
  ~HostModule();
  /// Runs every block and thread of the grid (blocks spread over CPU threads).
  void launch(const HostLaunchDims& dims, const KernelParams& params) const;
  /// Wall time that made this module in milliseconds (clang + codegen + link; link only after load_object).
  double compile_ms() const;
  /// True when the kernel calls a warp or block collective, so each block's threads run as
  /// fibers (cooperative.h); false for the plain loop over threads.
  bool cooperative() const;

 private:
  std::unique_ptr<Impl> impl_;
};

/// What object code depends on besides the source: triple, CPU name and its feature set
/// ("x86_64-pc-linux-gnu cpu=znver3 +avx2,..."); part of the host cache key.
std::string host_jit_target();

/// The compiler ("clang 19.1.7"); part of the host cache key.
std::string host_jit_compiler();

/// The flags that shape the code ("-x c++ -std=c++17 -O2 -march=native ..."); part of the key.
std::string host_jit_flags();

/// True when this build has the host backend.
bool host_backend_available() noexcept;

}  // namespace ropejit
