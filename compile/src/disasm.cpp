// Finding nvdisasm / cuobjdump and running it on a CUBIN: a child process (posix_spawn, no
// shell) on temporary files that are always removed.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "ropejit/error.h"
#include "ropejit/kernel_stats.h"
#include "temp_file.h"

extern char** environ;

namespace ropejit {

namespace {

bool executable(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::optional<std::string> find_disassembler() {
  // An explicit choice wins; "none" (or empty) turns SASS off, e.g. to test the PTX path.
  if (const char* v = std::getenv("ROPEJIT_NVDISASM")) {
    const std::string tool = v;
    if (tool.empty() || tool == "none") return std::nullopt;
    if (!executable(tool))
      throw Error(Status::invalid_argument,
                  fmt::format("ROPEJIT_NVDISASM={} is not an executable file (set it to \"none\" to use the PTX)", tool));
    return tool;
  }
  std::vector<std::string> dirs;
  std::istringstream path(env("PATH"));
  for (std::string dir; std::getline(path, dir, ':');)
    if (!dir.empty()) dirs.push_back(dir);
  dirs.push_back((env("CUDA_HOME").empty() ? std::string("/usr/local/cuda") : env("CUDA_HOME")) + "/bin");
#ifdef ROPEJIT_NVDISASM_CONFIGURED
  // Found at configure time (scripts/setup.sh's project-local prefix; cmake/RopejitCudaTools.cmake).
  const std::string configured = ROPEJIT_NVDISASM_CONFIGURED;
  dirs.push_back(configured.substr(0, configured.find_last_of('/')));
#endif
  for (const char* name : {"nvdisasm", "cuobjdump"})
    for (const std::string& dir : dirs)
      if (executable(dir + "/" + name)) return dir + "/" + name;
  return std::nullopt;
}

std::string disassemble(const std::string& tool, std::string_view cubin) {
  TempFile input("sass", ".cubin"), output("sass", ".sass"), errors("sass", ".log");
  {
    std::ofstream f(input.path, std::ios::binary);
    f.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
    if (!f) throw Error(Status::io_error, fmt::format("cannot write {}", input.path));
  }
  const bool cuobjdump = tool.size() >= 9 && tool.compare(tool.size() - 9, 9, "cuobjdump") == 0;
  std::vector<std::string> args = {tool};
  if (cuobjdump) args.push_back("-sass");
  else args.push_back("-c");  // code sections only
  args.push_back(input.path);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output.path.c_str(), O_WRONLY | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, errors.path.c_str(), O_WRONLY | O_TRUNC, 0600);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, tool.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw Error(Status::internal, fmt::format("cannot run {}: {}", tool, std::strerror(rc)));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string sass = read_all(output.path);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || sass.find("/*0000*/") == std::string::npos)
    throw Error(Status::internal,
                fmt::format("{} failed on the CUBIN ({}): {}", tool,
                            WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status)) : "killed",
                            read_all(errors.path) + sass.substr(0, 2000)));
  return sass;
}

}  // namespace ropejit
