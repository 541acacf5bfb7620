// `ropejit compile spec.json... --arch sm_80,sm_90`: NVRTC compile and resource usage; with
// --stats the static kernel report and its roofline estimate (docs/static-report.md).
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "command_registry.h"
#include "ropejit/compile.h"
#include "ropejit/roofline.h"
#include "ropejit/runtime.h"

namespace {

nlohmann::json widths_json(const ropejit::WidthCounts& w) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < w.kBits.size(); ++i) j[std::to_string(w.kBits[i])] = w.count[i];
  return j;
}

nlohmann::json stats_json(const ropejit::KernelStats& s, const std::vector<ropejit::Roofline>& parts,
                          const ropejit::MemoryAccess* access) {
  const ropejit::InstrCounts& c = s.counts;
  nlohmann::json j = {
      {"source", s.source}, {"disassembler", s.disassembler}, {"registers", s.registers},
      {"spill_bytes", s.spill_bytes}, {"stack_bytes", s.stack_bytes}, {"shared_bytes", s.shared_bytes},
      {"block_threads", s.block_threads}, {"heads_per_thread", s.heads_per_thread},
      {"serial_trips", s.serial_trips},
      {"occupancy", {{"blocks_per_sm", s.occupancy.blocks_per_sm}, {"warps_per_sm", s.occupancy.warps_per_sm},
                     {"fraction", s.occupancy.fraction}, {"limiter", s.occupancy.limiter}}},
      {"instructions", c.instructions}, {"instructions_per_item", c.per_item},
      {"items_per_row", s.items_per_row}, {"qkv_vectors_per_row", s.qkv_vectors_per_row},
      {"instructions_per_vector", s.instr_per_vector}, {"loads_in_flight", c.loads_in_flight},
      {"bytes_in_flight", c.bytes_in_flight}, {"data_load_before_index_use", c.data_load_before_index_use},
      {"first_data_load", c.first_data_load}, {"first_barrier", c.first_barrier},
      {"global_loads", {{"qkv", widths_json(c.data_loads)}, {"readonly", widths_json(c.readonly_loads)},
                        {"generic", widths_json(c.generic_loads)}}},
      {"global_stores", {{"qkv", widths_json(c.data_stores)}, {"generic", widths_json(c.generic_stores)}}},
      {"local_accesses", c.local_accesses}, {"shared_accesses", c.shared_accesses},
      {"fp64", {{"arith", c.fp64_arith}, {"convert", c.fp64_convert}, {"arith_per_item", c.fp64_arith_per_item},
                {"convert_per_item", c.fp64_convert_per_item}}}};
  nlohmann::json roof = nlohmann::json::array();
  for (const auto& r : parts)
    roof.push_back({{"part", r.part}, {"rows", r.rows}, {"bytes", r.bytes}, {"warps", r.warps},
                    {"warps_per_sm", r.occupancy.warps_per_sm}, {"memory_us", r.memory_us},
                    {"issue_us", r.issue_us}, {"fp64_us", r.fp64_us}, {"issue_fraction", r.issue_fraction},
                    {"fp64_fraction", r.fp64_fraction}, {"bound", r.bound},
                    {"in_flight_bytes_per_sm", r.in_flight_bytes_per_sm},
                    {"needed_bytes_per_sm", r.needed_bytes_per_sm}, {"littles_fraction", r.littles_fraction},
                    {"dram_bytes", r.dram_bytes}, {"reread_hit", r.reread_hit}, {"dram_us", r.dram_us},
                    {"latency_us", r.latency_us}, {"lifetime_us", r.lifetime_us}, {"lifetime_l2_us", r.lifetime_l2_us},
                    {"launch_us", r.launch_us}, {"kernel_us", r.kernel_us}, {"estimate_us", r.estimate_us}});
  j["roofline"] = roof;
  if (access) {
    j["access"] = {{"bytes", access->bytes}, {"sector_bytes", access->sector_bytes}, {"chunks", access->chunks},
                   {"partial_sectors", access->partial_sectors}, {"reread_bytes", access->reread_bytes},
                   {"reread_distance", access->reread_distance}, {"index_levels", access->index_levels}};
  }
  // The loops the per-item figures weigh (the plan's trips per item) and how many the listing had:
  // a different number means every loop took the first's trips.
  nlohmann::json loops = nlohmann::json::array();
  for (const ropejit::PlannedLoop& loop : s.planned_loops) loops.push_back({{"name", loop.name}, {"trips", loop.trips}});
  j["loops"] = loops;
  j["loops_found"] = c.inner_loops;
  return j;
}

