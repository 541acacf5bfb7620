// Shipped tuning files: where they are installed, how a device's file is named, and which of
// its sections applies to the running device.
#include "ropejit/shipped_tuning.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

// Set by CMakeLists.txt for this file only; empty when built some other way (no such folder).
#ifndef ROPEJIT_SHIPPED_TUNING_SOURCE_DIR
#define ROPEJIT_SHIPPED_TUNING_SOURCE_DIR ""
#endif
#ifndef ROPEJIT_BUILD_LIBRARY_DIR
#define ROPEJIT_BUILD_LIBRARY_DIR ""
#endif
#ifndef ROPEJIT_SHIPPED_TUNING_RELATIVE
#define ROPEJIT_SHIPPED_TUNING_RELATIVE ""
#endif

namespace ropejit {

namespace fs = std::filesystem;

namespace {

// The folder libropejit was loaded from (canonical), or empty when dladdr cannot say.
fs::path library_folder() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&shipped_tuning_file_name), &info) == 0 || !info.dli_fname ||
      !*info.dli_fname)
    return {};
  std::error_code ec;
  const fs::path library = fs::canonical(info.dli_fname, ec);
  return ec ? fs::path() : library.parent_path();
}

bool is_folder(const fs::path& p) {
  std::error_code ec;
  return !p.empty() && fs::is_directory(p, ec);
}

// "13.0.88" → "13.0": shipped files match the CUDA release, not its patch level.
std::string major_minor(const std::string& version) {
  const size_t dot = version.find('.');
  return dot == std::string::npos ? version : version.substr(0, version.find('.', dot + 1));
}

bool same_hardware(const DeviceMetadata& a, const DeviceMetadata& b) {
  return a.gpu_name == b.gpu_name && a.compute_capability == b.compute_capability && a.sm_count == b.sm_count &&
         a.l2_bytes == b.l2_bytes;
}

// "NVIDIA H200 (cc 9.0, 132 SMs, L2 60 MiB)"; bytes when the size is no whole MiB, so two
// sizes that differ never read the same.
std::string hardware_text(const DeviceMetadata& m) {
  const std::string l2 = m.l2_bytes % (1 << 20) == 0 ? fmt::format("{} MiB", m.l2_bytes >> 20)
                                                     : fmt::format("{} bytes", m.l2_bytes);
  return fmt::format("{} (cc {}, {} SMs, L2 {})", m.gpu_name, m.compute_capability, m.sm_count, l2);
}

std::string versions_text(const DeviceMetadata& m) {
  return fmt::format("ropejit {} with CUDA (NVRTC) {}", m.ropejit_version, m.nvrtc_version);
}

// One line: what the file was made for (the sections of this hardware if any, else all of
// them) against what is running.
std::string mismatch_text(const TuningDbFile& file, const DeviceMetadata& device) {
  std::vector<std::string> versions, hardware;
  for (const auto& s : file.devices) {
    if (same_hardware(s.metadata, device)) versions.push_back(versions_text(s.metadata));
    hardware.push_back(hardware_text(s.metadata));
  }
  if (hardware.empty()) return "it holds no device section";
  if (!versions.empty())
    return fmt::format("made for {}, running {}", fmt::join(versions, " and "), versions_text(device));
  return fmt::format("made for {}, running on {}", fmt::join(hardware, " and "), hardware_text(device));
}

}  // namespace

std::string shipped_tuning_file_name(const std::string& gpu_name) {
  std::string name;
  bool gap = false;
  for (const char ch : gpu_name) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) && c < 0x80) {
      if (gap && !name.empty()) name += '-';
      name += static_cast<char>(std::tolower(c));
      gap = false;
    } else {
      gap = true;
    }
  }
  return (name.empty() ? std::string("unnamed") : name) + ".json";
}

ShippedTuningDir shipped_tuning_dir(const std::string& given) {
  ShippedTuningDir out;
  const char* env = std::getenv(kShippedTuningDirEnv);
  if (!given.empty() || env) {
    const std::string chosen = !given.empty() ? given : std::string(env);
    const std::string from = !given.empty() ? "RuntimeOptions::shipped_tuning_dir" : fmt::format("${}", kShippedTuningDirEnv);
    if (chosen.empty() || chosen == "none") {
      out.origin = fmt::format("{} is \"{}\": shipped tuning files are off", from, chosen);
      return out;
    }
    out.dir = chosen;
    out.origin = from;
    return out;
  }
  const fs::path library = library_folder();
  if (library.empty()) {
    out.origin = "the library's folder is unknown (dladdr failed)";
    return out;
  }
  std::vector<std::pair<fs::path, std::string>> candidates;
  std::error_code ec;
  const std::string build_folder = ROPEJIT_BUILD_LIBRARY_DIR;
  if (!build_folder.empty() && fs::equivalent(library, build_folder, ec) && *ROPEJIT_SHIPPED_TUNING_SOURCE_DIR)
    candidates.emplace_back(ROPEJIT_SHIPPED_TUNING_SOURCE_DIR, "the source tree: the library runs from its build folder");
  candidates.emplace_back(library / "tuning", "the Python package: beside the library");
  const std::string relative = ROPEJIT_SHIPPED_TUNING_RELATIVE;
  if (!relative.empty()) candidates.emplace_back(library / relative, "the install prefix");
  for (const auto& [folder, origin] : candidates) {
    out.searched.push_back(folder.lexically_normal().string());
    if (out.dir.empty() && is_folder(folder)) {
      out.dir = out.searched.back();
      out.origin = origin;
    }
  }
  if (out.dir.empty()) out.origin = "no shipped tuning folder beside the library";
  return out;
}

bool shipped_section_applies(const DeviceMetadata& section, const DeviceMetadata& device) {
  return same_hardware(section, device) && section.ropejit_version == device.ropejit_version &&
         major_minor(section.nvrtc_version) == major_minor(device.nvrtc_version);
}

std::optional<DeviceSection> read_shipped_tuning(const std::string& path, const DeviceMetadata& device,
                                                 const WarningSink& warn) {
  const auto file = read_tuning_db(path, warn, "shipped tuning file");
  if (!file) return std::nullopt;  // absent (silent) or damaged (warned)
  // Sections that differ only in the driver (runs merged from several machines) combine.
  TuningDbFile applicable;
  for (const auto& s : file->devices)
    if (shipped_section_applies(s.metadata, device)) merge_tuning_db(applicable, TuningDbFile{{{device, s.entries}}});
  if (!applicable.devices.empty()) return applicable.devices.front();
  ropejit::warn(warn, fmt::format("ignoring shipped tuning file {}: {}; using heuristic configs", path,
                                  mismatch_text(*file, device)));
  return std::nullopt;
}

}  // namespace ropejit
