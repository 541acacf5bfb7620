// Roofline estimate from the static report and the table of GPU parts; the text report.
#include "ropejit/roofline.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "ropejit/error.h"

namespace ropejit {

namespace {

// Loaded DRAM latency for Little's law on every part: fitted to the kernels an H200 ran
// latency-limited (16-24 KB in flight per SM: 675-963 ns, docs/PERF.md 2026-11-28); was 600.
constexpr double kLatencyNs = 800;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const std::vector<GpuPart>& gpu_parts() {
  // name, arch, GB/s, SMs, boost MHz, FP64 FMA/clk/SM, 64-bit conversions/clk/SM,
  // max threads/SM, registers/SM, latency ns. FP64 per clock = FP64 TFLOPS / (2 * SMs * clock).
  static const std::vector<GpuPart> parts = {
      // NVIDIA H100 datasheet (SXM5 80 GB): 3.35 TB/s HBM3, FP64 34 TFLOPS; Hopper whitepaper:
      // 132 SMs, 1.98 GHz boost; CUDA Programming Guide cc 9.0: 2048 threads, 64K registers/SM.
      {"H100-SXM", "sm_90", 3350, 132, 1980, 64, 16, 2048, 65536, kLatencyNs},
      // NVIDIA H200 datasheet (SXM 141 GB): 4.8 TB/s HBM3e, FP64 34 TFLOPS; the H100 SXM die
      // and clocks (132 SMs, 1.98 GHz).
      {"H200", "sm_90", 4800, 132, 1980, 64, 16, 2048, 65536, kLatencyNs},
      // NVIDIA A100 datasheet (80 GB SXM): 2,039 GB/s HBM2e, FP64 9.7 TFLOPS; Ampere whitepaper:
      // 108 SMs, 1410 MHz boost; cc 8.0: 2048 threads, 64K registers/SM.
      {"A100-80GB-SXM", "sm_80", 2039, 108, 1410, 32, 16, 2048, 65536, kLatencyNs},
      // NVIDIA L40S datasheet: 864 GB/s GDDR6, 142 SMs (RT cores), 2520 MHz boost, FP32 91.6
      // TFLOPS; Ada whitepaper: FP64 at 1/64 of FP32 (2/clk/SM); cc 8.9: 1536 threads/SM.
      {"L40S", "sm_89", 864, 142, 2520, 2, 2, 1536, 65536, kLatencyNs},
      // Ada whitepaper (GeForce RTX 4090): 128 SMs, 2520 MHz boost, 1008 GB/s GDDR6X, FP64 1/64
      // of FP32 (1.3 TFLOPS); cc 8.9: 1536 threads, 64K registers/SM.
      {"RTX-4090", "sm_89", 1008, 128, 2520, 2, 2, 1536, 65536, kLatencyNs},
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

Roofline roofline(const KernelStats& s, const GpuPart& part, int64_t rows, int64_t bytes) {
  Roofline r;
  r.part = part.name;
  r.rows = rows;
  r.bytes = bytes;
  const int64_t threads = rows * s.items_per_row;
  r.warps = (threads + 31) / 32;
  ArchLimits lim = arch_limits(part.arch);
  lim.max_threads = part.max_threads_per_sm;
  lim.registers = part.registers_per_sm;
  r.occupancy = occupancy(lim, s.block_threads, s.registers, s.shared_bytes);

  const double clock_hz = part.boost_mhz * 1e6;
  r.memory_us = bytes / (part.bandwidth_gbs * 1e3);
  // Four warp schedulers per SM, one instruction each per clock.
  r.issue_us = s.counts.per_item * r.warps / (part.sms * 4.0 * clock_hz) * 1e6;
  // A warp-wide FP64 instruction occupies its unit for 32 / rate clocks of the SM.
  const double fp64_clocks = s.counts.fp64_arith_per_item * 32.0 / part.fp64_per_sm_clk +
                             s.counts.fp64_convert_per_item * 32.0 / part.fp64_cvt_per_sm_clk;
  r.fp64_us = fp64_clocks * r.warps / (part.sms * clock_hz) * 1e6;
  r.issue_fraction = r.memory_us > 0 ? r.issue_us / r.memory_us : 0;
  r.fp64_fraction = r.memory_us > 0 ? r.fp64_us / r.memory_us : 0;
  r.bound = r.memory_us >= std::max(r.issue_us, r.fp64_us) ? "memory" : (r.issue_us >= r.fp64_us ? "issue" : "fp64");

  // Little's law: resident threads (no more than the launch has per SM) * q/k/v bytes in flight.
  const double resident = std::min<double>(r.occupancy.warps_per_sm * 32.0, static_cast<double>(threads) / part.sms);
  r.in_flight_bytes_per_sm = resident * s.counts.bytes_in_flight;
  r.needed_bytes_per_sm = part.bandwidth_gbs * part.latency_ns / part.sms;  // GB/s * ns = bytes
  r.littles_fraction = r.needed_bytes_per_sm > 0 ? std::min(1.0, r.in_flight_bytes_per_sm / r.needed_bytes_per_sm) : 0;
  const double latency_bound_us = r.littles_fraction > 0 ? r.memory_us / r.littles_fraction : INFINITY;
  r.estimate_us = std::max({latency_bound_us, r.issue_us, r.fp64_us});
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
  std::string loops = fmt::format("x{} heads loop", s.heads_loop_trips);
  for (size_t n = 1; n < s.planned_loops.size(); ++n)
    loops += fmt::format(", x{} {}", s.planned_loops[n].trips, s.planned_loops[n].name);
  t += fmt::format("  instructions {} static, {:.0f} per work item ({}), {:.1f} per 16-B q/k/v vector\n",
                   c.instructions, c.per_item, loops, s.instr_per_vector);
  t += fmt::format("  in flight per thread: {} 16-B loads, {} B of q/k/v  fp64 {} arith + {} convert ({:.0f} + {:.0f} per item)\n",
                   c.loads_in_flight, c.bytes_in_flight, c.fp64_arith, c.fp64_convert, c.fp64_arith_per_item, c.fp64_convert_per_item);
  if (parts.empty()) return t;
  t += fmt::format("  {:<14} {:>8} {:>9} {:>9} {:>9} {:>7} {:>7} {:<7} {:>6} {:>9} {:>9} {:>6} {:>9}\n", "part", "rows",
                   "MB", "mem us", "issue us", "issue%", "fp64%", "bound", "warps", "flight/SM", "need/SM", "LL%",
                   "est us");
  for (const Roofline& r : parts)
    t += fmt::format("  {:<14} {:>8} {:>9.1f} {:>9.2f} {:>9.2f} {:>6.0f}% {:>6.0f}% {:<7} {:>6} {:>8.1f}K {:>8.1f}K {:>5.0f}% {:>9.2f}\n",
                     r.part, r.rows, r.bytes / 1e6, r.memory_us, r.issue_us, 100 * r.issue_fraction,
                     100 * r.fp64_fraction, r.bound, r.occupancy.warps_per_sm, r.in_flight_bytes_per_sm / 1024,
                     r.needed_bytes_per_sm / 1024, 100 * r.littles_fraction, r.estimate_us);
  return t;
}

}  // namespace ropejit
