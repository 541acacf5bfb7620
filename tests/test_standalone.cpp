// `ropejit emit --standalone` (inspect/): the pruned one-file kernel is the same kernel. NVRTC
// gives byte-identical PTX for it and for the regular source, for every spec in specs/ and a
// matrix of forms; the host backend's outputs are bit-identical; nvcc compiles it alone.
// ropejit-tier: compile
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/build_paths.h"
#include "ropejit/internal/host_jit.h"
#include "launch/launch_args.h"  // private: check_launch and bind_buffers give both modules the same params
#include "ropejit/compile.h"
#include "ropejit/config.h"
#include "ropejit/kernel_stats.h"
#include "ropejit/standalone.h"
#include "support/run_command.h"
#include "support/spec_builder.h"
#include "ropejit/internal/workload.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

struct Case {
  std::string what;
  Spec spec;
  Config config;
};

// Every spec file with its default config, then forms the files do not cover.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& path : test::spec_files()) {
    const Spec spec = load_spec_file(path);
    out.push_back({path, spec, default_config(spec)});
  }
  auto add = [&](const std::string& what, const SpecFields& f, std::function<void(Config&)> tweak = nullptr) {
    const Spec spec = test::make_spec(f);
    Config c = default_config(spec);
    if (tweak) tweak(c);
    out.push_back({what, spec, c});
  };
  SpecFields f;
  f.layout = "interleaved";
  f.dtype = "fp16";
  f.output = "separate";
  f.positions = "offset";
  add("interleaved fp16 separate offset", f);
  f = {};
  f.dtype = "fp32";
  f.rotary_dim = 32;
  f.input = "packed_qkv";
  f.qkv_bias = true;
  f.output = "padded_bhsd";
  f.positions = "varlen";
  add("fp32 partial packed bias padded varlen", f, [](Config& c) { c.grid = GridMode::persistent; });
  f = {};
  f.rope = {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}, {"factor", 2.0}};
  add("dynamic ntk, vec 4", f, [](Config& c) { c.vec = 4; });
  f = {};
  f.rope = {{"rope_type", "linear"}, {"rope_theta", 10000.0}, {"factor", 4.0}};
  add("linear, sincos table, 2 heads per thread", f, [](Config& c) {
    c.sincos = SinCosMode::table;
    c.heads_per_thread = 2;
  });
  f = {};
  f.positions = "mrope";
  f.mrope_section = {24, 20, 20};
  f.mrope_interleaved = true;
  f.qk_norm = {{"type", "rmsnorm"}, {"weight", "none"}};
  add("interleaved mrope + unweighted qk_norm", f);
  f = {};
  f.output = "paged_kv";
  f.positions = "varlen";
  f.io_extra = {{"page_size", 16}, {"cache_layout", "hnd"}, {"cache_dtype", "fp8_e5m2"},
                {"cache_index", "block_tables"}, {"q_output", "separate"}};
  add("paged hnd e5m2 block_tables", f);
  return out;
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> list = cases();
  return list;
}

// PTX without its scalar `.global` constants: NVRTC (-default-device) emits one for every static
// constexpr member and namespace constant, used or not, and the standalone file no longer
// declares the unused ones. Everything else, functions and tables included, must match.
std::string ptx_code(const std::string& ptx) {
  static const std::regex constant(R"(^\.global \.align [0-9]+ \.[a-z0-9]+ [A-Za-z0-9_]+( = [-0-9a-fx.]+)?;$)");
  // A function-local static (the block's __shared__ angles) is mangled with its function's
  // template arguments, which the standalone source has folded away: compare its own name.
  static const std::regex local_static(R"(_ZZ[A-Za-z0-9_]*E[0-9]+([A-Za-z_][A-Za-z0-9_]*))");
  std::string out, line;
  std::istringstream lines(ptx.c_str());  // c_str: the image ends in NUL
  while (std::getline(lines, line))
    if (!std::regex_match(line, constant)) out += std::regex_replace(line, local_static, "local_static_$1") + "\n";
  return out;
}

Source standalone_source(const Case& c) {
  Source s;
  s.text = emit_standalone(c.spec, c.config);
  s.entry = "ropejit_rope";
  s.hash = hash_bytes(s.text);
  return s;
}

}  // namespace

