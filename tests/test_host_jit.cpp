// Host backend: Clang + ORC compile small CUDA kernels in process and run them on the CPU.
// ropejit-tier: compile+sanitize
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ropejit/internal/host_jit.h"
#include "ropejit/error.h"
#include "ropejit/source.h"
#include "ropejit/check/reference.h"

namespace ropejit {
namespace {

#define SKIP_WITHOUT_HOST_BACKEND() \
  if (!host_backend_available()) GTEST_SKIP() << "built without the host backend"

// out[i] = in[i] * scale + blockIdx.x; visits[i] += 1; over a 3-D grid of 3-D blocks with
// a 64-bit flattened index.
std::string scale_add_source(float scale) {
  char scale_text[64];
  std::snprintf(scale_text, sizeof scale_text, "%af", scale);  // hex float: exact
  return std::string(R"(#include "ropejit/params.cuh"
__device__ const float kScale = )") +
         scale_text + R"(;
extern "C" __global__ void __launch_bounds__(256) scale_add(const ropejit::KernelParams p) {
  const ropejit::i64 block = blockIdx.x + (ropejit::i64)gridDim.x * (blockIdx.y + (ropejit::i64)gridDim.y * blockIdx.z);
  const ropejit::i64 thread = threadIdx.x + (ropejit::i64)blockDim.x * (threadIdx.y + (ropejit::i64)blockDim.y * threadIdx.z);
  const ropejit::i64 i = block * ((ropejit::i64)blockDim.x * blockDim.y * blockDim.z) + thread;
  if (i >= p.num_tokens) return;
  const float* __restrict__ in = static_cast<const float*>(p.in[0].ptr);
  float* __restrict__ out = static_cast<float*>(p.out[0].ptr);
  int* visits = static_cast<int*>(p.out[1].ptr);
  out[i] = fmaf(__ldg(in + i), kScale, (float)blockIdx.x);
  visits[i] += 1;
}
)";
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::mt19937 seeded_rng() {
  const unsigned seed = std::random_device{}();
  std::printf("[host_jit] random seed %u\n", seed);
  return std::mt19937(seed);
}

/// Runs scale_add over `dims` with n elements and checks every element against the host.
void check_scale_add(const HostModule& module, float scale, const HostLaunchDims& dims, long long n,
                     std::mt19937& rng) {
  const std::vector<float> in = random_floats(static_cast<size_t>(n), rng);
  std::vector<float> out(static_cast<size_t>(n), std::nanf(""));
  std::vector<int> visits(static_cast<size_t>(n), 0);
  KernelParams params{};
  params.in[0].ptr = const_cast<float*>(in.data());
  params.out[0].ptr = out.data();
  params.out[1].ptr = visits.data();
  params.num_tokens = n;
  module.launch(dims, params);
  const long long threads_per_block = 1ll * dims.block_x * dims.block_y * dims.block_z;
  for (long long i = 0; i < n; ++i) {
    const long long block_x = (i / threads_per_block) % dims.grid_x;
    const float expected = std::fma(in[i], scale, static_cast<float>(block_x));
    ASSERT_EQ(visits[i], 1) << "element " << i;
    ASSERT_EQ(out[i], expected) << "element " << i;
  }
}

TEST(HostJit, ThreeDimensionalGridOfThreeDimensionalBlocks) {
  SKIP_WITHOUT_HOST_BACKEND();
  auto rng = seeded_rng();
  auto module = HostModule::compile(scale_add_source(2.0f), "scale_add");
  std::printf("[host_jit] scale_add compile %.1f ms\n", module->compile_ms());
  HostLaunchDims dims;
  dims.grid_x = 5, dims.grid_y = 3, dims.grid_z = 2;
  dims.block_x = 8, dims.block_y = 4, dims.block_z = 2;
  check_scale_add(*module, 2.0f, dims, 30 * 64 - 37, rng);  // last block partly idle
}

TEST(HostJit, LargeGridSpreadsOverWorkerThreads) {
  SKIP_WITHOUT_HOST_BACKEND();
  auto rng = seeded_rng();
  auto module = HostModule::compile(scale_add_source(-1.5f), "scale_add");
  HostLaunchDims dims;
  dims.grid_x = 997, dims.grid_y = 3;
  dims.block_x = 128;
  check_scale_add(*module, -1.5f, dims, 997ll * 3 * 128, rng);
  const auto start = std::chrono::steady_clock::now();
  check_scale_add(*module, -1.5f, dims, 997ll * 3 * 128 - 5, rng);
  std::printf(
      "[host_jit] %lld threads launched and checked in %.1f ms\n", 997ll * 3 * 128,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

TEST(HostJit, CompileErrorCarriesClangLogWithLine) {
  SKIP_WITHOUT_HOST_BACKEND();
  const std::string source =
      "#include \"ropejit/params.cuh\"\n"
      "extern \"C\" __global__ void broken(ropejit::KernelParams p) {\n"
      "  float* out = static_cast<float*>(p.out[0].ptr);\n"
      "  out[0] = undeclared_thing;\n"
      "}\n";
  try {
    HostModule::compile(source, "broken");
    FAIL() << "compile succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::compile_error);
    EXPECT_NE(e.log().find("kernel.cpp:4:"), std::string::npos) << e.log();
    EXPECT_NE(e.log().find("undeclared_thing"), std::string::npos) << e.log();
    EXPECT_NE(std::string(e.what()).find("undeclared_thing"), std::string::npos) << e.what();
  }
}

TEST(HostJit, MissingEntryIsACompileError) {
  SKIP_WITHOUT_HOST_BACKEND();
  try {
    HostModule::compile(scale_add_source(2.0f), "no_such_kernel");
    FAIL() << "compile succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::compile_error);
    EXPECT_NE(e.log().find("no_such_kernel"), std::string::npos) << e.log();
  }
}

TEST(HostJit, RejectsBadEntryNameAndEmptyGrid) {
  SKIP_WITHOUT_HOST_BACKEND();
  try {
    HostModule::compile(scale_add_source(2.0f), "scale add");
    FAIL() << "compile succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::invalid_argument);
  }
  auto module = HostModule::compile(scale_add_source(2.0f), "scale_add");
  HostLaunchDims dims;
  dims.grid_y = 0;
  KernelParams params{};
  try {
    module->launch(dims, params);
    FAIL() << "launch succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::invalid_argument);
  }
}

TEST(HostJit, TwoModulesWithTheSameEntryLiveAtOnce) {
  SKIP_WITHOUT_HOST_BACKEND();
  auto rng = seeded_rng();
  auto first = HostModule::compile(scale_add_source(3.0f), "scale_add");
  auto second = HostModule::compile(scale_add_source(-0.25f), "scale_add");
  HostLaunchDims dims;
  dims.grid_x = 7, dims.block_x = 32, dims.block_y = 2;
  check_scale_add(*first, 3.0f, dims, 7 * 64, rng);
  check_scale_add(*second, -0.25f, dims, 7 * 64, rng);
  second.reset();
  check_scale_add(*first, 3.0f, dims, 7 * 64 - 1, rng);
}

TEST(HostJit, CompilesFromTwoThreadsAtOnce) {
  SKIP_WITHOUT_HOST_BACKEND();
  const float scales[2] = {1.25f, 7.0f};
  std::unique_ptr<HostModule> modules[2];
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      try {
        modules[t] = HostModule::compile(scale_add_source(scales[t]), "scale_add");
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  auto rng = seeded_rng();
  HostLaunchDims dims;
  dims.grid_x = 40, dims.block_x = 64;
  for (int t = 0; t < 2; ++t) {
    ASSERT_TRUE(modules[t]) << errors[t];
    std::printf("[host_jit] concurrent compile %d: %.1f ms\n", t, modules[t]->compile_ms());
    check_scale_add(*modules[t], scales[t], dims, 40 * 64, rng);
  }
}

// Shim coverage: 16-byte vector loads and stores, bit casts, and the C math the templates use
// (rint, fma, exp2, fmaf, __fmul_rn), against the same functions on the host.
TEST(HostJit, ShimVectorTypesAndMathMatchTheHost) {
  SKIP_WITHOUT_HOST_BACKEND();
  const std::string source = R"(#include "ropejit/params.cuh"
__device__ const float kInvFreq[4] = {1.0f, 0.1f, 0.01f, 0.001f};
extern "C" __global__ void vec_rotate(ropejit::KernelParams p) {
  const ropejit::i64 t = (ropejit::i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= p.num_tokens) return;
  const int pos = static_cast<const int*>(p.positions)[t];
  const uint4 w = __ldg(reinterpret_cast<const uint4*>(p.in[0].ptr) + t);
  const float x[4] = {__uint_as_float(w.x), __uint_as_float(w.y), __uint_as_float(w.z), __uint_as_float(w.w)};
  float c[2], s[2];
  for (int i = 0; i < 2; ++i) {
    const float angle = __fmul_rn((float)pos, kInvFreq[i]);
    const double r = fma(-rint((double)angle), 1.0, (double)angle);  // in [-0.5, 0.5]
    c[i] = (float)exp2(r);
    s[i] = (float)exp2(-r);
  }
  const float y[4] = {fmaf(x[0], c[0], -(x[1] * s[0])), fmaf(x[1], c[0], x[0] * s[0]),
                      fmaf(x[2], c[1], -(x[3] * s[1])), fmaf(x[3], c[1], x[2] * s[1])};
  reinterpret_cast<uint4*>(p.out[0].ptr)[t] =
      make_uint4(__float_as_uint(y[0]), __float_as_uint(y[1]), __float_as_uint(y[2]), __float_as_uint(y[3]));
  reinterpret_cast<uint2*>(p.out[1].ptr)[t] = make_uint2(__float_as_uint(y[0]), (unsigned)(int)rint((double)y[1]));
}
)";
  auto module = HostModule::compile(source, "vec_rotate");
  std::printf("[host_jit] vec_rotate compile %.1f ms\n", module->compile_ms());
  auto rng = seeded_rng();
  const long long n = 1000;
  std::vector<float> in = random_floats(4 * n, rng);
  std::vector<int> positions(n);
  std::uniform_int_distribution<int> pos_dist(0, 1 << 20);
  for (int& pos : positions) pos = pos_dist(rng);
  std::vector<float> out(4 * n, std::nanf(""));  // operator new aligns to 16
  std::vector<uint32_t> bits(2 * n, 0xdeadbeef);
  KernelParams params{};
  params.in[0].ptr = in.data();
  params.out[0].ptr = out.data();
  params.out[1].ptr = bits.data();
  params.positions = positions.data();
  params.num_tokens = n;
  HostLaunchDims dims;
  dims.grid_x = (n + 127) / 128, dims.block_x = 128;
  module->launch(dims, params);
  const float inv_freq[2] = {1.0f, 0.1f};
  for (long long t = 0; t < n; ++t) {
    float c[2], s[2];
    for (int i = 0; i < 2; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      const double r = std::fma(-std::rint(static_cast<double>(angle)), 1.0, static_cast<double>(angle));
      c[i] = static_cast<float>(std::exp2(r));
      s[i] = static_cast<float>(std::exp2(-r));
    }
    const float* x = &in[4 * t];
    const float y[4] = {std::fma(x[0], c[0], -(x[1] * s[0])), std::fma(x[1], c[0], x[0] * s[0]),
                        std::fma(x[2], c[1], -(x[3] * s[1])), std::fma(x[3], c[1], x[2] * s[1])};
    for (int e = 0; e < 4; ++e) ASSERT_EQ(out[4 * t + e], y[e]) << "token " << t << " lane " << e;
    uint32_t y0_bits;
    std::memcpy(&y0_bits, &y[0], 4);
    ASSERT_EQ(bits[2 * t], y0_bits);
    ASSERT_EQ(static_cast<int>(bits[2 * t + 1]), static_cast<int>(std::rint(static_cast<double>(y[1]))));
  }
}

// ---- generated kernels (generator + real templates) against the float64 reference ----

/// Random storage bytes of `dtype` for n elements with values in [-4, 4).
std::vector<uint8_t> random_storage(DType dtype, size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  const size_t width = dtype == DType::fp32 ? 4 : 2;
  std::vector<uint8_t> bytes(n * width);
  for (size_t i = 0; i < n; ++i) {
    const float f = dist(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (dtype == DType::fp32) {
      std::memcpy(&bytes[4 * i], &bits, 4);
    } else {
      // bf16: the top half; fp16: a random finite half in [-2, 2) (exponent <= 15).
      const uint16_t half = dtype == DType::bf16
                                ? static_cast<uint16_t>(bits >> 16)
                                : static_cast<uint16_t>((bits & 0x83ffu) | ((rng() % 16) << 10));
      std::memcpy(&bytes[2 * i], &half, 2);
    }
  }
  return bytes;
}

/// Generates, host-compiles and runs one spec over T tokens with explicit random positions
/// (separate q/k input, in place), then checks q and k against ref::reference_outputs.
void check_generated_kernel(const std::string& spec_json, int64_t num_tokens, std::mt19937& rng) {
  const Spec spec = parse_spec(spec_json);
  const Config config = default_config(spec);
  const Source source = generate_source(make_plan(spec, config));
  auto module = HostModule::compile(source.text, source.entry);
  std::printf("[host_jit] %s (%s) compile %.1f ms\n", spec.name.c_str(),
              config_name(config).c_str(), module->compile_ms());

  const int D = spec.head_dim, Hq = spec.num_q_heads, Hkv = spec.num_kv_heads;
  std::vector<uint8_t> q = random_storage(spec.dtype, size_t(num_tokens) * Hq * D, rng);
  std::vector<uint8_t> k = random_storage(spec.dtype, size_t(num_tokens) * Hkv * D, rng);
  const std::vector<uint8_t> q_in = q, k_in = k;
  std::vector<int64_t> positions(num_tokens);
  std::uniform_int_distribution<int64_t> pos_dist(0, spec.max_position_embeddings - 1);
  for (int64_t& pos : positions) pos = pos_dist(rng);

  KernelParams params{};
  params.in[kRoleQ] = {q.data(), int64_t(Hq) * D, D, 0};
  params.in[kRoleK] = {k.data(), int64_t(Hkv) * D, D, 0};
  params.out[kRoleQ] = params.in[kRoleQ];
  params.out[kRoleK] = params.in[kRoleK];
  params.positions = positions.data();
  params.positions_are_int64 = 1;
  params.num_tokens = num_tokens;
  const LaunchDims launch = launch_dims(spec, config, num_tokens, 2);
  HostLaunchDims dims;
  dims.grid_x = launch.grid;
  dims.block_x = launch.block;
  module->launch(dims, params);

  ref::RefProblem problem;
  problem.num_tokens = num_tokens;
  problem.q.data = q_in.data();
  problem.k.data = k_in.data();
  problem.positions = positions;
  const ref::RefOutputs expected = ref::reference_outputs(spec, problem);
  const std::pair<const char*, const std::vector<uint8_t>*> outputs[] = {{"q", &q}, {"k", &k}};
  for (const auto& [name, bytes] : outputs) {
    const ref::RefTensor* tensor = expected.find(name);
    ASSERT_NE(tensor, nullptr) << name;
    ref::ActualTensor actual;
    actual.data = bytes->data();
    const ref::CheckResult result = ref::compare(spec, *tensor, actual);
    EXPECT_TRUE(result.ok()) << spec.name << " " << name << ": " << result.summary();
  }
}

TEST(HostJit, GeneratedLlama3Bf16KernelMatchesReference) {
  SKIP_WITHOUT_HOST_BACKEND();
  auto rng = seeded_rng();
  check_generated_kernel(R"({
    "name": "llama3-small", "head_dim": 128, "num_q_heads": 4, "num_kv_heads": 2,
    "layout": "neox", "dtype": "bf16", "max_position_embeddings": 131072,
    "rope": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
             "original_max_position_embeddings": 8192}})",
                         53, rng);
}

TEST(HostJit, GeneratedInterleavedFp32AndPartialFp16KernelsMatchReference) {
  SKIP_WITHOUT_HOST_BACKEND();
  auto rng = seeded_rng();
  check_generated_kernel(R"({
    "name": "gptj-like", "head_dim": 64, "rotary_dim": 32, "num_q_heads": 3, "num_kv_heads": 3,
    "layout": "interleaved", "dtype": "fp32", "max_position_embeddings": 2048,
    "rope": {"rope_type": "default", "rope_theta": 10000.0}})",
                         29, rng);
  check_generated_kernel(R"({
    "name": "neox-partial-fp16", "head_dim": 80, "rotary_dim": 40, "num_q_heads": 2,
    "num_kv_heads": 1, "layout": "neox", "dtype": "fp16", "max_position_embeddings": 4096,
    "rope": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}})",
                         31, rng);
}

}  // namespace
}  // namespace ropejit
