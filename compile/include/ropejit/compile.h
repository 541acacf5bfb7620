#pragma once
/// Binary: NVRTC output for one exact architecture plus its resource usage.
#include <string>
#include <vector>

#include "ropejit/source.h"

namespace ropejit {

/// NVRTC's own wall time per phase of one compile (its --time table, whole milliseconds);
/// -1 where not measured (compile_nvrtc) or not run (ptxas for PTX).
struct CompilePhases {
  int frontend_ms = -1;  ///< CUDA C++ front end: preprocessing, parsing, templates, NVVM IR
  int nvvm_ms = -1;      ///< NVVM: libdevice link, optimizer, PTX generation
  int ptxas_ms = -1;     ///< ptxas: PTX to SASS (CUBIN only)
};

/// Compiled kernel image and what ptxas reported about it.
struct Binary {
  std::string arch;          ///< "sm_90"
  bool is_ptx = false;       ///< PTX text instead of CUBIN
  std::string image;         ///< CUBIN bytes or PTX text
  std::string entry;         ///< kernel symbol
  Hash128 source_hash;
  int registers = -1;        ///< per thread
  int spill_bytes = 0;       ///< spill stores + loads bytes reported by ptxas
  int stack_bytes = 0;       ///< stack frame bytes
  int shared_bytes = 0;      ///< static shared memory
  double compile_ms = 0.0;   ///< wall time of nvrtcCreateProgram + nvrtcCompileProgram + getCUBIN
  CompilePhases phases;      ///< filled by compile_nvrtc_timed only
  std::string log;           ///< NVRTC log (ptxas info lines included)
};

/// Compiles a source for `arch` ("sm_80", "sm_90", "sm_90a", "compute_90" for PTX).
/// On failure throws Error(compile_error) with the log and the offending source lines.
/// libnvrtc is loaded on the first call of this or nvrtc_version(): $ROPEJIT_NVRTC_LIBRARY when
/// set, else the one found at build time, else libnvrtc.so.<major>; Error(compile_error) when none loads.
Binary compile_nvrtc(const Source& source, const std::string& arch, bool ptx = false);

/// compile_nvrtc, plus NVRTC's per-phase times in Binary::phases (NVRTC's --time, which writes
/// its table to a file: a temporary one, read back and removed). The image is the same.
Binary compile_nvrtc_timed(const Source& source, const std::string& arch, bool ptx = false);

/// "13.0" — part of every cache key. Loads NVRTC like compile_nvrtc().
std::string nvrtc_version();

/// The number of a target: 90 for "sm_90", "sm_90a" or "compute_90"; Error(invalid_argument)
/// naming the arch when it is not sm_XX or compute_XX.
int arch_number(const std::string& arch);

/// Architectures this NVRTC compiles for (75, 80, 86, 89, 90, ...), ascending; empty when NVRTC
/// cannot be loaded or cannot say.
std::vector<int> nvrtc_supported_archs();

/// The NVRTC options used for `arch` (part of the cache key).
std::vector<std::string> nvrtc_options(const std::string& arch, bool ptx);

}  // namespace ropejit
