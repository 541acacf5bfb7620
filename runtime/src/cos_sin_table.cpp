// fp32 cos/sin tables for the `table` sin/cos mode (never fp16/bf16: docs/rope-math.md §9).
#include "cos_sin_table.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace ropejit {

namespace {
constexpr int64_t kMaxTableRows = int64_t(1) << 17;  // 64 MiB at rotary_dim 128
}

int64_t cos_sin_table_rows(const Spec& spec) {
  return std::min<int64_t>(std::max<int64_t>(spec.max_position_embeddings, 1), kMaxTableRows);
}

Hash128 cos_sin_table_hash(const Plan& plan) {
  std::string key = "cos_sin_table v1 ";
  key += std::to_string(cos_sin_table_rows(plan.spec)) + " " + std::string(to_string(plan.spec.angle));
  key += " " + std::to_string(static_cast<float>(plan.freqs.attention_factor));
  for (double f : plan.freqs.inv_freq) key += " " + std::to_string(static_cast<float>(f));
  return hash_bytes(key);
}

std::shared_ptr<DeviceTable> build_cos_sin_table(const Plan& plan, Backend& backend) {
  const int64_t rows = cos_sin_table_rows(plan.spec);
  const int half = plan.spec.rotary_dim / 2;
  const bool exact = plan.spec.angle == AnglePrecision::exact;
  const double s = static_cast<float>(plan.freqs.attention_factor);
  std::vector<float> host(static_cast<size_t>(rows) * 2 * half);
  for (int64_t p = 0; p < rows; ++p) {
    float* row = host.data() + p * 2 * half;
    for (int i = 0; i < half; ++i) {
      const float inv = static_cast<float>(plan.freqs.inv_freq[i]);
      // Same angle as the kernel: HF's float32 product, or the exact product in double.
      const double angle = exact ? static_cast<double>(p) * inv
                                 : static_cast<double>(static_cast<float>(p) * inv);
      row[i] = static_cast<float>(std::cos(angle) * s);
      row[half + i] = static_cast<float>(std::sin(angle) * s);
    }
  }
  auto table = std::make_shared<DeviceTable>();
  const size_t bytes = host.size() * sizeof(float);
  table->data = static_cast<float*>(backend.alloc(bytes));
  table->backend = &backend;
  table->rows = rows;
  backend.copy_to_device(table->data, host.data(), bytes);
  return table;
}

}  // namespace ropejit
