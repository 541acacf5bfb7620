// `ropejit db show|merge|export|shipped`: read, combine and extract tuning databases; show
// where the shipped tuning files are looked up.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli_util.h"
#include "command_registry.h"
#include "ropejit/error.h"
#include "ropejit/shipped_tuning.h"
#include "ropejit/tuning_db.h"

namespace {

using ropejit::Error;
using ropejit::Status;

std::string db_path(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("ROPEJIT_TUNING_DB")) return env;
  throw Error(Status::invalid_argument, "no tuning database: pass a path or set ROPEJIT_TUNING_DB");
}

/// Reads a database for these commands: an absent or unreadable file is an error here.
ropejit::TuningDbFile read_required(const std::string& path) {
  std::string why;
  auto file = ropejit::read_tuning_db(path, [&](const std::string& w) { why = w; });
  if (!file)
    throw Error(Status::io_error, why.empty() ? fmt::format("tuning database {} does not exist", path) : why);
  return std::move(*file);
}

void show(const std::string& path, bool json) {
  const auto file = read_required(path);
  if (json) {
    std::cout << ropejit::tuning_db_to_json(file);
    return;
  }
  fmt::print("{}: {} device section(s)\n", path, file.devices.size());
  for (const auto& section : file.devices) {
    fmt::print("\n{}\n", section.metadata.describe());
    fmt::print("  {:<22} {:<10} {:>11} {:>7} {:<34} {:>9} {:>8} {:<34} {:>20}\n", "spec", "hash", "bucket", "tokens",
               "best config", "us", "speedup", "runner-up", "date");
    for (const auto& e : section.entries) {
      const double speedup = e.best.time_us > 0 && e.default_time_us > 0 ? e.default_time_us / e.best.time_us : 0.0;
      fmt::print("  {:<22} {:<10} {:>11} {:>7} {:<34} {:>9.2f} {:>7.2f}x {:<34} {:>20}\n", e.spec_name,
                 e.spec_hash.substr(0, 8), ropejit::bucket_name(e.bucket), e.tokens, ropejit::config_name(e.best.config),
                 e.best.time_us, speedup,
                 e.runner_up ? fmt::format("{} {:.2f}us", ropejit::config_name(e.runner_up->config), e.runner_up->time_us)
                             : std::string("-"),
                 e.date);
    }
  }
}

/// The folder of shipped tuning files, the folders searched, each file's sections; with a GPU
/// name, the file a GPU of that name looks for.
void shipped(const std::string& gpu) {
  const ropejit::ShippedTuningDir where = ropejit::shipped_tuning_dir();
  fmt::print("shipped tuning folder: {} ({})\n", where.dir.empty() ? "none" : where.dir, where.origin);
  for (const auto& folder : where.searched) fmt::print("  searched: {}\n", folder);
  std::error_code ec;
  if (!where.dir.empty() && std::filesystem::is_directory(where.dir, ec)) {
    std::vector<std::filesystem::path> files;
    for (const auto& f : std::filesystem::directory_iterator(where.dir, ec))
      if (f.path().extension() == ".json") files.push_back(f.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) fmt::print("  (no .json files)\n");
    for (const auto& f : files) {
      std::string why;
      const auto file = ropejit::read_tuning_db(f.string(), [&](const std::string& w) { why = w; });
      fmt::print("  {}\n", f.filename().string());
      if (!file) fmt::print("    unreadable: {}\n", why);
      for (const auto& s : file ? file->devices : std::vector<ropejit::DeviceSection>{})
        fmt::print("    {}: {} entries\n", s.metadata.describe(), s.entries.size());
    }
  }
  if (!gpu.empty()) fmt::print("\"{}\" looks for {}\n", gpu, ropejit::shipped_tuning_file_name(gpu));
}

void add_db_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("db", "Show, merge and export tuning databases");
  cmd->require_subcommand(1);

  auto* show_cmd = cmd->add_subcommand("show", "Print every device section and its entries");
  auto show_path = std::make_shared<std::string>();
  auto show_json = std::make_shared<bool>(false);
  show_cmd->add_option("path", *show_path, "database file (default: $ROPEJIT_TUNING_DB)");
  show_cmd->add_flag("--json", *show_json, "print the normalized JSON");
  show_cmd->callback([=] { show(db_path(*show_path), *show_json); });

  auto* merge_cmd = cmd->add_subcommand(
      "merge", "Merge databases (from several GPUs or machines) into OUT; same device and key: newer wins");
  auto out = std::make_shared<std::string>();
  auto inputs = std::make_shared<std::vector<std::string>>();
  merge_cmd->add_option("out", *out, "database to merge into (created when absent)")->required();
  merge_cmd->add_option("inputs", *inputs, "databases to merge from")->required();
  merge_cmd->callback([=] {
    // Before reading the inputs: a wrong OUT should name itself, not a lock or temp file.
    ropejit::cli::require_writable_folder(ropejit::cli::parent_folder(*out), fmt::format("tuning database {}", *out));
    ropejit::TuningDbFile combined;
    for (const auto& path : *inputs) ropejit::merge_tuning_db(combined, read_required(path));
    ropejit::merge_tuning_db_into(*out, combined);
    size_t entries = 0;
    for (const auto& s : combined.devices) entries += s.entries.size();
    fmt::print("merged {} entries in {} device section(s) from {} file(s) into {}\n", entries, combined.devices.size(),
               inputs->size(), *out);
  });

  auto* shipped_cmd = cmd->add_subcommand(
      "shipped", "Show the folder of shipped tuning files (docs/tuning.md), the folders searched and each file");
  auto shipped_gpu = std::make_shared<std::string>();
  shipped_cmd->add_option("--gpu", *shipped_gpu, "also print the file name a GPU of this name looks for (\"NVIDIA H200\")");
  shipped_cmd->callback([=] { shipped(*shipped_gpu); });

  auto* export_cmd = cmd->add_subcommand("export", "Write a database (or the sections of one GPU) as JSON");
  auto export_path = std::make_shared<std::string>();
  auto gpu = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  export_cmd->add_option("path", *export_path, "database file (default: $ROPEJIT_TUNING_DB)");
  export_cmd->add_option("--gpu", *gpu, "only sections whose GPU name contains this text");
  export_cmd->add_option("-o,--output", *output, "write here (default: standard output)");
  export_cmd->callback([=] {
    ropejit::TuningDbFile file = read_required(db_path(*export_path));
    if (!gpu->empty()) {
      std::vector<ropejit::DeviceSection> kept;
      for (auto& s : file.devices)
        if (s.metadata.gpu_name.find(*gpu) != std::string::npos) kept.push_back(std::move(s));
      if (kept.empty()) throw Error(Status::invalid_argument, fmt::format("--gpu \"{}\" matches no section", *gpu));
      file.devices = std::move(kept);
    }
    const std::string text = ropejit::tuning_db_to_json(file);
    if (output->empty()) {
      std::cout << text;
      return;
    }
    ropejit::cli::write_file(*output, text);
  });
}

}  // namespace

ROPEJIT_COMMAND(65, add_db_command);
