// `ropejit tune spec.json... [--tokens ...] [--budget-ms ...] [--db path] [--json] [--dry-run]`:
// autotune on the GPU and store the winners; --dry-run enumerates and compiles the pruned
// search space without one.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ropejit/internal/backend.h"
#include "cli_util.h"
#include "command_registry.h"
#include "ropejit/compile.h"
#include "ropejit/kernel_stats.h"
#include "ropejit/roofline.h"
#include "ropejit/parallel.h"
#include "ropejit/source.h"
#include "ropejit/tuner.h"
#include "ropejit/tuning_db.h"

namespace {

using ropejit::Config;
using ropejit::config_name;
using nlohmann::ordered_json;

struct TuneArgs {
  std::vector<std::string> specs;
  std::string tokens = "1,16,256,4096,65536";
  double budget_ms = 2000.0;
  std::string db;
  std::string arch;
  int device = 0;
  bool json = false;
  bool dry_run = false;
  bool no_save = false;
  int compile_threads = 0;  // 0: one per hardware thread
  double static_prune = 0.0;  // off: see TuneOptions::static_prune_factor
  std::string part;  // --dry-run: the roofline part of the static estimate
};

std::vector<int64_t> parse_tokens(const std::string& text) {
  std::vector<int64_t> out;
  for (const auto& item : ropejit::cli::split_list(text)) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 1) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw ropejit::Error(ropejit::Status::invalid_argument,
                           fmt::format("--tokens: \"{}\" is not allowed: must be a comma-separated list of "
                                       "integers >= 1",
                                       item));
    }
  }
  if (out.empty()) throw ropejit::Error(ropejit::Status::invalid_argument, "--tokens: the list is empty");
  return out;
}

std::string duration_text(double seconds) {
  if (seconds < 60) return fmt::format("{:.0f}s", seconds);
  if (seconds < 3600) return fmt::format("{}m{:02d}s", int(seconds) / 60, int(seconds) % 60);
  return fmt::format("{}h{:02d}m", int(seconds) / 3600, (int(seconds) % 3600) / 60);
}

ordered_json config_json(const Config& c) { return ordered_json::parse(ropejit::config_to_json(c)); }

// ---------------------------------------------------------------- dry run

