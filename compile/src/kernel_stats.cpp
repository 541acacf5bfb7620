// The static kernel report: ptxas' resource usage, theoretical occupancy from the per-arch
// limits, and the instruction mix of the SASS (or the PTX where no disassembler is found).
#include "ropejit/kernel_stats.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "ropejit/compile.h"
#include "ropejit/error.h"
#include "ropejit/source.h"

namespace ropejit {

namespace {

// Per-SM limits by compute capability: CUDA C++ Programming Guide, "Features and Technical
// Specifications" (threads, warps, blocks, 64K registers, shared memory per SM; 1 KB of shared
// memory reserved per block since 8.0).
const std::map<int, ArchLimits>& limits_table() {
  static const std::map<int, ArchLimits> t = {
      //         threads warps blocks registers unit shared       reserved
      {80, ArchLimits{2048, 64, 32, 65536, 256, 164 * 1024, 1024}},
      {86, ArchLimits{1536, 48, 16, 65536, 256, 100 * 1024, 1024}},
      {87, ArchLimits{2048, 64, 16, 65536, 256, 164 * 1024, 1024}},
      {89, ArchLimits{1536, 48, 24, 65536, 256, 100 * 1024, 1024}},
      {90, ArchLimits{2048, 64, 32, 65536, 256, 228 * 1024, 1024}},
      {100, ArchLimits{2048, 64, 32, 65536, 256, 228 * 1024, 1024}},
      {120, ArchLimits{1536, 48, 32, 65536, 256, 100 * 1024, 1024}},
  };
  return t;
}


// An all-heads row on chip (qk_norm_all.cuh rope_all_heads_on_chip_kernel): a block pass's
// (row, pair) angle units go one a thread, threads 0, 1, ... first, so a trip of that loop is
// taken only by the warps holding a unit; its weight per item is those warps over the block's.
double on_chip_angle_weight(const WorkShape& w, int block_threads) {
  const int units = block_threads / (w.head_groups * w.lanes) * w.rot_lanes * w.pairs_per_lane;
  const int block_warps = (block_threads + 31) / 32;
  int warps = 0;
  for (int first = 0; first < units; first += block_threads)
    warps += (std::min(block_threads, units - first) + 31) / 32;
  return static_cast<double>(warps) / block_warps;
}

}  // namespace

ArchLimits arch_limits(const std::string& arch) {
  const int n = arch_number(arch);
  const auto& t = limits_table();
  const auto it = t.find(n);
  if (it == t.end()) {
    std::string known;
    for (const auto& [k, v] : t) known += fmt::format("{}sm_{}", known.empty() ? "" : ", ", k);
    throw Error(Status::invalid_argument, fmt::format("no occupancy limits for {}: known {}", arch, known));
  }
  return it->second;
}

Occupancy occupancy(const ArchLimits& lim, int block_threads, int registers, int shared) {
  const int warps_per_block = (block_threads + 31) / 32;
  Occupancy o;
  auto limit = [&](int blocks, const char* why) {
    if (o.limiter.empty() || blocks < o.blocks_per_sm) {
      o.blocks_per_sm = blocks;
      o.limiter = why;
    }
  };
  limit(std::min(lim.max_threads / block_threads, lim.max_warps / warps_per_block), "threads");
  limit(lim.max_blocks, "blocks");
  if (registers > 0) {
    // Registers are allocated per warp in units of reg_alloc_unit.
    const int per_warp = (registers * 32 + lim.reg_alloc_unit - 1) / lim.reg_alloc_unit * lim.reg_alloc_unit;
    limit(lim.registers / per_warp / warps_per_block, "registers");
  }
  limit(lim.shared_bytes / (shared + lim.shared_reserved), "shared");
  o.warps_per_sm = o.blocks_per_sm * warps_per_block;
  o.fraction = static_cast<double>(o.warps_per_sm) / lim.max_warps;
  return o;
}

KernelStats kernel_stats(const Spec& spec, const Config& config, const Source& source, const Binary& binary,
                         StatsSource want) {
  KernelStats s;
  s.spec_name = spec.name;
  s.arch = binary.arch;
  s.config = config_name(config);
  s.registers = binary.registers;
  s.spill_bytes = binary.spill_bytes;
  s.stack_bytes = binary.stack_bytes;
  s.shared_bytes = binary.shared_bytes;
  s.block_threads = config.block_threads;
  s.heads_per_thread = config.heads_per_thread;
  s.occupancy = occupancy(arch_limits(binary.arch), config.block_threads, binary.registers, binary.shared_bytes);

  // Trips per item of the loops inside the grid-stride loop: the heads (with role slots, the q
  // heads and, with a QK-norm, the k head: the rest is straight code after that loop); where one
  // thread owns whole heads (a QK-norm head wider than a warp) also every lane of a head (the norm
  // pass, by vectors, runs as often) - one weight for all inner loops. An all-heads norm
  // (qk_norm_all.cuh): a thread's heads are every head_groups-th of the row, in each of its lanes.
  const WorkShape shape = work_shape(spec, config);
  const int head_lanes = shape.rot_lanes + shape.tail_lanes;
  const bool all_heads = all_heads_segment(spec);
  if (all_heads) s.heads_per_thread = (shape.heads + shape.head_groups - 1) / shape.head_groups;
  s.heads_loop_trips = shape.role_slots ? shape.loop_slots : s.heads_per_thread;
  // An all-heads row on chip (qk_norm_all.cuh): its heads unrolled, all loads at once: one trip.
  const int heads_trips = shape.row_on_chip ? 1
                          : all_heads ? s.heads_per_thread * ((head_lanes + shape.lanes - 1) / shape.lanes)
                                      : s.heads_loop_trips * (shape.whole_heads ? head_lanes : 1);
  // Loads ahead (rope.cuh heads_trips): two heads a trip, the second's loads in flight with the
  // first's, so a thread's round trips in series are half its heads.
  const int trips = config.ahead ? (heads_trips + 1) / 2 : heads_trips;
  s.planned_loops = {{"heads loop", trips}};
  // The all-heads kernel walks its heads once per pass (qk_norm_all.cuh): the norm's sums, the
  // per-token q amax (q heads only), then the rotation; each pass's loads wait for themselves.
  s.serial_trips = trips;
  if (all_heads && !shape.row_on_chip) {
    const int q_trips = (spec.num_q_heads + shape.head_groups - 1) / shape.head_groups;
    if (all_heads_norm(spec)) s.serial_trips += trips;
    if (q_scale_per_token(spec)) s.serial_trips += q_trips;
  }
  // With the k/v store loop after the heads loop (rope.cuh rope_heads), that loop weighs its own
  // trips, and in it (cooperative heads: store_lane_vectors) the cache head's vector loop. Only
  // op rope's shapes have role slots (q and kv heads both): the loop needs no test of the op.
  if (!all_heads && kv_store_loop(shape, quantized_cache(spec), spec.io.copy_v)) {
    s.planned_loops.push_back({"k/v store loop", kKvStoreLoopTrips});
    s.serial_trips += kKvStoreLoopTrips;
    if (cooperative_heads(spec) && cache_vector_loop(max_lane_vectors(shape), nvfp4_cache(spec))) {
      s.planned_loops.push_back({"cache vector loop", kKvStoreLoopTrips * max_lane_vectors(shape)});
    }
  }
  std::vector<int> loop_trips;
  for (const PlannedLoop& loop : s.planned_loops) loop_trips.push_back(loop.trips);
  const SharedAngleShape shared = shared_angles(make_plan(spec, config));
  const double angle_weight = shared.enabled     ? shared.units_per_thread
                              : shape.row_on_chip ? on_chip_angle_weight(shape, config.block_threads)
                                                  : 1.0;
  std::optional<std::string> tool;
  if (!binary.is_ptx && want != StatsSource::ptx) tool = find_disassembler();
  if (binary.is_ptx) {
    s.source = "ptx";
    s.disassembler = "the binary is PTX";
    s.counts = count_ptx(binary.image, loop_trips, angle_weight);
  } else if (tool) {
    s.source = "sass";
    s.disassembler = *tool;
    s.counts = count_sass(disassemble(*tool, binary.image), loop_trips, angle_weight);
  } else if (want == StatsSource::sass) {
    throw Error(Status::invalid_argument,
                "no SASS disassembler: no nvdisasm or cuobjdump in ROPEJIT_NVDISASM, PATH, $CUDA_HOME/bin or "
                "the configured prefix (scripts/setup.sh installs them)");
  } else {
    s.source = "ptx";
    s.disassembler = want == StatsSource::ptx ? "PTX asked for"
                                              : "no nvdisasm or cuobjdump found (ROPEJIT_NVDISASM, PATH, "
                                                "$CUDA_HOME/bin, configured prefix)";
    s.counts = count_ptx(compile_nvrtc(source, binary.arch, /*ptx=*/true).image, loop_trips, angle_weight);
  }

  // Per token row: threads (work items), and the 16-byte vectors of q/k/v read (each is also written).
  const WorkShape w = work_shape(spec, config);
  const bool tail = rotary_tail_moves(spec);
  const int64_t elements = int64_t(w.rot_heads) * (tail ? spec.head_dim : spec.rotary_dim) +
                           int64_t(w.heads - w.rot_heads) * spec.head_dim;
  s.items_per_row = w.head_groups * w.lanes;
  s.qkv_vectors_per_row = static_cast<double>(elements * dtype_size(spec.dtype)) / 16.0;
  s.instr_per_vector = s.qkv_vectors_per_row > 0 ? s.counts.per_item * s.items_per_row / s.qkv_vectors_per_row : 0;
  return s;
}

}  // namespace ropejit
