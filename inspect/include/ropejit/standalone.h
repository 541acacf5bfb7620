#pragma once
/// Kernel source for people (docs/inspect.md): one self-contained CUDA file holding exactly one
/// spec's kernel, the ropejit headers inlined and pruned to what this spec uses.
#include <string>

#include "ropejit/compile.h"
#include "ropejit/config.h"
#include "ropejit/spec.h"

namespace ropejit {

/// What emit_standalone adds beyond the kernel.
struct StandaloneOptions {
  /// Compile for this arch ("sm_90") and state its registers, spills and stack in the header;
  /// empty: not compiled.
  std::string report_arch;
  /// Run clang-format over the result (a fixed style: 2-space indent, 110 columns).
  bool format = true;
};

/// True when this build can prune (Clang libTooling, built with the host backend).
bool standalone_available() noexcept;

/// The standalone CUDA source of (spec, config): an annotated header (spec, launch config, grid
/// formula, per-thread work, bytes per token, KernelParams layout, ropejit version), then the
/// generated source with every ropejit header inlined, `if constexpr` branches this spec does
/// not take removed, and functions, types, traits and tables it does not use dropped. It compiles
/// alone (NVRTC, or `nvcc -cubin`) to the same kernel as the regular path.
/// Throws Error(unsupported) when !standalone_available(), Error(unsupported) for a config
/// that cannot implement the spec.
std::string emit_standalone(const Spec& spec, const Config& config, const StandaloneOptions& options = {});

/// The generated source with every `#include "ropejit/..."` replaced by that header's text
/// (each once), nothing pruned: the input of the pruning pass.
std::string inline_templates(const std::string& generated_source);

}  // namespace ropejit