TEST(Standalone, NoRopejitIncludeAndAnnotated) {
  if (!standalone_available()) GTEST_SKIP() << "SKIPPED: built without Clang libTooling";
  const Case& c = all_cases().front();
  const std::string text = emit_standalone(c.spec, c.config);
  EXPECT_EQ(text.find("#include \"ropejit/"), std::string::npos);
  EXPECT_NE(text.find("// Spec (canonical JSON):"), std::string::npos);
  EXPECT_NE(text.find("Bytes moved per token: " + std::to_string(bytes_moved(c.spec, 1, 1, 0))), std::string::npos);
  EXPECT_NE(text.find("extern \"C\" __global__"), std::string::npos);
  // Pruned: the forms this spec does not use are gone.
  const Spec& spec = c.spec;
  if (spec.io.output != OutputForm::padded_bhsd) EXPECT_EQ(text.find("kOutputPaddedBhsd"), std::string::npos);
  if (!spec.qk_norm.enabled) EXPECT_EQ(text.find("head_norm"), std::string::npos);
  if (!paged_kv(spec)) EXPECT_EQ(text.find("locate_cache_slot"), std::string::npos);
  EXPECT_LT(text.size(), inline_templates(generate_source(make_plan(spec, c.config)).text).size() * 3 / 4);
  // Folded: the work shape is this kernel's numbers, the general formula is gone.
  const WorkShape w = work_shape(spec, c.config);
  EXPECT_NE(text.find("/*half=*/" + std::to_string(w.half)), std::string::npos);
  EXPECT_NE(text.find("/*head_groups=*/" + std::to_string(w.head_groups)), std::string::npos);
  EXPECT_EQ(text.find("make_work_shape"), std::string::npos);
}

TEST(Standalone, SamePtxAsTheRegularSourceForEverySpecAndForm) {
  if (!standalone_available()) GTEST_SKIP() << "SKIPPED: built without Clang libTooling";
  ASSERT_GE(all_cases().size(), 26u);
  for (const Case& c : all_cases()) {
    const Source regular = generate_source(make_plan(c.spec, c.config));
    const Source alone = standalone_source(c);
    for (const char* arch : {"compute_80", "compute_90"}) {
      const std::string a = ptx_code(compile_nvrtc(regular, arch, true).image);
      const std::string b = ptx_code(compile_nvrtc(alone, arch, true).image);
      if (a == b) continue;
      const std::string base = ::testing::TempDir() + "/ropejit_standalone_" + arch;  // for diff
      std::ofstream(base + "_regular.ptx") << a;
      std::ofstream(base + "_standalone.ptx") << b;
      ADD_FAILURE() << c.what << " " << arch << ": PTX differs (" << a.size() << " vs " << b.size()
                    << " bytes): diff " << base << "_{regular,standalone}.ptx";
    }
  }
}

// Where a disassembler is available: the sm_90 machine code of the entry point is the same
// instruction for instruction. One operand kind is masked: `c[0x4][offset]`, the constant-bank
// slot holding a global's address (kInvFreq's), which moves because the standalone file declares
// fewer globals (the scalar constants above).
TEST(Standalone, SameSassWhereADisassemblerIsAvailable) {
  if (!standalone_available()) GTEST_SKIP() << "SKIPPED: built without Clang libTooling";
  const auto tool = find_disassembler();
  if (!tool) GTEST_SKIP() << "SKIPPED: no nvdisasm or cuobjdump";
  int compared = 0;
  for (const Case& c : all_cases()) {
    if (compared++ % 4 != 0) continue;  // a quarter: nvdisasm takes ~0.5 s a CUBIN on 2 cores
    auto code = [&](const Source& s) {
      const std::string listing = disassemble(*tool, compile_nvrtc(s, "sm_90").image);
      const size_t begin = listing.find("ropejit_rope:");
      EXPECT_NE(begin, std::string::npos) << c.what << ": no entry point in the listing";
      static const std::regex global_slot(R"(c\[0x4\]\[0x[0-9a-f]+\])");
      return std::regex_replace(begin == std::string::npos ? listing : listing.substr(begin), global_slot, "c[0x4][*]");
    };
    const std::string a = code(generate_source(make_plan(c.spec, c.config))), b = code(standalone_source(c));
    if (a == b) continue;
    const std::string base = ::testing::TempDir() + "/ropejit_standalone_sm_90";
    std::ofstream(base + "_regular.sass") << a;
    std::ofstream(base + "_standalone.sass") << b;
    ADD_FAILURE() << c.what << ": SASS differs: diff " << base << "_{regular,standalone}.sass";
  }
}

