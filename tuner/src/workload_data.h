#pragma once
// Host-side data of one tuning workload: random inputs in the storage type, positions or
// sequences, and the output tensors a launch writes; plus the output comparison the tuner's
// correctness check uses.
#include <cstdint>
#include <string>
#include <vector>

#include "ropejit/spec.h"
#include "ropejit/tuner.h"

namespace ropejit {

/// One tensor of a workload: a name and its bytes in the storage type.
struct HostTensor {
  std::string name;   ///< "q", "k", "v", "qkv", "q_out", ...
  std::string bytes;
};

/// Inputs and output sizes of one launch at a WorkloadShape.
struct HostWorkload {
  std::vector<HostTensor> inputs;       ///< q, k(, v) or qkv: random values in [-1, 1]
  std::vector<HostTensor> outputs;      ///< q_out, k_out(, v_out): sized, contents unused; empty when inplace
  std::string bias;                     ///< [(Hq + 2 Hkv) D] when io.qkv_bias, else empty
  std::vector<int32_t> positions;       ///< explicit positions [T]
  std::vector<int32_t> cu_seqlens;      ///< varlen: [batch + 1]
  std::vector<int64_t> start_pos;       ///< varlen: [batch]
  int64_t seq_len = 0;                  ///< max(position) + 1
};

/// Fresh random data for `shape` (positions spread over [0, max_position_embeddings)).
HostWorkload make_host_workload(const Spec& spec, const WorkloadShape& shape, uint64_t seed);

/// Compares output bytes of `dtype` with the reference bytes; "" when every element agrees
/// within two storage ulps (relative to max(|reference|, 1)) and NaN appears in the same
/// places, else a description of the first difference.
std::string compare_output_bytes(DType dtype, const std::string& name, const std::string& actual,
                                 const std::string& reference);

}  // namespace ropejit