void add_compile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("compile", "Compile specs with NVRTC and report registers, spills, time");
  auto specs = std::make_shared<std::vector<std::string>>();
  auto archs = std::make_shared<std::string>("sm_80,sm_90");
  auto config = std::make_shared<std::string>();
  auto out_dir = std::make_shared<std::string>();
  auto ptx = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  auto stats = std::make_shared<bool>(false);
  auto phases = std::make_shared<bool>(false);
  auto parts = std::make_shared<std::string>();
  auto tokens = std::make_shared<int64_t>(16384);
  auto batch = std::make_shared<int>(1);
  cmd->add_option("specs", *specs, "spec JSON files")->required();
  cmd->add_option("--arch", *archs, "comma-separated targets: sm_XX (CUBIN) or compute_XX (PTX)");
  cmd->add_option("--config", *config, "launch config: inline JSON or a file (default: heuristic)");
  cmd->add_option("--out-dir", *out_dir, "write each image as <spec>.<arch>.cubin|ptx here");
  cmd->add_flag("--ptx", *ptx, "emit PTX instead of CUBIN");
  cmd->add_flag("--json", *json, "machine-readable output");
  cmd->add_flag("--phases", *phases, "NVRTC's time per phase: front end, NVVM, ptxas (ms)");
  cmd->add_flag("--stats", *stats, "static kernel report (SASS, else PTX) and roofline estimate");
  cmd->add_option("--parts", *parts, "with --stats: comma-separated GPU parts (default: every known part)");
  cmd->add_option("--tokens", *tokens, "with --stats: tokens per launch for the roofline")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--batch", *batch, "with --stats: varlen sequences of the launch (default 1; ropejit_bench_gpu: T / 1024)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->callback([=] {
    // Before compiling: a wrong folder should fail in a moment, not after every compile.
    if (!out_dir->empty()) ropejit::cli::require_writable_folder(*out_dir, "--out-dir");
    nlohmann::json rows = nlohmann::json::array();
    std::vector<const ropejit::GpuPart*> roof_parts;
    if (*stats) {
      if (parts->empty())
        for (const auto& p : ropejit::gpu_parts()) roof_parts.push_back(&p);
      for (const auto& name : ropejit::cli::split_list(*parts)) roof_parts.push_back(&ropejit::find_gpu_part(name));
    }
    if (!*json && !*stats)
      fmt::print("{:<28} {:<8} {:<26} {:>5} {:>6} {:>6} {:>6} {:>9} {:>8}{}\n", "spec", "arch", "config", "regs",
                 "spill", "stack", "smem", "bytes", "ms", *phases ? "     fe   nvvm  ptxas" : "");
    for (const auto& path : *specs) {
      const ropejit::Spec spec = ropejit::load_spec_file(path);
      const ropejit::Config c = ropejit::cli::config_option(spec, *config);
      const auto source = ropejit::generate_source(ropejit::make_plan(spec, c));
      for (const auto& arch : ropejit::cli::split_list(*archs)) {
        const ropejit::Binary b =
            *phases ? ropejit::compile_nvrtc_timed(source, arch, *ptx) : ropejit::compile_nvrtc(source, arch, *ptx);
        if (!out_dir->empty())
          ropejit::cli::write_file(fmt::format("{}/{}.{}.{}", *out_dir, spec.name, b.arch, b.is_ptx ? "ptx" : "cubin"),
                                   b.image);
        std::optional<ropejit::KernelStats> st;
        std::optional<ropejit::MemoryAccess> access;
        std::vector<ropejit::Roofline> roof;
        if (*stats) {
          st = ropejit::kernel_stats(spec, c, source, b);
          // `batch` equal sequences of `tokens` rows (no padding); launched in a CUDA graph.
          ropejit::LaunchShape shape;
          shape.tokens = *tokens;
          shape.batch = *batch;
          shape.max_seq_len = (*tokens + *batch - 1) / *batch;
          access = ropejit::memory_access(spec, c, shape);
          for (const auto* p : roof_parts)
            roof.push_back(ropejit::roofline(*st, *p, *tokens, *access, ropejit::LaunchTiming::graph));
        }
        if (*json) {
          rows.push_back({{"spec", spec.name}, {"file", path}, {"arch", b.arch}, {"ptx", b.is_ptx},
                          {"config", ropejit::config_name(c)}, {"registers", b.registers},
                          {"spill_bytes", b.spill_bytes}, {"stack_bytes", b.stack_bytes},
                          {"shared_bytes", b.shared_bytes}, {"image_bytes", b.image.size()},
                          {"compile_ms", b.compile_ms}, {"source_hash", b.source_hash.hex()}});
          if (*phases)
            rows.back()["phases_ms"] = {{"frontend", b.phases.frontend_ms}, {"nvvm", b.phases.nvvm_ms},
                                        {"ptxas", b.phases.ptxas_ms}};
          if (st) rows.back()["stats"] = stats_json(*st, roof, access ? &*access : nullptr);
        } else if (st) {
          fmt::print("{}\n", ropejit::format_report(*st, roof));
        } else {
          const std::string phase_cells =
              *phases ? fmt::format(" {:>6} {:>6} {:>6}", b.phases.frontend_ms, b.phases.nvvm_ms, b.phases.ptxas_ms) : "";
          fmt::print("{:<28} {:<8} {:<26} {:>5} {:>6} {:>6} {:>6} {:>9} {:>8.1f}{}\n", spec.name, b.arch,
                     ropejit::config_name(c), b.registers, b.spill_bytes, b.stack_bytes, b.shared_bytes,
                     b.image.size(), b.compile_ms, phase_cells);
        }
      }
    }
    if (*json) std::cout << rows.dump(2) << "\n";
  });
}

}  // namespace

ROPEJIT_COMMAND(40, add_compile_command);
