// `ropejit emit spec.json [--config ...]`: print the generated CUDA source.
#include <iostream>

#include "cli_util.h"
#include "command_registry.h"
#include "ropejit/source.h"

namespace {

void add_emit_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("emit", "Print the generated CUDA source of a spec");
  auto spec_path = std::make_shared<std::string>();
  auto config = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  cmd->add_option("spec", *spec_path, "spec JSON file")->required();
  cmd->add_option("--config", *config, "launch config: inline JSON or a file (default: heuristic)");
  cmd->add_option("-o,--output", *output, "write to this file instead of stdout");
  cmd->callback([=] {
    const ropejit::Spec spec = ropejit::load_spec_file(*spec_path);
    const auto source = ropejit::generate_source(ropejit::make_plan(spec, ropejit::cli::config_option(spec, *config)));
    if (output->empty()) std::cout << source.text;  // checked at exit (main.cpp)
    else ropejit::cli::write_file(*output, source.text);
  });
}

}  // namespace

ROPEJIT_COMMAND(30, add_emit_command);
