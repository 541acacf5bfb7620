// Roofline estimate from the static report and the table of GPU parts; the text report.
#include "ropejit/roofline.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "ropejit/error.h"

namespace ropejit {

namespace {

// The memory model's constants (docs/static-report.md §3): measured on an H200, or fitted to its
// 50 recorded launches (tests/data/perf/h200-2026-11-28.json: 23 kernels at 4096 and 65536
// tokens, llama-3.1-8b's decode graphs) by `ropejit model fit`; the H100 SXM is the same chip,
// the other parts take them unmeasured.
constexpr double kH200CopyGbs = 4226;     // measured: cuMemcpyDtoD of 1 GiB, bytes read + written
constexpr double kH200Datasheet = 4800;   // the H200 datasheet's HBM3e bandwidth
constexpr double kLatencyNs = 630;        // fitted: a DRAM round trip under load (plain Little's law gave 675-963 ns)
constexpr double kL2LatencyNs = 200;      // fitted: a decode launch's L2-hit round trip (graph replay, T = 1: 2.48 us)
constexpr double kChunkBytes = 42;        // fitted: gpt-neox-20b's 48-byte, MLA's and V4's 128-byte slices
constexpr double kOverlap = 0.09;         // fitted: issue and memory time overlap but for 9 % of the shorter
constexpr double kGraphLaunchUs = 1.2;    // measured: an empty kernel's graph replay (peers run, 2026-11-28)
constexpr double kEventLaunchUs = 5.25;   // fitted: a launch timed alone between two events

// Copy ceiling of a part not measured: its datasheet bandwidth times the H200's copy share.
constexpr double copy_share(double datasheet_gbs) { return datasheet_gbs * (kH200CopyGbs / kH200Datasheet); }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const std::vector<GpuPart>& gpu_parts() {
  // name, arch, GB/s, SMs, boost MHz, FP64 FMA/clk/SM, 64-bit conversions/clk/SM, max threads/SM,
  // registers/SM, L2 bytes, then the memory model. FP64 per clock = FP64 TFLOPS / (2 * SMs * clock).
  constexpr const char* kFromH200 = "constants of the H200 (same chip), copy = datasheet x 0.88";
  constexpr const char* kUnmeasured = "not measured: the H200's constants, copy = datasheet x 0.88";
  static const std::vector<GpuPart> parts = {
      // NVIDIA H100 datasheet (SXM5 80 GB): 3.35 TB/s HBM3, FP64 34 TFLOPS; Hopper whitepaper:
      // 132 SMs, 1.98 GHz boost, 50 MB L2; CUDA Programming Guide cc 9.0: 2048 threads, 64K registers/SM.
      {"H100-SXM", "sm_90", 3350, 132, 1980, 64, 16, 2048, 65536, 50e6, copy_share(3350), kLatencyNs, kL2LatencyNs,
       kChunkBytes, kOverlap, kGraphLaunchUs, kEventLaunchUs, kFromH200},
      // NVIDIA H200 datasheet (SXM 141 GB): 4.8 TB/s HBM3e, FP64 34 TFLOPS; the H100 SXM die
      // and clocks (132 SMs, 1.98 GHz); L2 60 MB as the device reported it (torch, 2026-10-28).
      {"H200", "sm_90", kH200Datasheet, 132, 1980, 64, 16, 2048, 65536, 60e6, kH200CopyGbs, kLatencyNs, kL2LatencyNs,
       kChunkBytes, kOverlap, kGraphLaunchUs, kEventLaunchUs, "measured on an H200, 2026-11-28 (docs/PERF.md)"},
      // NVIDIA A100 datasheet (80 GB SXM): 2,039 GB/s HBM2e, FP64 9.7 TFLOPS; Ampere whitepaper:
      // 108 SMs, 1410 MHz boost, 40 MB L2; cc 8.0: 2048 threads, 64K registers/SM.
      {"A100-80GB-SXM", "sm_80", 2039, 108, 1410, 32, 16, 2048, 65536, 40e6, copy_share(2039), kLatencyNs,
       kL2LatencyNs, kChunkBytes, kOverlap, kGraphLaunchUs, kEventLaunchUs, kUnmeasured},
      // NVIDIA L40S datasheet: 864 GB/s GDDR6, 142 SMs (RT cores), 2520 MHz boost, FP32 91.6
      // TFLOPS, 96 MB L2; Ada whitepaper: FP64 at 1/64 of FP32 (2/clk/SM); cc 8.9: 1536 threads/SM.
      {"L40S", "sm_89", 864, 142, 2520, 2, 2, 1536, 65536, 96e6, copy_share(864), kLatencyNs, kL2LatencyNs,
       kChunkBytes, kOverlap, kGraphLaunchUs, kEventLaunchUs, kUnmeasured},
      // Ada whitepaper (GeForce RTX 4090): 128 SMs, 2520 MHz boost, 1008 GB/s GDDR6X, 72 MB L2,
      // FP64 1/64 of FP32 (1.3 TFLOPS); cc 8.9: 1536 threads, 64K registers/SM.
      {"RTX-4090", "sm_89", 1008, 128, 2520, 2, 2, 1536, 65536, 72e6, copy_share(1008), kLatencyNs, kL2LatencyNs,
       kChunkBytes, kOverlap, kGraphLaunchUs, kEventLaunchUs, kUnmeasured},
  };
  return parts;
}

const GpuPart& find_gpu_part(const std::string& name) {
  std::string known;
  for (const GpuPart& p : gpu_parts()) {
    if (lower(p.name) == lower(name)) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw Error(Status::invalid_argument, fmt::format("unknown GPU part \"{}\": known {}", name, known));
}

const GpuPart* gpu_part_for_device(const std::string& device_name, int sm_count) {
  const std::string name = lower(device_name);
  for (const GpuPart& p : gpu_parts()) {
    // The model key: the part name up to its first '-' ("h100", "a100", "l40s"), or the
    // number after it for "RTX-4090".
    std::string key = lower(p.name.substr(0, p.name.find('-')));
    if (key == "rtx") key = lower(p.name.substr(p.name.find('-') + 1));
    if (p.sms == sm_count && name.find(key) != std::string::npos) return &p;
  }
  return nullptr;
}

MemoryAccess dense_access(int64_t bytes) {
  MemoryAccess a;
  a.bytes = a.sector_bytes = bytes;
  return a;
}

Roofline roofline(const KernelStats& s, const GpuPart& part, int64_t rows, const MemoryAccess& access,
                  LaunchTiming timing) {
  Roofline r;
  r.part = part.name;
  r.rows = rows;
  r.bytes = access.bytes;
  const int64_t threads = rows * s.items_per_row;
  r.warps = (threads + 31) / 32;
  ArchLimits lim = arch_limits(part.arch);
  lim.max_threads = part.max_threads_per_sm;
  lim.registers = part.registers_per_sm;
  r.occupancy = occupancy(lim, s.block_threads, s.registers, s.shared_bytes);

  const double clock_hz = part.boost_mhz * 1e6;
  r.memory_us = access.bytes / (part.bandwidth_gbs * 1e3);
  // Four warp schedulers per SM, one instruction each per clock.
  r.issue_us = s.counts.per_item * r.warps / (part.sms * 4.0 * clock_hz) * 1e6;
  // A warp-wide FP64 instruction occupies its unit for 32 / rate clocks of the SM.
  const double fp64_clocks = s.counts.fp64_arith_per_item * 32.0 / part.fp64_per_sm_clk +
                             s.counts.fp64_convert_per_item * 32.0 / part.fp64_cvt_per_sm_clk;
  r.fp64_us = fp64_clocks * r.warps / (part.sms * clock_hz) * 1e6;
  r.issue_fraction = r.memory_us > 0 ? r.issue_us / r.memory_us : 0;
  r.fp64_fraction = r.memory_us > 0 ? r.fp64_us / r.memory_us : 0;

  // DRAM traffic: the sectors touched, each separate run's extra cost, a sector read for each
  // partly written one, and the part of a re-read that L2 no longer holds: what the whole GPU
  // reads between an item's first read and its re-read (every resident item alike) against half
  // the L2 (the partition an SM's requests go to), the hit share their ratio when it is over.
  const double resident_capacity = static_cast<double>(r.occupancy.warps_per_sm) * 32.0 * part.sms;
  const double resident = std::min(resident_capacity, static_cast<double>(threads));
  const double reread_footprint = static_cast<double>(access.reread_distance) * resident;
  r.reread_hit = reread_footprint > 0 ? std::min(1.0, part.l2_bytes / 2 / reread_footprint) : 1.0;
  r.dram_bytes = access.sector_bytes + std::llround(access.chunks * part.chunk_bytes) + access.partial_sectors * 32 +
                 std::llround(access.reread_bytes * (1 - r.reread_hit));
  r.dram_us = r.dram_bytes / (part.copy_gbs * 1e3);

  // A thread: its index loads, then its trips, each a round trip of its loads, and its
  // instructions at one a clock. Little's law, once the launch fills the GPU: the bytes moved
  // per round trip are what the resident threads keep in flight, for the share of their time
  // they spend in trips rather than index loads.
  const double trips = std::max(1, s.serial_trips);
  // A first data load issued before the index loads' results are read overlaps one level's round trip.
  const double levels =
      std::max(0, access.index_levels - (s.counts.data_load_before_index_use && access.index_levels > 0 ? 1 : 0));
  const double own_instructions_us = s.counts.per_item / clock_hz * 1e6;
  r.lifetime_us = (levels + trips) * part.latency_ns * 1e-3 + own_instructions_us;
  r.lifetime_l2_us = (levels + trips) * part.l2_latency_ns * 1e-3 + own_instructions_us;
  const double per_sm = resident / part.sms;
  r.in_flight_bytes_per_sm = per_sm * s.counts.bytes_in_flight * trips / (trips + levels);
  r.needed_bytes_per_sm = part.copy_gbs * part.latency_ns / part.sms;  // GB/s * ns = bytes
  const bool fills_gpu = threads >= resident_capacity && r.in_flight_bytes_per_sm > 0;
  r.latency_us = fills_gpu ? r.dram_bytes * part.latency_ns / (part.sms * r.in_flight_bytes_per_sm) * 1e-3 : 0;
  r.littles_fraction = r.latency_us > 0 ? std::min(1.0, r.dram_us / r.latency_us) : 1.0;

  const double memory = std::max(r.dram_us, r.latency_us);
  const double longest = std::max({memory, r.issue_us, r.fp64_us});
  r.bound = longest == r.dram_us ? "dram" : longest == r.latency_us ? "latency" : longest == r.issue_us ? "issue" : "fp64";
  r.kernel_us = (access.inputs_in_l2 ? r.lifetime_l2_us : r.lifetime_us) + longest +
                part.overlap * std::min(memory, r.issue_us);
  r.launch_us = timing == LaunchTiming::graph ? part.graph_launch_us
                : timing == LaunchTiming::event ? part.event_launch_us
                                                : 0.0;
  r.estimate_us = r.launch_us + r.kernel_us;
  return r;
}

std::string format_report(const KernelStats& s, const std::vector<Roofline>& parts) {
  const InstrCounts& c = s.counts;
  auto widths = [](const WidthCounts& w) {
    std::string out;
    for (size_t i = 0; i < w.kBits.size(); ++i)
      if (w.count[i]) out += fmt::format("{}{}x{}b", out.empty() ? "" : " ", w.count[i], w.kBits[i]);
    return out.empty() ? std::string("-") : out;
  };
  std::string t;
  t += fmt::format("{} {} {} (instructions from {}: {})\n", s.spec_name, s.arch, s.config, s.source, s.disassembler);
  t += fmt::format("  registers {}  spill {} B  local (stack) {} B  shared {} B\n", s.registers, s.spill_bytes,
                   s.stack_bytes, s.shared_bytes);
  t += fmt::format("  occupancy {} blocks x {} threads = {} warps/SM ({:.0f}%, limited by {})\n", s.occupancy.blocks_per_sm,
                   s.block_threads, s.occupancy.warps_per_sm, 100 * s.occupancy.fraction, s.occupancy.limiter);
  t += fmt::format("  global loads  q/k/v {}  read-only {}  generic {}\n", widths(c.data_loads), widths(c.readonly_loads),
                   widths(c.generic_loads));
  t += fmt::format("  global stores q/k/v {}  generic {}  local {}  shared {}\n", widths(c.data_stores),
                   widths(c.generic_stores), c.local_accesses, c.shared_accesses);
  std::string loops = fmt::format("x{} heads loop", s.planned_loops.empty() ? s.heads_loop_trips : s.planned_loops[0].trips);
  for (size_t n = 1; n < s.planned_loops.size(); ++n)
    loops += fmt::format(", x{} {}", s.planned_loops[n].trips, s.planned_loops[n].name);
  t += fmt::format("  instructions {} static, {:.0f} per work item ({}), {:.1f} per 16-B q/k/v vector\n",
                   c.instructions, c.per_item, loops, s.instr_per_vector);
  t += fmt::format("  in flight per thread: {} 16-B loads, {} B of q/k/v  fp64 {} arith + {} convert ({:.0f} + {:.0f} per item)\n",
                   c.loads_in_flight, c.bytes_in_flight, c.fp64_arith, c.fp64_convert, c.fp64_arith_per_item, c.fp64_convert_per_item);
  if (parts.empty()) return t;
  t += fmt::format("  {:<14} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:<7} {:>9} {:>7} {:>8} {:>8}\n", "part", "rows",
                   "MB", "DRAM MB", "dram us", "lat us", "issue us", "issue%", "bound", "flight/SM", "life us",
                   "kern us", "est us");
  for (const Roofline& r : parts)
    t += fmt::format("  {:<14} {:>8} {:>8.1f} {:>8.1f} {:>8.2f} {:>8.2f} {:>8.2f} {:>5.0f}% {:<7} {:>8.1f}K {:>7.2f} {:>8.2f} "
                     "{:>8.2f}\n",
                     r.part, r.rows, r.bytes / 1e6, r.dram_bytes / 1e6, r.dram_us, r.latency_us, r.issue_us,
                     100 * r.issue_fraction, r.bound, r.in_flight_bytes_per_sm / 1024, r.lifetime_us, r.kernel_us,
                     r.estimate_us);
  return t;
}

}  // namespace ropejit
