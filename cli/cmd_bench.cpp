// `ropejit bench spec.json... --tokens 1,64,4096`: time verified launches per token count.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "command_registry.h"
#include "ropejit/runtime.h"
#include "ropejit/check/harness.h"

namespace {

struct BenchOptions {
  std::vector<std::string> specs;
  std::string tokens = "1,64,512,4096,16384";
  std::string backend = "auto";
  std::string config;
  int repeats = 100;
  int64_t check_tokens = -1;  // cli::check_tokens_option
  bool json = false;
};

void bench(const BenchOptions& o) {
  ropejit::RuntimeOptions ro;
  ro.backend = ropejit::cli::enum_option<ropejit::BackendKind>("--backend", o.backend).value_or(ro.backend);
  ropejit::Runtime runtime(ro);
  const bool host = runtime.backend() == "host";
  nlohmann::json rows = nlohmann::json::array();
  if (!o.json) {
    fmt::print("backend {} ({}){}\n", runtime.backend(), runtime.arch(),
               host ? ": CPU wall-clock times of the host backend, not GPU numbers" : "");
    fmt::print("{:<24} {:>7} {:<28} {:>11} {:>9} {:>12}  {}\n", "spec", "tokens", "config", "median us",
               "GB/s", "bytes", "check");
  }
  bool all_ok = true;
  for (const auto& path : o.specs) {
    const ropejit::Spec spec = ropejit::load_spec_file(path);
    const ropejit::Kernel kernel = ropejit::cli::kernel_option(runtime, spec, o.config);
    for (const auto& item : ropejit::cli::split_list(o.tokens)) {
      ropejit::check::CaseOptions co;
      co.tokens = std::stoll(item);
      co.max_position = spec.max_position_embeddings;
      co.timing_repeats = host ? std::min(o.repeats, 5) : o.repeats;
      co.check_tokens = ropejit::cli::check_tokens_option(spec, o.check_tokens);
      const auto report = ropejit::check::run_case(runtime, kernel, co);  // verified, then timed
      all_ok = all_ok && report.ok();
      const double gbps = report.time_us > 0 ? report.bytes_moved / (report.time_us * 1e3) : 0.0;
      const std::string config = ropejit::config_name(kernel.config_for(co.tokens));
      if (o.json) {
        rows.push_back({{"spec", spec.name}, {"tokens", co.tokens}, {"config", config}, {"backend", runtime.backend()},
                        {"time_us", report.time_us}, {"gb_per_s", gbps}, {"bytes", report.bytes_moved},
                        {"ok", report.ok()}, {"checked_tokens", report.checked_tokens}});
      } else {
        fmt::print("{:<24} {:>7} {:<28} {:>11.2f} {:>9.2f} {:>12}  {}\n", spec.name, co.tokens, config,
                   report.time_us, gbps, report.bytes_moved,
                   !report.ok() ? "FAILED" : report.checked_tokens < co.tokens ? fmt::format("ok ({} tokens)", report.checked_tokens) : "ok");
      }
    }
  }
  if (o.json) std::cout << rows.dump(2) << "\n";
  if (!all_ok) throw ropejit::Error(ropejit::Status::internal, "a benchmarked kernel failed its reference check");
}

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Time verified launches of specs over token counts");
  auto o = std::make_shared<BenchOptions>();
  cmd->add_option("specs", o->specs, "spec JSON files")->required();
  cmd->add_option("--tokens", o->tokens, "comma-separated token counts");
  cmd->add_option("--backend", o->backend, "auto | cuda | host");
  cmd->add_option("--config", o->config, "launch config: inline JSON or a file (default: tuned or heuristic)");
  cmd->add_option("--repeats", o->repeats, "timed launches per point (median; at most 5 on host)");
  ropejit::cli::add_check_tokens_option(cmd, &o->check_tokens);
  cmd->add_flag("--json", o->json, "machine-readable output");
  cmd->callback([o] { bench(*o); });
}

}  // namespace

ROPEJIT_COMMAND(55, add_bench_command);
