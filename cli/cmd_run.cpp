// `ropejit run spec.json`: the main job. Validate, generate, compile or load from cache, run on
// random data, verify against the float64 reference, report times (and bandwidth on cuda).
#include <algorithm>
#include <chrono>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "command_registry.h"
#include "ropejit/runtime.h"
#include "ropejit/check/harness.h"

namespace {

struct RunOptions {
  std::string spec_path;
  int64_t tokens = 4096;
  std::string backend = "auto";
  std::string config;
  std::string arch;
  std::string cache_dir;
  int batch = 0;
  int64_t max_position = 0;
  int repeats = 50;
  int64_t check_tokens = -1;  // cli::check_tokens_option
  uint64_t seed = 0;
  bool json = false;
};

int run(const RunOptions& o) {
  const ropejit::Spec spec = ropejit::load_spec_file(o.spec_path);
  ropejit::RuntimeOptions ro;
  ro.backend = ropejit::cli::enum_option<ropejit::BackendKind>("--backend", o.backend).value_or(ro.backend);
  ro.arch = o.arch;
  ro.cache_dir = o.cache_dir;
  ropejit::Runtime runtime(ro);

  const auto start = std::chrono::steady_clock::now();
  const ropejit::Kernel kernel = ropejit::cli::kernel_option(runtime, spec, o.config);
  const double get_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  ropejit::check::CaseOptions co;
  co.tokens = o.tokens;
  co.batch = o.batch;
  co.max_position = o.max_position ? o.max_position : spec.max_position_embeddings;
  co.seed = o.seed;
  co.timing_repeats = runtime.backend() == "cuda" ? o.repeats : std::min(o.repeats, 5);
  co.check_tokens = ropejit::cli::check_tokens_option(spec, o.check_tokens);
  const auto report = ropejit::check::run_case(runtime, kernel, co);

  const ropejit::Config& config = kernel.config_for(o.tokens);
  const ropejit::Binary& binary = kernel.binary_for(o.tokens);
  const double gbps = report.time_us > 0 ? report.bytes_moved / (report.time_us * 1e3) : 0.0;
  double max_abs = 0.0;
  for (const auto& [name, check] : report.checks) max_abs = std::max(max_abs, check.max_abs_error);
  if (o.json) {
    nlohmann::json j = {{"spec", spec.name}, {"backend", runtime.backend()}, {"arch", runtime.arch()},
                        {"config", ropejit::config_name(config)}, {"tokens", o.tokens},
                        {"get_ms", get_ms}, {"from_cache", kernel.from_cache()},
                        {"registers", binary.registers}, {"max_abs_error", max_abs}, {"ok", report.ok()},
                        {"seed", report.seed}, {"checked_tokens", report.checked_tokens},
                        {"time_us", report.time_us}, {"bytes", report.bytes_moved},
                        {"gb_per_s", gbps}};
    std::cout << j.dump(2) << "\n";
  } else {
    fmt::print("spec       {} ({})\n", spec.name, ropejit::spec_hash(spec).hex());
    fmt::print("backend    {} ({})\n", runtime.backend(), runtime.arch());
    fmt::print("config     {}\n", ropejit::config_name(config));
    fmt::print("get        {:.1f} ms ({})\n", get_ms, kernel.from_cache() ? "cache hit" : "compiled");
    if (binary.registers >= 0) fmt::print("registers  {} (spill {} bytes)\n", binary.registers, binary.spill_bytes);
    fmt::print("tokens     {}  (seed {})\n", o.tokens, report.seed);
    if (report.checked_tokens < o.tokens)
      fmt::print("checked    {} tokens of fresh data on the same config; the {}-token launch is timed, not compared "
                 "(--check-tokens 0: every token)\n", report.checked_tokens, o.tokens);
    for (const auto& [name, check] : report.checks) fmt::print("check {:<4} {}\n", name, check.summary());
    if (report.time_us > 0)
      fmt::print("time       {:.2f} us  {:.2f} GB/s ({} bytes){}\n", report.time_us, gbps, report.bytes_moved,
                 runtime.backend() == "host" ? "  [host CPU wall clock, not a GPU number]" : "");
    fmt::print("result     {}\n", !report.ok()                        ? "FAIL"
                                   : report.checked_tokens < o.tokens ? "PASS (the checked tokens match the float64 reference)"
                                                                      : "PASS (matches the float64 reference)");
    if (!report.ok()) fmt::print("{}", report.summary());
  }
  return report.ok() ? 0 : 2;
}

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Compile a spec, run it on random data and verify it against the float64 reference");
  auto o = std::make_shared<RunOptions>();
  cmd->add_option("spec", o->spec_path, "spec JSON file")->required();
  cmd->add_option("--tokens", o->tokens, "number of tokens T")->check(CLI::Range(int64_t(1), int64_t(1) << 26));
  cmd->add_option("--backend", o->backend, "auto | cuda | host");
  cmd->add_option("--config", o->config, "launch config: inline JSON or a file (default: tuned or heuristic)");
  cmd->add_option("--arch", o->arch, "compile target override (cuda), e.g. sm_90");
  cmd->add_option("--cache-dir", o->cache_dir, "kernel cache folder");
  cmd->add_option("--batch", o->batch, "sequences for varlen specs (default: random)");
  cmd->add_option("--max-position", o->max_position, "positions drawn below this (default: max_position_embeddings)");
  cmd->add_option("--repeats", o->repeats, "timed launches (cuda; at most 5 on host)");
  cmd->add_option("--seed", o->seed, "random seed (default: fresh)");
  ropejit::cli::add_check_tokens_option(cmd, &o->check_tokens);
  cmd->add_flag("--json", o->json, "machine-readable output");
  cmd->callback([o] {
    const int rc = run(*o);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace

ROPEJIT_COMMAND(50, add_run_command);