void dry_run(const TuneArgs& a, const std::vector<int64_t>& tokens) {
  std::string arch = a.arch;
  int sm_count = 132;  // an H100's, to show bucket pruning without a device
  const ropejit::GpuPart* part = a.part.empty() ? nullptr : &ropejit::find_gpu_part(a.part);
  if (arch.empty()) {
    arch = "sm_90";
    if (ropejit::cuda_available()) {
      auto backend = ropejit::make_cuda_backend(a.device, "");
      arch = backend->arch();
      sm_count = backend->sm_count();
      if (!part) part = ropejit::gpu_part_for_device(backend->properties().name, sm_count);
    } else if (!part) {
      part = &ropejit::find_gpu_part("H100-SXM");  // matches the 132 SMs above
    }
  }
  if (part) sm_count = part->sms;
  ordered_json out = ordered_json::array();
  for (const auto& path : a.specs) {
    const ropejit::Spec spec = ropejit::load_spec_file(path);
    const ropejit::SearchSpace space = ropejit::search_space(spec);
    ordered_json configs = ordered_json::array();
    std::vector<Config> compiled;
    const unsigned threads = ropejit::worker_threads(a.compile_threads);
    if (!a.json)
      fmt::print("{} ({}): {} configs to compile, {} pruned; target {}\n", spec.name, path, space.configs.size(),
                 space.pruned.size(), arch);
    // Each distinct source compiled once (configs differing only in launch fields share one),
    // on `threads` threads (NVRTC is thread-safe); then every config reported in order.
    const auto wall_start = std::chrono::steady_clock::now();
    const ropejit::DistinctSources distinct = ropejit::distinct_sources(spec, space.configs);
    const std::vector<ropejit::Source>& sources = distinct.sources;
    const std::vector<size_t>& source_of = distinct.source_of;
    std::vector<std::optional<ropejit::Binary>> binaries(sources.size());
    std::vector<std::string> errors(sources.size());
    ropejit::parallel_for(sources.size(), threads, [&](size_t i) {
      try {
        binaries[i] = ropejit::compile_nvrtc(sources[i], arch);
      } catch (const ropejit::Error& e) {
        errors[i] = e.what();
      }
    });
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    // The static report of each compiled, spill-free config (one disassembly per source).
    std::vector<const ropejit::Binary*> reportable(space.configs.size(), nullptr);
    for (size_t i = 0; i < space.configs.size(); ++i)
      if (const auto& b = binaries[source_of[i]]; b && b->spill_bytes == 0) reportable[i] = &*b;
    const auto stats_start = std::chrono::steady_clock::now();
    const std::map<std::string, ropejit::KernelStats> stats_by_name =
        part && a.static_prune > 0 && arch.rfind("sm_", 0) == 0
            ? ropejit::static_reports(spec, space.configs, reportable, threads)
            : std::map<std::string, ropejit::KernelStats>{};
    const double stats_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stats_start).count();
    for (size_t i = 0; i < space.configs.size(); ++i) {
      const Config& c = space.configs[i];
      ordered_json row{{"config", config_name(c)}};
      std::string status = "ok";
      if (const auto& binary = binaries[source_of[i]]) {
        const ropejit::Binary& b = *binary;
        row["registers"] = b.registers;
        row["spill_bytes"] = b.spill_bytes;
        row["compile_ms"] = b.compile_ms;
        if (b.spill_bytes > 0) status = fmt::format("rejected: spills {} bytes", b.spill_bytes);
        else compiled.push_back(c);
        if (!a.json)
          fmt::print("  {:<34} regs {:>3}  spill {:>4}  {:>6.0f} ms  {}\n", config_name(c), b.registers,
                     b.spill_bytes, b.compile_ms, status);
      } else {
        status = "rejected: compile failed: " + errors[source_of[i]];
        if (!a.json) fmt::print("  {:<34} {}\n", config_name(c), status);
      }
      row["status"] = status;
      configs.push_back(row);
    }
    if (!a.json)
      fmt::print("  compiled {} distinct sources for {} configs in {:.1f} s wall on {} threads\n", sources.size(),
                 space.configs.size(), wall_s, threads);
    const bool static_pruning = part && !compiled.empty() && stats_by_name.size() == compiled.size();
    if (!a.json && part && a.static_prune > 0)
      fmt::print("  static reports of {} configs in {:.1f} s wall; static pruning on {}: {}\n",
                 stats_by_name.size(), stats_s, part->name, static_pruning ? fmt::format("estimates > {} x the best", a.static_prune)
                                                     : std::string("off (a config has no report)"));
    ordered_json buckets = ordered_json::array();
    for (int64_t t : tokens) {
      std::vector<ropejit::PrunedConfig> pruned, static_pruned;
      auto candidates = ropejit::bucket_candidates(spec, compiled, t, sm_count, &pruned);
      if (static_pruning)
        candidates = ropejit::static_prune(spec, candidates, stats_by_name, *part, ropejit::workload_shape(spec, t),
                                           a.static_prune, &static_pruned);
      ordered_json names = ordered_json::array();
      for (const auto& c : candidates) names.push_back(config_name(c));
      buckets.push_back({{"tokens", t}, {"bucket", ropejit::bucket_name(ropejit::bucket_of(t))},
                         {"candidates", names}, {"pruned", pruned.size()}, {"static_pruned", static_pruned.size()}});
      if (!a.json)
        fmt::print("  tokens {:>6} (bucket {:>9}): {} candidates, {} pruned for this size, {} by the static estimate\n",
                   t, ropejit::bucket_name(ropejit::bucket_of(t)), candidates.size(), pruned.size(),
                   static_pruned.size());
    }
    ordered_json pruned = ordered_json::array();
    for (const auto& p : space.pruned) pruned.push_back({{"config", config_name(p.config)}, {"reason", p.reason}});
    out.push_back({{"spec", spec.name}, {"file", path}, {"arch", arch}, {"sm_count", sm_count},
                   {"default", config_name(ropejit::default_config(spec))}, {"compile_wall_s", wall_s},
                   {"compile_threads", threads}, {"distinct_sources", sources.size()},
                   {"static_part", part ? part->name : ""}, {"static_reports_s", stats_s}, {"configs", configs},
                   {"pruned", pruned}, {"buckets", buckets}});
  }
  if (a.json) std::cout << out.dump(2) << "\n";
}

