// The tuner's workloads and output comparison.
#include "workload_data.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ropejit/fp_convert.h"

namespace ropejit {

HostWorkload tuning_workload(const Spec& spec, const WorkloadShape& shape, uint64_t seed, int64_t distinct_elements) {
  WorkloadOptions o;
  o.tokens = shape.tokens;
  o.batch = shape.batch;
  o.sequence_tokens = shape.max_seq_len;  // full sequences of S tokens, the last what remains
  o.max_position = std::max<int64_t>(1, std::min<int64_t>(spec.max_position_embeddings, int64_t(1) << 30));
  o.distinct_elements = distinct_elements;
  o.seed = seed;
  return make_host_workload(spec, o);
}

std::string compare_output_bytes(DType dtype, const std::string& name, const std::string& actual,
                                 const std::string& reference) {
  if (actual.size() != reference.size())
    return fmt::format("{}: {} bytes, reference {} bytes", name, actual.size(), reference.size());
  const double relative = dtype == DType::fp32 ? 1e-5 : (dtype == DType::bf16 ? 1.0 / 64 : 1.0 / 512);
  const size_t n = actual.size() / size_t(dtype_size(dtype));
  for (size_t i = 0; i < n; ++i) {
    const double a = ref::load_value(dtype, actual.data(), int64_t(i));
    const double r = ref::load_value(dtype, reference.data(), int64_t(i));
    const bool a_nan = std::isnan(a), r_nan = std::isnan(r);
    const bool same =
        (a_nan && r_nan) || (!a_nan && !r_nan && std::fabs(a - r) <= relative * std::max(1.0, std::fabs(r)));
    if (!same)  // storage values are exact floats: printed as such
      return fmt::format("{}[{}] = {} but the reference (default config) gives {}", name, i, float(a), float(r));
  }
  return {};
}

}  // namespace ropejit
