#pragma once
// Subcommands register themselves, so each lives in its own cli/cmd_*.cpp file.
#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

namespace ropejit::cli {

/// Adds one subcommand (and its callback) to the app.
using CommandSetup = void (*)(CLI::App& app);

/// Registers a subcommand; `order` sorts the help listing.
bool register_command(int order, CommandSetup setup);

/// All registered setups, sorted by order.
std::vector<CommandSetup> registered_commands();

}  // namespace ropejit::cli

/// In a cli/cmd_*.cpp: ROPEJIT_COMMAND(10, add_validate_command);
#define ROPEJIT_COMMAND(order, fn) \
  static const bool ropejit_registered_##fn = ::ropejit::cli::register_command(order, fn)
