#pragma once
/// Estimate of one kernel's time on a GPU part from its static report and the launch's memory
/// access pattern: DRAM traffic at the granularity the memory system moves, Little's law with
/// the loads the SASS keeps in flight, instruction issue, FP64, a thread's lifetime and the
/// launch overhead, with constants calibrated on a GPU's measurements where one was measured
/// (docs/static-report.md §3). A model, not a measurement.
#include <string>
#include <vector>

#include "ropejit/kernel_stats.h"

namespace ropejit {

/// One GPU part: spec-sheet figures (cited in the table) and the model's memory constants,
/// measured or fitted on that part (`calibration` says which and where).
struct GpuPart {
  std::string name;           ///< "H100-SXM"
  std::string arch;           ///< "sm_90": selects the other occupancy limits
  double bandwidth_gbs = 0;   ///< DRAM bandwidth by the datasheet, GB/s (10^9 bytes)
  int sms = 0;                ///< streaming multiprocessors
  double boost_mhz = 0;       ///< boost clock
  int fp64_per_sm_clk = 0;    ///< FP64 FMA results per clock per SM
  int fp64_cvt_per_sm_clk = 0;  ///< conversions to or from 64-bit types per clock per SM
  int max_threads_per_sm = 0;
  int registers_per_sm = 0;
  double l2_bytes = 0;        ///< L2 cache size as the device reports it
  // --- the calibrated memory model (docs/static-report.md §3 says where each comes from) ---
  double copy_gbs = 0;        ///< device-to-device copy ceiling, bytes read + written per ns
  double latency_ns = 0;      ///< DRAM round trip of a load under load (Little's law, a thread's trips)
  double l2_latency_ns = 0;   ///< a load that hits L2 (decode inputs the previous kernel just wrote)
  double chunk_bytes = 0;     ///< extra DRAM cost of each run of bytes with untouched bytes around it
  double overlap = 0;         ///< share of the shorter of memory and issue time that does not overlap
  double graph_launch_us = 0; ///< one launch as a CUDA-graph replay (an empty kernel's)
  double event_launch_us = 0; ///< one launch timed alone between two CUDA events
  std::string calibration;    ///< "measured on ...", or from which part the constants are taken
};

/// Every part the model knows, in table order.
const std::vector<GpuPart>& gpu_parts();

/// The part named `name` (case-insensitive); Error(invalid_argument) listing the known names.
const GpuPart& find_gpu_part(const std::string& name);

/// The part a device is, from its name (cuDeviceGetName) and SM count: the part whose model
/// key ("H100", "A100", "L40S", "4090", ...) the name contains and whose SM count matches; null
/// when none does (another variant of the chip: the table's figures would not hold).
const GpuPart* gpu_part_for_device(const std::string& device_name, int sm_count);

/// What one launch does to memory beyond its instruction mix, from its buffers' layout
/// (runtime: memory_access in ropejit/runtime.h). Plain numbers, so this layer needs no spec.
struct MemoryAccess {
  int64_t bytes = 0;            ///< bytes_moved: every byte read and written once, as counted
  int64_t sector_bytes = 0;     ///< the same at DRAM granularity: 32-byte sectors touched, read + written
  int64_t chunks = 0;           ///< separate runs of bytes (untouched bytes around them), reads and writes each
  int64_t partial_sectors = 0;  ///< written sectors a run covers in part (their other bytes are not written)
  int64_t reread_bytes = 0;     ///< bytes a launch reads a second time (a two-pass kernel)
  int64_t reread_distance = 0;  ///< bytes one work item reads between the first read and the re-read
  int index_levels = 0;         ///< dependent index loads before a thread's first data load
  bool inputs_in_l2 = false;    ///< the inputs were just written (a decode step): a thread's loads hit L2
};

/// The time a launch is measured by.
enum class LaunchTiming {
  kernel,  ///< the kernel alone, no launch overhead
  graph,   ///< a CUDA-graph replay (how engines launch decode steps)
  event,   ///< one launch between two CUDA events (ropejit_bench_gpu)
};

/// The estimate for one part and one launch size.
struct Roofline {
  std::string part;
  int64_t rows = 0;              ///< token rows of the launch
  int64_t bytes = 0;             ///< bytes moved (bytes_moved)
  int64_t warps = 0;             ///< ceil(work items / 32)
  Occupancy occupancy;           ///< on the part, from the kernel's registers
  double memory_us = 0;          ///< bytes / datasheet bandwidth (the static gate's memory time)
  double issue_us = 0;           ///< per-item instructions * warps / (SMs * 4 schedulers * clock)
  double fp64_us = 0;            ///< FP64 instructions at the part's FP64 rate
  double issue_fraction = 0;     ///< issue_us / memory_us
  double fp64_fraction = 0;      ///< fp64_us / memory_us
  std::string bound;             ///< "dram", "latency", "issue" or "fp64": the longest of the four
  double in_flight_bytes_per_sm = 0;  ///< resident threads * q/k/v bytes in flight per thread
  double needed_bytes_per_sm = 0;     ///< copy bandwidth * latency / SMs
  double littles_fraction = 0;   ///< min(1, dram_us / latency_us): the bandwidth share latency allows
  // --- the calibrated model ---
  int64_t dram_bytes = 0;        ///< sectors + chunk costs + partial-sector reads + missed re-reads
  double reread_hit = 1;         ///< share of a re-read's bytes still in L2
  double dram_us = 0;            ///< dram_bytes / copy bandwidth
  double latency_us = 0;         ///< Little's law: dram_bytes * latency / bytes in flight (a full GPU)
  double lifetime_us = 0;        ///< one thread: (index levels + trips) * latency + its instructions
  double lifetime_l2_us = 0;     ///< the same with every load an L2 hit (used with inputs_in_l2)
  double launch_us = 0;          ///< the overhead of the timing asked for
  double kernel_us = 0;          ///< lifetime + max(dram, latency, issue, fp64) + non-overlap
  double estimate_us = 0;        ///< launch_us + kernel_us
};

/// The estimate of `stats` on `part` for a launch over `rows` token rows accessing memory as
/// `access` says, timed as `timing` says.
Roofline roofline(const KernelStats& stats, const GpuPart& part, int64_t rows, const MemoryAccess& access,
                  LaunchTiming timing = LaunchTiming::kernel);

/// A launch whose buffers are dense streams of `bytes` (no layout known): sector bytes = bytes.
MemoryAccess dense_access(int64_t bytes);

/// The report as a readable table, with one roofline line per entry of `parts`.
std::string format_report(const KernelStats& stats, const std::vector<Roofline>& parts);

}  // namespace ropejit
