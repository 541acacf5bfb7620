// `ropejit model check|predict FILE`: the calibrated static model against a file of recorded GPU
// measurements (tests/data/perf/*.json): each launch's measured time, the model's estimate for the
// kernel that ran (check) or for today's kernel (predict), and where the time goes.
#include <cmath>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "command_registry.h"
#include "ropejit/check/model_check.h"

namespace {

const char* timing_name(ropejit::LaunchTiming t) {
  return t == ropejit::LaunchTiming::graph ? "graph" : t == ropejit::LaunchTiming::event ? "event" : "kernel";
}

void print(const ropejit::check::Measurements& m, const std::vector<ropejit::check::ModelCheck>& rows, bool json,
           bool predict) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : rows) {
      const ropejit::Roofline& r = c.estimate;
      out.push_back({{"label", c.row.measured.label}, {"spec", c.row.measured.spec}, {"dtype", c.row.measured.dtype},
                     {"tokens", c.row.measured.tokens}, {"timing", timing_name(c.row.measured.timing)},
                     {"measured_us", c.row.measured.us}, {"estimate_us", r.estimate_us}, {"ratio", c.ratio},
                     {"config", ropejit::config_name(c.row.measured.config)}, {"bytes", r.bytes},
                     {"dram_bytes", r.dram_bytes}, {"chunks", c.row.access.chunks},
                     {"partial_sectors", c.row.access.partial_sectors}, {"reread_bytes", c.row.access.reread_bytes},
                     {"reread_hit", r.reread_hit}, {"index_levels", c.row.access.index_levels},
                     {"dram_us", r.dram_us}, {"latency_us", r.latency_us}, {"issue_us", r.issue_us},
                     {"lifetime_us", r.lifetime_us}, {"launch_us", r.launch_us}, {"bound", r.bound}});
    }
    fmt::print("{}\n", out.dump(2));
    return;
  }
  fmt::print("{} {} ({}), kernels of {}: {}\n", m.part, m.device, m.date, m.commit, m.source);
  fmt::print("| shape | T | timing | measured µs | {} µs | {} ÷ measured | bound | counted MB | DRAM MB | "
             "dram · latency · issue · life µs |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
             predict ? "predicted" : "model", predict ? "predicted" : "model");
  int outside = 0;
  for (const auto& c : rows) {
    const ropejit::Roofline& r = c.estimate;
    const bool out_of_band = !c.in_band;
    outside += out_of_band;
    fmt::print("| {} | {} | {} | {:.2f} | {:.2f} | {:.2f}{} | {} | {:.1f} | {:.1f} | {:.1f} · {:.1f} · {:.1f} · {:.1f} |\n",
               c.row.measured.label, c.row.measured.tokens, timing_name(c.row.measured.timing), c.row.measured.us, r.estimate_us,
               c.ratio, out_of_band ? " **" : "", r.bound, r.bytes / 1e6, r.dram_bytes / 1e6, r.dram_us, r.latency_us,
               r.issue_us, r.lifetime_us);
  }
  if (!predict) fmt::print("\n{} of {} rows outside their band (marked **)\n", outside, rows.size());
}

// The part's constants as one line, for the fit's output.
std::string constants(const ropejit::GpuPart& p) {
  return fmt::format("latency_ns {:.0f}, l2_latency_ns {:.0f}, chunk_bytes {:.0f}, overlap {:.2f}, event_launch_us {:.2f} "
                     "(copy_gbs {:.0f}, graph_launch_us {:.2f})",
                     p.latency_ns, p.l2_latency_ns, p.chunk_bytes, p.overlap, p.event_launch_us, p.copy_gbs,
                     p.graph_launch_us);
}

void add_model_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("model", "The calibrated static model against recorded GPU measurements");
  cmd->require_subcommand(1);
  const char* const kinds[] = {"check", "predict", "fit"};
  const char* const helps[] = {
      "Estimate each recorded launch's kernel and compare (the model's check; exit 1 if a row leaves its band)",
      "Estimate today's kernels at each recorded launch (a prediction for the next GPU run)",
      "Fit the part's fitted constants to the recorded launches (minimize the worst row's share of its band)"};
  for (int kind = 0; kind < 3; ++kind) {
    auto* sub = cmd->add_subcommand(kinds[kind], helps[kind]);
    auto file = std::make_shared<std::string>();
    auto specs = std::make_shared<std::string>("specs");
    auto json = std::make_shared<bool>(false);
    sub->add_option("file", *file, "measurements file (tests/data/perf/*.json)")->required();
    sub->add_option("--specs", *specs, "folder of the spec files the rows name (default: specs)");
    sub->add_flag("--json", *json, "machine-readable output");
    sub->callback([=] {
      namespace check = ropejit::check;
      const check::Measurements m = check::load_measurements(*file);
      const ropejit::GpuPart& part = ropejit::find_gpu_part(m.part);
      const auto rows = check::model_rows(m, *specs, kind == 1);
      if (kind == 2) {
        const ropejit::GpuPart fitted = check::fit_model(rows, part);
        fmt::print("now:    {}  worst {:.3f} of the band\nfitted: {}  worst {:.3f} of the band\n", constants(part),
                   check::worst_band_share(check::check_model(rows, part)), constants(fitted),
                   check::worst_band_share(check::check_model(rows, fitted)));
        return;
      }
      const auto checks = check::check_model(rows, part);
      print(m, checks, *json, kind == 1);
      if (kind == 0 && check::worst_band_share(checks) > 1) throw CLI::RuntimeError(1);
    });
  }
}

}  // namespace

ROPEJIT_COMMAND(45, add_model_command);
