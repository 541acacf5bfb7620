// NVRTC compile tier: every spec and the test matrix compile to CUBIN with 0 spill bytes.
// ropejit-tier: compile
#include <gtest/gtest.h>

#include "ropejit/compile.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

// Shared memory: only a block's shared cos/sin rows (angles.cuh), as large as its shape says, or
// an all-heads row on chip's warp sums and angles (qk_norm_all.cuh).
void expect_clean(const Binary& b, const Plan& plan, const std::string& what) {
  const SharedAngleShape shared = shared_angles(plan);
  const WorkShape w = work_shape(plan.spec, plan.config);
  const int rows_per_block = w.row_on_chip ? plan.config.block_threads / (w.head_groups * w.lanes) : 0;
  const int shared_bytes = shared.enabled  ? 2 * shared.max_rows * shared.pairs * 4
                           : w.row_on_chip ? (plan.config.block_threads / 32 * 2 + rows_per_block * w.rot_lanes *
                                                                                      w.pairs_per_lane * 2) * 4
                                           : 0;
  EXPECT_FALSE(b.image.empty()) << what;
  EXPECT_GT(b.registers, 0) << what << "\n" << b.log;
  EXPECT_EQ(b.spill_bytes, 0) << what << "\n" << b.log;
  EXPECT_EQ(b.stack_bytes, 0) << what << "\n" << b.log;
  EXPECT_EQ(b.shared_bytes, shared_bytes) << what << "\n" << b.log;
  // The front end has nothing to say about generated code (ptxas -v lines are info).
  EXPECT_EQ(b.log.find("warning"), std::string::npos) << what << "\n" << b.log;
}

}  // namespace

TEST(Compile, EverySpecForSm80AndSm90) {
  const auto files = ropejit::test::spec_files();
  ASSERT_GE(files.size(), 13u);
  for (const auto& path : files) {
    const Spec spec = load_spec_file(path);
    const Plan plan = make_plan(spec, default_config(spec));
    const Source source = generate_source(plan);
    for (const char* arch : {"sm_80", "sm_90"}) {
      const Binary b = compile_nvrtc(source, arch);
      EXPECT_EQ(b.arch, arch);
      EXPECT_FALSE(b.is_ptx);
      expect_clean(b, plan, path + " " + arch);
      // A CUBIN is an ELF file.
      ASSERT_GE(b.image.size(), 4u);
      EXPECT_EQ(b.image.substr(0, 4), "\x7f" "ELF") << path;
    }
  }
}

TEST(Compile, MatrixOfFormsAndRopeTypes) {
  int compiled = 0;
  for (const auto& rope : ropejit::test::rope_blocks_for_every_type(64, 8192)) {
    for (const char* layout : {"neox", "interleaved"}) {
      SpecFields f;
      f.head_dim = 80;
      f.rotary_dim = 64;
      f.layout = layout;
      f.dtype = compiled % 3 == 0 ? "fp16" : (compiled % 3 == 1 ? "bf16" : "fp32");
      ropejit::test::set_rope(f, rope);
      f.angle = compiled % 2 ? "exact" : "fp32";
      f.input = compiled % 2 ? "packed_qkv" : "separate";
      f.output = compiled % 3 == 0 ? "padded_bhsd" : (compiled % 3 == 1 ? "separate" : "inplace");
      f.positions = f.output == "padded_bhsd" || compiled % 4 == 1 ? "varlen" : "explicit";
      f.qkv_bias = compiled % 2 == 0;
      const Spec spec = ropejit::test::make_spec(f);
      for (int hpt : {1, 4}) {
        Config c = default_config(spec);
        c.heads_per_thread = hpt;
        const Plan plan = make_plan(spec, c);
        const Binary b = compile_nvrtc(generate_source(plan), "sm_90");
        expect_clean(b, plan, std::string(layout) + " " + rope.dump() + " " + config_name(c));
      }
      ++compiled;
    }
  }
  EXPECT_EQ(compiled, static_cast<int>(ropejit::test::rope_blocks_for_every_type(64, 8192).size() * 2));
}

TEST(Compile, PtxForVirtualArch) {
  const Spec spec = ropejit::test::make_spec({});
  const Binary b = compile_nvrtc(generate_source(make_plan(spec, default_config(spec))), "compute_90");
  EXPECT_TRUE(b.is_ptx);
  EXPECT_NE(b.image.find(".entry ropejit_rope"), std::string::npos);
  // 16-byte vector loads and stores, no local memory.
  EXPECT_NE(b.image.find("ld.global.v4.u32"), std::string::npos);
  EXPECT_NE(b.image.find("st.global.v4.b32"), std::string::npos);
  EXPECT_EQ(b.image.find("ld.local"), std::string::npos);
  EXPECT_EQ(b.image.find("st.local"), std::string::npos);
}

