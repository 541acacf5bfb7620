// Source → Binary with NVRTC: CUBIN for an exact sm_XX (PTX for compute_XX), resource usage
// from ptxas' verbose report, errors with the offending source lines.
#include "ropejit/compile.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ropejit/embedded_templates.h"
#include "nvrtc_api.h"
#include "temp_file.h"

namespace ropejit {

namespace {

constexpr const char* kProgramName = "ropejit_kernel.cu";

void check_nvrtc(const NvrtcApi& api, nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS)
    throw Error(Status::compile_error, fmt::format("NVRTC {} failed: {}", what, api.nvrtcGetErrorString(r)));
}

std::string line_of(std::string_view text, int line_number) {
  int line = 1;
  size_t start = 0;
  while (line < line_number) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) return {};
    start = nl + 1;
    ++line;
  }
  const size_t end = text.find('\n', start);
  return std::string(text.substr(start, end == std::string_view::npos ? text.size() - start : end - start));
}

// Appends, for each "file(line): error" in the log, that line of the generated or template source.
std::string annotate_errors(const std::string& log, const std::string& source) {
  std::string notes;
  static const std::regex location(R"(([\w./-]+)\((\d+)\): error)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), location); it != std::sregex_iterator(); ++it) {
    const std::string file = (*it)[1];
    const int line = std::stoi((*it)[2]);
    std::string_view text;
    if (file == kProgramName) text = source;
    for (const auto& f : embedded_templates())
      if (file == f.name) text = f.text;
    if (!text.empty()) notes += fmt::format("{}:{}: {}\n", file, line, line_of(text, line));
  }
  return notes;
}

int parse_int(const std::string& log, const std::regex& re) {
  std::smatch m;
  return std::regex_search(log, m, re) ? std::stoi(m[1]) : 0;
}

void read_resource_usage(Binary& b) {
  static const std::regex regs(R"(Used (\d+) registers)");
  static const std::regex stack(R"((\d+) bytes stack frame)");
  static const std::regex spill_st(R"((\d+) bytes spill stores)");
  static const std::regex spill_ld(R"((\d+) bytes spill loads)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::smatch m;
  b.registers = std::regex_search(b.log, m, regs) ? std::stoi(m[1]) : -1;
  b.stack_bytes = parse_int(b.log, stack);
  b.spill_bytes = parse_int(b.log, spill_st) + parse_int(b.log, spill_ld);
  b.shared_bytes = parse_int(b.log, smem);
}

}  // namespace

std::string nvrtc_version() {
  const NvrtcApi& api = nvrtc();
  int major = 0, minor = 0;
  check_nvrtc(api, api.nvrtcVersion(&major, &minor), "version");
  return fmt::format("{}.{}", major, minor);
}

int arch_number(const std::string& arch) {
  const size_t us = arch.find('_');
  size_t end = us == std::string::npos ? 0 : us + 1;
  while (end < arch.size() && std::isdigit(static_cast<unsigned char>(arch[end]))) ++end;
  if (us == std::string::npos || end == us + 1)
    throw Error(Status::invalid_argument, fmt::format("arch \"{}\" is not allowed: must be sm_XX or compute_XX", arch));
  return std::stoi(arch.substr(us + 1, end - us - 1));
}

