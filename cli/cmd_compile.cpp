// `ropejit compile spec.json... --arch sm_80,sm_90`: NVRTC compile and resource usage.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "command_registry.h"
#include "ropejit/compile.h"

namespace {

void add_compile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("compile", "Compile specs with NVRTC and report registers, spills, time");
  auto specs = std::make_shared<std::vector<std::string>>();
  auto archs = std::make_shared<std::string>("sm_80,sm_90");
  auto config = std::make_shared<std::string>();
  auto out_dir = std::make_shared<std::string>();
  auto ptx = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  cmd->add_option("specs", *specs, "spec JSON files")->required();
  cmd->add_option("--arch", *archs, "comma-separated targets: sm_XX (CUBIN) or compute_XX (PTX)");
  cmd->add_option("--config", *config, "launch config: inline JSON or a file (default: heuristic)");
  cmd->add_option("--out-dir", *out_dir, "write each image as <spec>.<arch>.cubin|ptx here");
  cmd->add_flag("--ptx", *ptx, "emit PTX instead of CUBIN");
  cmd->add_flag("--json", *json, "machine-readable output");
  cmd->callback([=] {
    // Before compiling: a wrong folder should fail in a moment, not after every compile.
    if (!out_dir->empty()) ropejit::cli::require_writable_folder(*out_dir, "--out-dir");
    nlohmann::json rows = nlohmann::json::array();
    if (!*json)
      fmt::print("{:<28} {:<8} {:<26} {:>5} {:>6} {:>6} {:>6} {:>9} {:>8}\n", "spec", "arch", "config", "regs",
                 "spill", "stack", "smem", "bytes", "ms");
    for (const auto& path : *specs) {
      const ropejit::Spec spec = ropejit::load_spec_file(path);
      const ropejit::Config c = ropejit::cli::config_option(spec, *config);
      const auto source = ropejit::generate_source(ropejit::make_plan(spec, c));
      for (const auto& arch : ropejit::cli::split_list(*archs)) {
        const ropejit::Binary b = ropejit::compile_nvrtc(source, arch, *ptx);
        if (!out_dir->empty())
          ropejit::cli::write_file(fmt::format("{}/{}.{}.{}", *out_dir, spec.name, b.arch, b.is_ptx ? "ptx" : "cubin"),
                                   b.image);
        if (*json) {
          rows.push_back({{"spec", spec.name}, {"file", path}, {"arch", b.arch}, {"ptx", b.is_ptx},
                          {"config", ropejit::config_name(c)}, {"registers", b.registers},
                          {"spill_bytes", b.spill_bytes}, {"stack_bytes", b.stack_bytes},
                          {"shared_bytes", b.shared_bytes}, {"image_bytes", b.image.size()},
                          {"compile_ms", b.compile_ms}, {"source_hash", b.source_hash.hex()}});
        } else {
          fmt::print("{:<28} {:<8} {:<26} {:>5} {:>6} {:>6} {:>6} {:>9} {:>8.1f}\n", spec.name, b.arch,
                     ropejit::config_name(c), b.registers, b.spill_bytes, b.stack_bytes, b.shared_bytes,
                     b.image.size(), b.compile_ms);
        }
      }
    }
    if (*json) std::cout << rows.dump(2) << "\n";
  });
}

}  // namespace

ROPEJIT_COMMAND(40, add_compile_command);
