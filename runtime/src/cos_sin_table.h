#pragma once
// The fp32 cos/sin table of SinCosMode::table configs, built once per (frequencies, backend).
#include <cstdint>
#include <memory>

#include "ropejit/internal/backend.h"
#include "ropejit/source.h"

namespace ropejit {

/// A [rows][rotary_dim] fp32 table (cos for pairs 0..d/2-1, then sin) in backend memory.
struct DeviceTable {
  Backend* backend = nullptr;
  float* data = nullptr;
  int64_t rows = 0;
  DeviceTable() = default;
  DeviceTable(const DeviceTable&) = delete;
  DeviceTable& operator=(const DeviceTable&) = delete;
  ~DeviceTable() {
    if (backend && data) backend->free(data);
  }
};

/// Rows a table covers: positions past it are computed in the kernel.
int64_t cos_sin_table_rows(const Spec& spec);

/// Identifies a table's contents (inv_freq, attention factor, angle mode, rows).
Hash128 cos_sin_table_hash(const Plan& plan);

/// Computes the table on the host (cos/sin in double of the spec's angle, times the
/// attention factor, rounded to fp32) and copies it to the backend.
std::shared_ptr<DeviceTable> build_cos_sin_table(const Plan& plan, Backend& backend);

}  // namespace ropejit
