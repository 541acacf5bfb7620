#pragma once
/// Roofline estimate of one kernel on a GPU part from its static report: memory time against
/// instruction issue time and FP64 time, and the bandwidth Little's law allows with the loads
/// the SASS keeps in flight. A model, not a measurement (docs/static-report.md).
#include <string>
#include <vector>

#include "ropejit/kernel_stats.h"

namespace ropejit {

/// One GPU part: public spec-sheet figures (cited in the table) and one assumed latency.
struct GpuPart {
  std::string name;           ///< "H100-SXM"
  std::string arch;           ///< "sm_90": selects the other occupancy limits
  double bandwidth_gbs = 0;   ///< DRAM bandwidth, GB/s (10^9 bytes)
  int sms = 0;                ///< streaming multiprocessors
  double boost_mhz = 0;       ///< boost clock
  int fp64_per_sm_clk = 0;    ///< FP64 FMA results per clock per SM
  int fp64_cvt_per_sm_clk = 0;  ///< conversions to or from 64-bit types per clock per SM
  int max_threads_per_sm = 0;
  int registers_per_sm = 0;
  double latency_ns = 0;      ///< assumed loaded DRAM latency (Little's law)
};

/// Every part the model knows, in table order.
const std::vector<GpuPart>& gpu_parts();

/// The part named `name` (case-insensitive); Error(invalid_argument) listing the known names.
const GpuPart& find_gpu_part(const std::string& name);

/// The part a device is, from its name (cuDeviceGetName) and SM count: the part whose model
/// key ("H100", "A100", "L40S", "4090", ...) the name contains and whose SM count matches; null
/// when none does (another variant of the chip: the table's figures would not hold).
const GpuPart* gpu_part_for_device(const std::string& device_name, int sm_count);

/// The estimate for one part and one launch size.
struct Roofline {
  std::string part;
  int64_t rows = 0;              ///< token rows of the launch
  int64_t bytes = 0;             ///< bytes moved (bytes_moved)
  int64_t warps = 0;             ///< ceil(work items / 32)
  Occupancy occupancy;           ///< on the part, from the kernel's registers
  double memory_us = 0;          ///< bytes / bandwidth
  double issue_us = 0;           ///< per-item instructions * warps / (SMs * 4 schedulers * clock)
  double fp64_us = 0;            ///< FP64 instructions at the part's FP64 rate
  double issue_fraction = 0;     ///< issue_us / memory_us
  double fp64_fraction = 0;      ///< fp64_us / memory_us
  std::string bound;             ///< "memory", "issue" or "fp64": the longest of the three
  double in_flight_bytes_per_sm = 0;  ///< resident threads * q/k/v bytes in flight per thread
  double needed_bytes_per_sm = 0;     ///< bandwidth * latency / SMs
  double littles_fraction = 0;   ///< min(1, in flight / needed): bandwidth share latency allows
  double estimate_us = 0;        ///< max(memory_us / littles_fraction, issue_us, fp64_us)
};

/// The estimate of `stats` on `part` for a launch over `rows` token rows moving `bytes`.
Roofline roofline(const KernelStats& stats, const GpuPart& part, int64_t rows, int64_t bytes);

/// The report as a readable table, with one roofline line per entry of `parts`.
std::string format_report(const KernelStats& stats, const std::vector<Roofline>& parts);

}  // namespace ropejit
