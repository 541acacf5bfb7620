// The `ropejit` command: validate, emit, compile, run, tune, bench specs.
#include <algorithm>
#include <cstdio>

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

int main(int argc, char** argv) {
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
  return 0;
}
