#pragma once
// Small helpers shared by the cli/cmd_*.cpp files.
#include <string>
#include <vector>

#include "ropejit/config.h"

namespace ropejit::cli {

/// A config from `--config`: inline JSON ({...}) or a file path; empty = default_config(spec).
Config config_option(const Spec& spec, const std::string& value);

/// Splits "a,b,c".
std::vector<std::string> split_list(const std::string& text);

/// Reads a whole file (Error io_error naming the path).
std::string read_file(const std::string& path);

}  // namespace ropejit::cli
