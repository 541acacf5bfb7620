#pragma once
// Args → KernelParams: every argument checked against the spec before any launch.
#include "ropejit/params.cuh"
#include "ropejit/runtime.h"

namespace ropejit {

/// The checked kernel parameters and the number of rows the grid covers.
struct CheckedLaunch {
  KernelParams params{};
  int64_t rows = 0;  ///< tokens, or batch * max_seq_len for padded_bhsd
};

/// Checks `args` for `spec` launched with vectors of `vec` elements; throws
/// Error(invalid_argument) naming the argument, its value and what is allowed.
/// `host_memory`: the pointers are host memory, so array contents are checked too.
CheckedLaunch check_launch(const Spec& spec, int vec, const Args& args, bool host_memory);

}  // namespace ropejit