// ---------------------------------------------------------------- tuning

ordered_json candidate_json(const ropejit::CandidateResult& r) {
  return {{"config", config_json(r.config)}, {"name", config_name(r.config)}, {"time_us", r.time_us},
          {"samples", r.samples}, {"gbps", r.gbps}, {"copy_fraction", r.copy_fraction},
          {"registers", r.registers}, {"spill_bytes", r.spill_bytes}, {"rejected", r.rejected}};
}

void print_summary(const std::vector<ropejit::SpecTuneResult>& results, double copy_gbps) {
  fmt::print("\ndevice copy bandwidth: {:.0f} GB/s\n", copy_gbps);
  fmt::print("{:<22} {:>11} {:>7} {:<34} {:>9} {:>8} {:>7} {:>8} {:>6}\n", "spec", "bucket", "tokens", "best config",
             "us", "GB/s", "% copy", "speedup", "regs");
  for (const auto& r : results)
    for (const auto& b : r.buckets) {
      if (!b.best) {
        fmt::print("{:<22} {:>11} {:>7} (no candidate passed the check)\n", r.spec.name, ropejit::bucket_name(b.bucket),
                   b.tokens);
        continue;
      }
      fmt::print("{:<22} {:>11} {:>7} {:<34} {:>9.2f} {:>8.0f} {:>6.1f}% {:>7.2f}x {:>6}\n", r.spec.name,
                 ropejit::bucket_name(b.bucket), b.tokens, config_name(b.best->config), b.best->time_us, b.best->gbps,
                 100.0 * b.best->copy_fraction, b.speedup, b.best->registers);
    }
}

