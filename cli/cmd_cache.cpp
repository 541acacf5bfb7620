// `ropejit cache ls|clear|path [--dir D]`: inspect and empty the kernel disk cache.
#include <algorithm>
#include <ctime>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include <fmt/core.h>

#include "command_registry.h"
#include "ropejit/cache.h"
#include "ropejit/error.h"

namespace {

// "name=value" lines of a stored key text.
std::map<std::string, std::string> key_fields(const std::string& key_text) {
  std::map<std::string, std::string> fields;
  std::istringstream lines(key_text);
  std::string line;
  while (std::getline(lines, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) fields[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return fields;
}

std::string human_bytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (uint64_t(1) << 20)) return fmt::format("{:.1f} KiB", double(bytes) / 1024);
  if (bytes < (uint64_t(1) << 30)) return fmt::format("{:.1f} MiB", double(bytes) / (1 << 20));
  return fmt::format("{:.2f} GiB", double(bytes) / (1 << 30));
}

std::string human_age(int64_t mtime_ns) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t seconds = std::max<int64_t>(0, int64_t(now.tv_sec) - mtime_ns / 1000000000);
  if (seconds < 120) return fmt::format("{}s", seconds);
  if (seconds < 7200) return fmt::format("{}m", seconds / 60);
  if (seconds < 172800) return fmt::format("{}h", seconds / 3600);
  return fmt::format("{}d", seconds / 86400);
}

std::string require_dir(const std::string& explicit_dir) {
  std::string dir = ropejit::resolve_cache_dir(explicit_dir);
  if (dir.empty())
    throw ropejit::Error(ropejit::Status::io_error,
                         "no cache folder: pass --dir, or set ROPEJIT_CACHE_DIR, XDG_CACHE_HOME "
                         "or HOME");
  return dir;
}

// A cache object for reading or clearing: no write probe warning matters to these commands.
std::unique_ptr<ropejit::DiskCache> open_cache(const std::string& dir) {
  ropejit::DiskCacheOptions options;
  options.dir = dir;
  options.warn = [](const std::string&) {};
  return std::make_unique<ropejit::DiskCache>(options);
}

// A host key's target is "<triple> cpu=<name> <feature list>": the CPU name is what a person needs.
std::string short_arch(const std::string& arch) {
  const size_t cpu = arch.find(" cpu=");
  if (cpu == std::string::npos) return arch;
  return arch.substr(cpu + 5, arch.find(' ', cpu + 5) - (cpu + 5));
}

void list_entries(const std::string& explicit_dir) {
  const std::string dir = require_dir(explicit_dir);
  auto cache = open_cache(dir);
  auto entries = cache->list();
  uint64_t total = 0;
  if (!entries.empty())
    fmt::print("{:>10}  {:>5}  {:<8} {:<7} {:<12} {:<12} {:<8} {}\n", "size", "age", "arch",
               "backend", "source", "compiler", "ropejit", "file");
  for (const auto& e : entries) {
    total += e.size;
    auto fields = key_fields(e.key_text);
    std::string file = e.path.substr(e.path.find_last_of('/') + 1);
    if (!e.header_ok) {
      fmt::print("{:>10}  {:>5}  (unreadable entry: a miss, rewritten on next store) {}\n",
                 human_bytes(e.size), human_age(e.mtime_ns), file);
      continue;
    }
    fmt::print("{:>10}  {:>5}  {:<8} {:<7} {:<12} {:<12} {:<8} {}\n", human_bytes(e.size),
               human_age(e.mtime_ns), short_arch(fields["arch"]), fields["backend"],
               fields["source_hash"].substr(0, 12), fields["nvrtc_version"],
               fields["ropejit_version"], file);
  }
  fmt::print("{} entr{}, {} in {}\n", entries.size(), entries.size() == 1 ? "y" : "ies",
             human_bytes(total), dir);
}

void clear_entries(const std::string& explicit_dir) {
  const std::string dir = require_dir(explicit_dir);
  auto cache = open_cache(dir);
  const size_t before = cache->entry_count();
  const size_t removed = cache->clear();
  fmt::print("removed {} of {} entr{} from {}\n", removed, before, before == 1 ? "y" : "ies", dir);
  if (removed < before)
    throw ropejit::Error(ropejit::Status::io_error,
                         fmt::format("could not remove {} entries in {}", before - removed, dir));
}

void add_cache_command(CLI::App& app) {
  auto* cache = app.add_subcommand("cache", "Inspect or empty the kernel disk cache");
  cache->require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  auto add_dir = [&](CLI::App* sub) {
    sub->add_option("--dir", *dir, "Cache folder (default: ROPEJIT_CACHE_DIR, "
                                   "$XDG_CACHE_HOME/ropejit, ~/.cache/ropejit)");
  };
  add_dir(cache);  // `cache --dir D ls` and `cache ls --dir D` both work
  auto* ls = cache->add_subcommand("ls", "List entries: size, age, key summary (oldest first)");
  add_dir(ls);
  ls->callback([dir] { list_entries(*dir); });
  auto* clear = cache->add_subcommand("clear", "Remove every entry");
  add_dir(clear);
  clear->callback([dir] { clear_entries(*dir); });
  auto* path = cache->add_subcommand("path", "Print the resolved cache folder");
  add_dir(path);
  path->callback([dir] { fmt::print("{}\n", require_dir(*dir)); });
}

}  // namespace

ROPEJIT_COMMAND(80, add_cache_command);