// The host backend compiles both texts; one launch on the same inputs writes the same bytes.
TEST(Standalone, HostBackendOutputsAreBitIdentical) {
  if (!standalone_available() || !host_backend_available()) GTEST_SKIP() << "SKIPPED: no Clang / host backend";
  int index = 0;
  for (const Case& c : all_cases()) {
    if (index++ % 3 != 0 && c.what.find("specs/") != std::string::npos) continue;  // every form, a third of the files
    const Source regular = generate_source(make_plan(c.spec, c.config));
    const auto module_a = HostModule::compile(regular.text, regular.entry);
    const auto module_b = HostModule::compile(emit_standalone(c.spec, c.config), regular.entry);
    WorkloadOptions o;
    o.tokens = 37;
    o.seed = 1234 + index;
    const HostWorkload w = make_host_workload(c.spec, o);
    std::vector<std::string> bytes_a, bytes_b;
    for (const HostBuffer& b : w.buffers) {
      bytes_a.push_back(b.bytes);
      bytes_b.push_back(b.bytes);
    }
    auto run = [&](const HostModule& module, std::vector<std::string>& bytes) {
      std::vector<BufferDesc> descs;
      std::vector<void*> ptrs;
      for (size_t i = 0; i < w.buffers.size(); ++i) {
        descs.push_back(w.buffers[i].desc);
        ptrs.push_back(bytes[i].empty() ? nullptr : bytes[i].data());
      }
      const CheckedLaunch launch = check_launch(c.spec, c.config.vec, bind_buffers(descs, w.shape, ptrs, w.seq_len, w.from_seq_len), true);
      const LaunchDims dims = launch_dims(c.spec, c.config, launch.rows, 1);
      HostLaunchDims host_dims;
      host_dims.grid_x = dims.grid;
      host_dims.block_x = dims.block;
      module.launch(host_dims, launch.params);
    };
    run(*module_a, bytes_a);
    run(*module_b, bytes_b);
    // A re-rotation that keeps every position and the length rotates by 0: its keys stay as they are.
    // Attention temperature is 1 (q unchanged) below floor_scale - 1, where a small workload's positions stay.
    const bool cool = c.spec.op == OpKind::attn_temperature &&
                      std::all_of(w.positions.begin(), w.positions.end(),
                                  [&](int64_t p) { return p + 1 < c.spec.attn_temperature.floor_scale; });
    const bool identity = cool || (c.spec.op == OpKind::rerotate && w.new_positions.empty() &&
                                   w.new_start_pos.empty() && w.from_seq_len == w.seq_len);
    for (size_t i = 0; i < w.buffers.size(); ++i) {
      EXPECT_TRUE(bytes_a[i] == bytes_b[i]) << c.what << ": buffer " << w.buffers[i].desc.name << " differs";
      if (w.buffers[i].desc.is_written() && !identity)
        EXPECT_NE(bytes_a[i], w.buffers[i].bytes) << c.what << ": nothing written";
    }
  }
}

// nvcc, with no ropejit include path: the file is all it needs.
TEST(Standalone, NvccCompilesItAlone) {
  if (!standalone_available()) GTEST_SKIP() << "SKIPPED: built without Clang libTooling";
  const std::string nvcc = ropejit::test::nvcc_path();
  if (nvcc.empty()) GTEST_SKIP() << "SKIPPED: no nvcc in this CUDA toolkit";
  const std::string dir = ::testing::TempDir();
  for (const Case& c : all_cases()) {
    if (c.what.find("llama-3.1-8b.json") == std::string::npos && c.what.find("paged") == std::string::npos) continue;
    const std::string file = dir + "/ropejit_standalone.cu";
    std::ofstream(file) << emit_standalone(c.spec, c.config);
    const auto [rc, output] =
        test::run_command(fmt::format("cd '{}' && '{}' -cubin -arch=sm_90 --fmad=false -o ropejit_standalone.cubin "
                                      "ropejit_standalone.cu 2>&1", dir, nvcc));
    EXPECT_EQ(rc, 0) << c.what << ":\n" << output;
  }
}