void run_tune(const TuneArgs& a, const std::vector<int64_t>& tokens) {
  std::string db = a.db;
  if (db.empty())
    if (const char* env = std::getenv("ROPEJIT_TUNING_DB")) db = env;
  // Results are saved after minutes or hours of measuring: a database folder that cannot take
  // them must fail now. (The save itself reports its own errors too.)
  if (!db.empty() && !a.no_save)
    ropejit::cli::require_writable_folder(ropejit::cli::parent_folder(db),
                                          fmt::format("{} {}", a.db.empty() ? "ROPEJIT_TUNING_DB" : "--db", db));
  std::vector<ropejit::Spec> specs;
  for (const auto& path : a.specs) specs.push_back(ropejit::load_spec_file(path));
  ropejit::CudaMeasurerOptions measurer_options;
  measurer_options.device = a.device;
  measurer_options.compile_threads = a.compile_threads;
  auto measurer = ropejit::make_cuda_measurer(measurer_options);  // backend_error without a GPU
  ropejit::TuneOptions options;
  options.tokens = tokens;
  options.budget_ms = a.budget_ms;
  options.static_prune_factor = a.static_prune;
  const bool terminal = ::isatty(STDERR_FILENO) && !a.json;
  ropejit::ProgressSink progress;
  if (terminal)
    progress = [](const ropejit::TuneProgress& p) {
      fmt::print(stderr, "\r\033[K[{}/{}] {}  tokens {} ({}/{})  candidate {}/{}  elapsed {}  ETA {}",
                 p.spec_index + 1, p.spec_count, p.spec_name, p.tokens, p.token_index + 1, p.token_count,
                 p.candidate + 1, p.candidates, duration_text(p.elapsed_s), duration_text(p.eta_s));
    };
  const double copy_gbps = measurer->copy_bandwidth_gbps();
  const auto results = ropejit::tune(specs, *measurer, options, progress);
  if (terminal) fmt::print(stderr, "\r\033[K");

  const ropejit::DeviceMetadata device = ropejit::cuda_device_metadata(a.device);
  if (!db.empty() && !a.no_save)
    for (const auto& r : results) ropejit::save_tuning_entries(db, device, r.entries());

  if (a.json) {
    ordered_json out;
    out["device"] = device.describe();
    out["copy_bandwidth_gbps"] = copy_gbps;
    out["db"] = a.no_save ? "" : db;
    out["results"] = ordered_json::array();
    for (const auto& r : results) {
      ordered_json buckets = ordered_json::array();
      for (const auto& b : r.buckets) {
        ordered_json candidates = ordered_json::array();
        for (const auto& c : b.candidates) candidates.push_back(candidate_json(c));
        buckets.push_back({{"bucket", b.bucket}, {"bucket_tokens", ropejit::bucket_name(b.bucket)},
                           {"tokens", b.tokens}, {"bytes", b.shape.bytes},
                           {"best", b.best ? candidate_json(*b.best) : ordered_json(nullptr)},
                           {"runner_up", b.runner_up ? candidate_json(*b.runner_up) : ordered_json(nullptr)},
                           {"default", candidate_json(b.default_result)}, {"speedup", b.speedup},
                           {"elapsed_ms", b.elapsed_ms}, {"candidates", candidates}});
      }
      ordered_json rejected = ordered_json::array();
      for (const auto& c : r.compile_rejected) rejected.push_back(candidate_json(c));
      out["results"].push_back({{"spec", r.spec.name}, {"spec_hash", r.spec_hash},
                                {"space", r.space.configs.size()}, {"pruned", r.space.pruned.size()},
                                {"compile_rejected", rejected}, {"buckets", buckets}});
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("device: {}\n", device.describe());
  print_summary(results, copy_gbps);
  if (a.no_save) fmt::print("\nnot saved (--no-save)\n");
  else if (db.empty()) fmt::print("\nnot saved: pass --db PATH or set ROPEJIT_TUNING_DB\n");
  else fmt::print("\nsaved to {}\n", db);
}

void add_tune_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tune", "Autotune launch configs on the GPU and store them in a tuning database");
  auto a = std::make_shared<TuneArgs>();
  cmd->add_option("specs", a->specs, "spec JSON files")->required();
  cmd->add_option("--tokens", a->tokens, "comma-separated token counts, one per bucket")->capture_default_str();
  cmd->add_option("--budget-ms", a->budget_ms, "measuring time per spec and token count (compiles excluded)")->capture_default_str();
  cmd->add_option("--db", a->db, "tuning database to add the results to (default: $ROPEJIT_TUNING_DB)");
  cmd->add_option("--arch", a->arch, "--dry-run: compile target (default: the device's, else sm_90)");
  cmd->add_option("--device", a->device, "CUDA device ordinal")->capture_default_str();
  cmd->add_flag("--json", a->json, "machine-readable output");
  cmd->add_flag("--dry-run", a->dry_run, "enumerate and compile the pruned search space; no GPU needed");
  cmd->add_option("--compile-threads", a->compile_threads, "threads compiling candidates (default: one per core)")
      ->check(CLI::Range(0, 1024));
  cmd->add_flag("--no-save", a->no_save, "measure and print, but leave the database alone");
  cmd->add_option("--static-prune", a->static_prune,
                  "skip candidates the static model estimates slower than this x the best (0: measure all; "
                  "costs one disassembly per source)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--part", a->part,
                  "--dry-run with --static-prune: GPU part of the static estimate (default: the device's, else H100-SXM)");
  cmd->callback([a] {
    const auto tokens = parse_tokens(a->tokens);
    if (!(a->budget_ms > 0))
      throw ropejit::Error(ropejit::Status::invalid_argument,
                           fmt::format("--budget-ms {} is not allowed: must be > 0", a->budget_ms));
    if (a->dry_run) dry_run(*a, tokens);
    else run_tune(*a, tokens);
  });
}

}  // namespace

ROPEJIT_COMMAND(60, add_tune_command);
