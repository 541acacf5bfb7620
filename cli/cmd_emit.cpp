// `ropejit emit spec.json [--config ...] [--standalone [--arch sm_90]]`: print the generated CUDA
// source, or one self-contained, pruned kernel file (docs/inspect.md).
#include <iostream>

#include "cli_util.h"
#include "command_registry.h"
#include "ropejit/source.h"
#include "ropejit/standalone.h"

namespace {

void add_emit_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("emit", "Print the generated CUDA source of a spec");
  auto spec_path = std::make_shared<std::string>();
  auto config = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  cmd->add_option("spec", *spec_path, "spec JSON file")->required();
  cmd->add_option("--config", *config, "launch config: inline JSON or a file (default: heuristic)");
  cmd->add_option("-o,--output", *output, "write to this file instead of stdout");
  auto standalone = std::make_shared<bool>(false);
  auto arch = std::make_shared<std::string>();
  auto no_format = std::make_shared<bool>(false);
  cmd->add_flag("--standalone", *standalone,
                "one self-contained file: ropejit headers inlined, pruned to this spec's kernel, annotated");
  cmd->add_option("--arch", *arch, "with --standalone: compile for this arch (sm_90) and state registers and spills")
      ->check([](const std::string& a) {
        try {
          ropejit::arch_number(a);
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      });
  cmd->add_flag("--no-format", *no_format, "with --standalone: leave the pruned text as it is (no clang-format)");
  cmd->callback([=] {
    const ropejit::Spec spec = ropejit::load_spec_file(*spec_path);
    const ropejit::Config c = ropejit::cli::config_option(spec, *config);
    if (!*standalone && (!arch->empty() || *no_format))
      throw ropejit::Error(ropejit::Status::invalid_argument, "--arch and --no-format apply only with --standalone");
    std::string text;
    if (*standalone) {
      ropejit::StandaloneOptions o;
      o.report_arch = *arch;
      o.format = !*no_format;
      text = ropejit::emit_standalone(spec, c, o);
    } else {
      text = ropejit::generate_source(ropejit::make_plan(spec, c)).text;
    }
    if (output->empty()) std::cout << text;  // checked at exit (main.cpp)
    else ropejit::cli::write_file(*output, text);
  });
}

}  // namespace

ROPEJIT_COMMAND(30, add_emit_command);