std::vector<int> nvrtc_supported_archs() {
  const NvrtcApi& api = nvrtc_api();
  int count = 0;
  if (!api.available() || api.nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return {};
  std::vector<int> archs(static_cast<size_t>(count));
  if (api.nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  std::sort(archs.begin(), archs.end());
  return archs;
}

namespace {

// sm_XX or compute_XX (an `a`/`f` suffix allowed) with XX one NVRTC supports: a bad name fails
// here with the allowed set, not inside NVRTC with "invalid option".
void check_arch_name(const std::string& arch) {
  const bool is_virtual = arch.rfind("compute_", 0) == 0;
  const size_t digits = is_virtual ? 8 : 3;
  size_t end = digits;
  while (end < arch.size() && std::isdigit(static_cast<unsigned char>(arch[end]))) ++end;
  const bool suffix_ok = end == arch.size() || (end + 1 == arch.size() && (arch[end] == 'a' || arch[end] == 'f'));
  if ((!is_virtual && arch.rfind("sm_", 0) != 0) || end == digits || end - digits > 4 || !suffix_ok)
    throw Error(Status::invalid_argument,
                fmt::format("arch \"{}\" is not allowed: must be sm_XX (CUBIN) or compute_XX (PTX)", arch));
  const std::vector<int> supported = nvrtc_supported_archs();
  const int number = std::stoi(arch.substr(digits, end - digits));
  if (!supported.empty() && std::find(supported.begin(), supported.end(), number) == supported.end())
    throw Error(Status::invalid_argument,
                fmt::format("arch \"{}\" is not supported by NVRTC {}: allowed {}_{{{}}}", arch, nvrtc_version(),
                            is_virtual ? "compute" : "sm", fmt::join(supported, ",")));
}

}  // namespace

std::vector<std::string> nvrtc_options(const std::string& arch, bool ptx) {
  // --fmad=false: the templates place every FMA explicitly, so GPU and host results agree.
  // 177 (member never referenced): Traits carries one flag per io form; a kernel reads a few.
  // --minimal: the templates use no runtime API, textures or device launch; NVRTC then parses
  // less of its builtin header (2-3 ms of every compile, the same SASS; docs/PERF.md).
  std::vector<std::string> opts = {"--gpu-architecture=" + arch, "-std=c++17", "--fmad=false",
                                   "-default-device", "--minimal", "--diag-suppress=177"};
  if (!ptx) opts.push_back("--ptxas-options=-v");
  return opts;
}

namespace {

// The rows of NVRTC's --time table ("file, phase name, metric, unit"): the last compile's.
CompilePhases parse_phases(const std::string& table) {
  CompilePhases out;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> cells;
    std::istringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) {
      const size_t first = cell.find_first_not_of(' ');
      cells.push_back(first == std::string::npos ? std::string() : cell.substr(first));
    }
    if (cells.size() != 4 || cells[3] != "ms" || cells[2].empty() || !std::isdigit(static_cast<unsigned char>(cells[2][0])))
      continue;
    const int ms = std::stoi(cells[2]);
    if (cells[1] == "CUDA C++ Frontend") out.frontend_ms = ms;
    else if (cells[1] == "NVVM Optimizer") out.nvvm_ms = ms;
    else if (cells[1] == "PTX Translation") out.ptxas_ms = ms;
  }
  return out;
}

// `time_file`: where NVRTC appends its --time table (nullptr: not measured).
Binary compile(const Source& source, const std::string& arch, bool ptx, const std::string* time_file) {
  const bool arch_is_virtual = arch.rfind("compute_", 0) == 0;
  check_arch_name(arch);
  ptx = ptx || arch_is_virtual;
  const NvrtcApi& api = nvrtc();
  const std::string target = ptx && !arch_is_virtual ? "compute_" + arch.substr(3) : arch;

  const auto& headers = embedded_templates();
  std::vector<std::string> header_text, header_names;
  for (const auto& h : headers) {
    header_text.emplace_back(h.text);
    header_names.emplace_back(h.name);
  }
  std::vector<const char*> text_ptrs, name_ptrs;
  for (size_t i = 0; i < headers.size(); ++i) {
    text_ptrs.push_back(header_text[i].c_str());
    name_ptrs.push_back(header_names[i].c_str());
  }

  const auto start = std::chrono::steady_clock::now();
  nvrtcProgram prog = nullptr;
  check_nvrtc(api,
              api.nvrtcCreateProgram(&prog, source.text.c_str(), kProgramName,
                                     static_cast<int>(headers.size()), text_ptrs.data(), name_ptrs.data()),
              "create program");
  struct Destroy {
    const NvrtcApi& api;
    nvrtcProgram& p;
    ~Destroy() { api.nvrtcDestroyProgram(&p); }
  } destroy{api, prog};

  auto options = nvrtc_options(target, ptx);
  if (time_file) options.push_back("--time=" + *time_file);  // no code change: not in the cache key
  std::vector<const char*> option_ptrs;
  for (const auto& o : options) option_ptrs.push_back(o.c_str());
  const nvrtcResult result = api.nvrtcCompileProgram(prog, static_cast<int>(option_ptrs.size()), option_ptrs.data());

  Binary b;
  size_t log_size = 0;
  api.nvrtcGetProgramLogSize(prog, &log_size);
  b.log.resize(log_size);
  if (log_size > 0) api.nvrtcGetProgramLog(prog, b.log.data());
  while (!b.log.empty() && (b.log.back() == '\0' || b.log.back() == '\n')) b.log.pop_back();
  if (result != NVRTC_SUCCESS)
    throw Error(Status::compile_error,
                fmt::format("NVRTC could not compile the kernel for {}: {}", target, api.nvrtcGetErrorString(result)),
                "", b.log + "\n" + annotate_errors(b.log, source.text));

  size_t size = 0;
  if (ptx) {
    check_nvrtc(api, api.nvrtcGetPTXSize(prog, &size), "get PTX size");
    b.image.resize(size);
    check_nvrtc(api, api.nvrtcGetPTX(prog, b.image.data()), "get PTX");
  } else {
    check_nvrtc(api, api.nvrtcGetCUBINSize(prog, &size), "get CUBIN size");
    b.image.resize(size);
    check_nvrtc(api, api.nvrtcGetCUBIN(prog, b.image.data()), "get CUBIN");
  }
  b.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  b.arch = target;
  b.is_ptx = ptx;
  b.entry = source.entry;
  b.source_hash = source.hash;
  if (!ptx) read_resource_usage(b);
  if (time_file) b.phases = parse_phases(read_all(*time_file));
  return b;
}

}  // namespace

Binary compile_nvrtc(const Source& source, const std::string& arch, bool ptx) {
  return compile(source, arch, ptx, nullptr);
}

Binary compile_nvrtc_timed(const Source& source, const std::string& arch, bool ptx) {
  const TempFile table("nvrtc-time", ".csv");
  return compile(source, arch, ptx, &table.path);
}

}  // namespace ropejit
