#include "cli_util.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace ropejit::cli {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Status::io_error, fmt::format("cannot read {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Config config_option(const Spec& spec, const std::string& value) {
  if (value.empty()) return default_config(spec);
  const std::string text = value.front() == '{' ? value : read_file(value);
  return config_from_json(text);
}

Kernel kernel_option(Runtime& runtime, const Spec& spec, const std::string& config) {
  return config.empty() ? runtime.get(spec) : runtime.get(spec, config_option(spec, config));
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::stringstream ss(text);
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace ropejit::cli
