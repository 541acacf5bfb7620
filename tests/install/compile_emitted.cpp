// Compiles one emitted kernel source with NVRTC to sm_90 CUBIN using only the include folders
// given: proves the installed headers are complete for `ropejit emit` output.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nvrtc.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: compile_emitted SOURCE.cu [INCLUDE_DIR...]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    std::fprintf(stderr, "compile_emitted: cannot read %s\n", argv[1]);
    return 2;
  }
  std::vector<std::string> options{"-arch=sm_90", "-std=c++17"};
  for (int i = 2; i < argc; ++i) options.push_back(std::string("--include-path=") + argv[i]);
  std::vector<const char*> option_ptrs;
  for (const auto& o : options) option_ptrs.push_back(o.c_str());

  nvrtcProgram program;
  if (nvrtcCreateProgram(&program, text.str().c_str(), argv[1], 0, nullptr, nullptr) != NVRTC_SUCCESS) return 1;
  const nvrtcResult result = nvrtcCompileProgram(program, int(option_ptrs.size()), option_ptrs.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  nvrtcGetProgramLog(program, log.data());
  size_t cubin_size = 0;
  if (result == NVRTC_SUCCESS) nvrtcGetCUBINSize(program, &cubin_size);
  nvrtcDestroyProgram(&program);
  if (result != NVRTC_SUCCESS || cubin_size == 0) {
    std::fprintf(stderr, "compile_emitted: NVRTC failed: %s\n%s\n", nvrtcGetErrorString(result), log.c_str());
    return 1;
  }
  std::printf("compile_emitted: %s -> %zu bytes of sm_90 CUBIN\n", argv[1], cubin_size);
  return 0;
}