// Programmatic dependent launch needs the in-kernel wait on sm_90+ (the runtime launches
// with the attribute only for such images) and must not reach older targets' PTX.
TEST(Compile, GridDependencyWaitOnlyFromSm90) {
  const Spec spec = ropejit::test::make_spec({});
  const Source source = generate_source(make_plan(spec, default_config(spec)));
  const std::string sm90 = compile_nvrtc(source, "compute_90").image;
  const size_t wait = sm90.find("griddepcontrol.wait");
  ASSERT_NE(wait, std::string::npos);
  EXPECT_NE(sm90.find("griddepcontrol.launch_dependents"), std::string::npos);
  // The wait comes before the first global read of an input.
  const size_t first_load = sm90.find("ld.global");
  ASSERT_NE(first_load, std::string::npos);
  EXPECT_LT(wait, first_load);
  const std::string sm80 = compile_nvrtc(source, "compute_80").image;
  EXPECT_EQ(sm80.find("griddepcontrol"), std::string::npos);
}

TEST(Compile, ErrorsCarryLogAndSourceLine) {
  Source broken;
  broken.text = "#include \"ropejit/rope.cuh\"\nextern \"C\" __global__ void ropejit_rope() {\n  undefined_symbol_here();\n}\n";
  broken.entry = "ropejit_rope";
  broken.hash = hash_bytes(broken.text);
  try {
    compile_nvrtc(broken, "sm_90");
    FAIL() << "compiled broken source";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::compile_error);
    EXPECT_NE(e.log().find("undefined_symbol_here"), std::string::npos) << e.log();
    EXPECT_NE(e.log().find("ropejit_kernel.cu:3:   undefined_symbol_here();"), std::string::npos) << e.log();
  }
  try {
    compile_nvrtc(broken, "gfx90a");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::invalid_argument);
  }
}

// compile_nvrtc_timed: NVRTC's phase table read back (no time is asserted), the image unchanged
// by --time, and no phase that did not run (ptxas for PTX).
TEST(Compile, TimedCompileReportsEveryPhaseRunAndTheSameImage) {
  const Spec spec = ropejit::test::make_spec({});
  const Source source = generate_source(make_plan(spec, default_config(spec)));
  const Binary plain = compile_nvrtc(source, "sm_90");
  EXPECT_EQ(plain.phases.frontend_ms, -1);
  const Binary timed = compile_nvrtc_timed(source, "sm_90");
  EXPECT_EQ(timed.image, plain.image);
  EXPECT_EQ(timed.registers, plain.registers);
  EXPECT_GE(timed.phases.frontend_ms, 0);
  EXPECT_GE(timed.phases.nvvm_ms, 0);
  EXPECT_GE(timed.phases.ptxas_ms, 0);
  const Binary ptx = compile_nvrtc_timed(source, "compute_90");
  EXPECT_GE(ptx.phases.nvvm_ms, 0);
  EXPECT_EQ(ptx.phases.ptxas_ms, -1);
}

TEST(Compile, VersionAndOptionsArePartOfTheKey) {
  EXPECT_FALSE(nvrtc_version().empty());
  const auto a = nvrtc_options("sm_80", false), b = nvrtc_options("sm_90", false);
  EXPECT_NE(a, b);
}

// A malformed or unsupported arch fails before NVRTC, naming the arch and the allowed set.
TEST(Compile, ArchNamesAreCheckedBeforeNvrtc) {
  const Spec spec = test::make_spec({});
  const Source source = generate_source(make_plan(spec, default_config(spec)));
  for (const char* bad : {"sm_9x", "compute_", "sm_", "sm90", "sm_90ab", "sm_123456"}) {
    try {
      compile_nvrtc(source, bad);
      ADD_FAILURE() << "compiled for " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Status::invalid_argument) << bad;
      EXPECT_NE(std::string(e.what()).find(std::string("arch \"") + bad + "\" is not allowed"), std::string::npos)
          << e.what();
    }
  }
  const std::vector<int> supported = nvrtc_supported_archs();
  ASSERT_FALSE(supported.empty());
  try {
    compile_nvrtc(source, "sm_91");
    ADD_FAILURE() << "compiled for sm_91";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("not supported by NVRTC"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(supported.front())), std::string::npos) << e.what();
  }
  EXPECT_FALSE(compile_nvrtc(source, "sm_90a").image.empty());
}
