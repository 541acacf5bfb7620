#pragma once
// The tuner's workloads (the runtime's one workload builder at a WorkloadShape) and the output
// comparison its correctness check uses.
#include <cstdint>
#include <string>

#include "ropejit/internal/workload.h"
#include "ropejit/spec.h"
#include "ropejit/tuner.h"

namespace ropejit {

/// Fresh random data for `shape`, from `seed` (positions spread over [0,
/// max_position_embeddings)); `distinct_elements` as in WorkloadOptions (0: every element drawn).
HostWorkload tuning_workload(const Spec& spec, const WorkloadShape& shape, uint64_t seed,
                             int64_t distinct_elements = 0);

/// Compares output bytes of `dtype` with the reference bytes; "" when every element agrees
/// within two storage ulps (relative to max(|reference|, 1)) and NaN appears in the same
/// places, else a description of the first difference.
std::string compare_output_bytes(DType dtype, const std::string& name, const std::string& actual,
                                 const std::string& reference);

}  // namespace ropejit
