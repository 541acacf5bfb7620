#pragma once
// Args → KernelParams: every argument checked against the spec before any launch. The buffers
// one launch has, per io form, are in ropejit/internal/launch_buffers.h.
#include "launch/args_fields.h"
#include "ropejit/internal/launch_buffers.h"
#include "ropejit/runtime.h"

namespace ropejit {

/// Checks `args` for `spec` launched with vectors of `vec` elements; throws
/// Error(invalid_argument) naming the argument, its value and what is allowed.
/// `host_memory`: the pointers are host memory, so array contents are checked too.
/// A field the spec's launches do not use (launch_fields) must be at its default.
CheckedLaunch check_launch(const Spec& spec, int vec, const Args& args, bool host_memory);
/// The same with `used` = used_args_fields(spec), which a caller launching one spec often keeps.
CheckedLaunch check_launch(const Spec& spec, int vec, const Args& args, bool host_memory, const ArgsFieldSet& used);

}  // namespace ropejit
