// The `ropejit` command: validate, emit, compile, run, tune, bench specs.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <fmt/core.h>

#include "command_registry.h"
#include "ropejit/error.h"
#include "ropejit/source.h"

namespace ropejit::cli {

namespace {
std::vector<std::pair<int, CommandSetup>>& registry() {
  static std::vector<std::pair<int, CommandSetup>> r;
  return r;
}
}  // namespace

bool register_command(int order, CommandSetup setup) {
  registry().emplace_back(order, setup);
  return true;
}

std::vector<CommandSetup> registered_commands() {
  auto r = registry();
  std::stable_sort(r.begin(), r.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<CommandSetup> out;
  for (auto& [order, setup] : r) out.push_back(setup);
  return out;
}

}  // namespace ropejit::cli

namespace {

/// Exit status once a command succeeded: 1 when its standard output could not be written (a
/// full disk, a closed pipe), which stdio only reports at a flush, after the command returned.
int finish_stdout() {
  errno = 0;
  // std::cout writes through stdout's buffer (sync_with_stdio), so its flush is the write that
  // fails; errno then holds the reason, unless a write already failed before this flush.
  const bool ok = std::cout.flush().good() && std::fflush(stdout) == 0 && !std::ferror(stdout);
  if (ok) return 0;
  const int err = errno;
  fmt::print(stderr, "error: cannot write standard output: {}\n",
             err != 0 ? std::strerror(err) : "an earlier write failed");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef __GLIBC__
  // Each NVRTC compile frees ~10 MB that glibc would hand back to the system, only to fault it
  // in again for the next compile (~2,300 page faults, 3-5 ms of each compile after the first).
  mallopt(M_TOP_PAD, 64 << 20);
#endif
  CLI::App app{"ropejit: JIT kernel generator and autotuner for rotary position embedding"};
  app.set_version_flag("--version", std::string(ropejit::version()));
  app.require_subcommand(1);
  for (auto setup : ropejit::cli::registered_commands()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const ropejit::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    if (!e.log().empty()) fmt::print(stderr, "{}\n", e.log());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return finish_stdout();
}
