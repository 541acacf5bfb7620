// The cuda backend (runtime/src/backends/cuda_backend.cpp) and the driver table it calls through
// (runtime/src/backends/cuda_driver.cpp). Without a usable driver: it says so
// clearly and never crashes (libcuda is dlopen'ed, not linked). With a GPU: memory round
// trips, NVRTC CUBIN and PTX modules launched on random data and checked against the float64
// reference, the disk cache hit path, event timing, driver error reporting, and Kernel::launch
// captured into a CUDA graph and replayed (cuda_graph.h).
// ropejit-tier: gpu
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "ropejit/internal/backend.h"
#include "ropejit/internal/cuda_driver.h"
#include "ropejit/internal/cuda_graph.h"
#include "launch/launch_args.h"  // private: check_launch gives the KernelParams the backend launches
#include "ropejit/cache.h"
#include "ropejit/runtime.h"
#include "ropejit/source.h"
#include "ropejit/fp_convert.h"
#include "ropejit/check/reference.h"

namespace ropejit {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "cuda backend: no usable GPU"

std::mt19937_64 seeded_rng() {
  const uint64_t seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("[cuda_backend] random seed %llu\n", static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

// Small Llama-like specs covering each storage type, both layouts, a pass-through tail and a
// scaled rope type.
const char* const kSpecs[] = {
    R"({"name":"cuda-fp32","head_dim":64,"num_q_heads":4,"num_kv_heads":2,"layout":"neox",
        "dtype":"fp32","max_position_embeddings":4096,"rope":{"rope_type":"default","rope_theta":10000}})",
    R"({"name":"cuda-bf16-llama3","head_dim":128,"num_q_heads":8,"num_kv_heads":2,"layout":"neox",
        "dtype":"bf16","max_position_embeddings":131072,
        "rope":{"rope_type":"llama3","rope_theta":500000.0,"factor":8.0,"low_freq_factor":1.0,
                "high_freq_factor":4.0,"original_max_position_embeddings":8192}})",
    R"({"name":"cuda-fp16-partial","head_dim":80,"rotary_dim":32,"num_q_heads":6,"num_kv_heads":6,
        "layout":"interleaved","dtype":"fp16","max_position_embeddings":2048,
        "rope":{"rope_type":"default","rope_theta":10000}})",
};

/// A spec's kernel source with the default config.
struct Compiled {
  Spec spec;
  Config config;
  Source source;
};

Compiled generate(const char* spec_json) {
  Compiled c;
  c.spec = parse_spec(spec_json);
  c.config = default_config(c.spec);
  c.source = generate_source(make_plan(c.spec, c.config));
  return c;
}

/// Device buffer freed on scope exit.
struct DeviceBuffer {
  Backend& backend;
  void* ptr;
  DeviceBuffer(Backend& b, size_t bytes) : backend(b), ptr(b.alloc(bytes)) {}
  ~DeviceBuffer() { backend.free(ptr); }
};

// Compares q and k read back after a launch with the float64 reference of the same inputs.
void expect_qk_match_reference(const Spec& spec, int64_t tokens, const std::vector<uint8_t>& q_in,
                               const std::vector<uint8_t>& k_in, const std::vector<int64_t>& positions,
                               const std::vector<uint8_t>& q_out, const std::vector<uint8_t>& k_out) {
  ref::RefProblem problem;
  problem.num_tokens = tokens;
  problem.q.data = q_in.data();
  problem.k.data = k_in.data();
  problem.positions = positions;
  const ref::RefOutputs expected = ref::reference_outputs(spec, problem);
  for (const auto& [name, actual] : {std::pair{"q", q_out.data()}, std::pair{"k", k_out.data()}}) {
    const ref::RefTensor* tensor = expected.find(name);
    ASSERT_NE(tensor, nullptr) << name;
    ref::ActualTensor got;
    got.data = actual;
    const ref::CheckResult result = ref::compare(spec, *tensor, got);
    EXPECT_TRUE(result.ok()) << spec.name << " " << tokens << " tokens, " << name << ": " << result.summary();
  }
}

/// Launches `module` over `num_tokens` random tokens (random positions) and compares q and k
/// with the float64 reference; returns the checked params' launch for timing.
void launch_and_check(Backend& backend, const LoadedModule& module, const Compiled& c, int64_t num_tokens,
                      std::mt19937_64& rng) {
  const Spec& spec = c.spec;
  const int64_t q_count = num_tokens * spec.num_q_heads * spec.head_dim;
  const int64_t k_count = num_tokens * spec.num_kv_heads * spec.head_dim;
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  std::vector<double> q_values(static_cast<size_t>(q_count)), k_values(static_cast<size_t>(k_count));
  for (double& x : q_values) x = value(rng);
  for (double& x : k_values) x = value(rng);
  const std::vector<uint8_t> q_host = ref::encode_values(spec.dtype, q_values);
  const std::vector<uint8_t> k_host = ref::encode_values(spec.dtype, k_values);
  std::uniform_int_distribution<int64_t> position(0, spec.max_position_embeddings - 1);
  std::vector<int64_t> positions(static_cast<size_t>(num_tokens));
  for (int64_t& p : positions) p = position(rng);
  positions.back() = spec.max_position_embeddings - 1;

  DeviceBuffer q(backend, q_host.size()), k(backend, k_host.size());
  DeviceBuffer pos(backend, positions.size() * sizeof(int64_t));
  backend.copy_to_device(q.ptr, q_host.data(), q_host.size());
  backend.copy_to_device(k.ptr, k_host.data(), k_host.size());
  backend.copy_to_device(pos.ptr, positions.data(), positions.size() * sizeof(int64_t));

  Args args;
  args.num_tokens = num_tokens;
  args.q = q.ptr;
  args.k = k.ptr;
  args.positions = pos.ptr;
  args.positions_type = PositionsType::int64;
  const CheckedLaunch checked = check_launch(spec, c.config.vec, args, backend.host_memory());
  const LaunchDims dims = launch_dims(spec, c.config, checked.rows, backend.sm_count());
  module.launch(dims, checked.params, nullptr);
  backend.synchronize();

  std::vector<uint8_t> q_out(q_host.size()), k_out(k_host.size());
  backend.copy_to_host(q_out.data(), q.ptr, q_out.size());
  backend.copy_to_host(k_out.data(), k.ptr, k_out.size());

  expect_qk_match_reference(spec, num_tokens, q_host, k_host, positions, q_out, k_out);
}

/// One launch's random q, k (in place) and int64 positions in backend memory, compared after the
/// launch with the float64 reference.
struct RopeCase {
  Backend& backend;
  const Spec& spec;
  int64_t tokens;
  std::vector<uint8_t> q_host, k_host;
  std::vector<int64_t> positions;
  DeviceBuffer q, k, pos;

  RopeCase(Backend& b, const Spec& s, int64_t t)
      : backend(b), spec(s), tokens(t),
        q(b, size_t(t) * s.num_q_heads * s.head_dim * dtype_size(s.dtype)),
        k(b, size_t(t) * s.num_kv_heads * s.head_dim * dtype_size(s.dtype)),
        pos(b, size_t(t) * sizeof(int64_t)) {}

  /// Fresh random inputs uploaded to the buffers (the previous outputs overwritten).
  void fill(std::mt19937_64& rng) {
    std::uniform_real_distribution<double> value(-4.0, 4.0);
    std::vector<double> q_values(size_t(tokens) * spec.num_q_heads * spec.head_dim);
    std::vector<double> k_values(size_t(tokens) * spec.num_kv_heads * spec.head_dim);
    for (double& x : q_values) x = value(rng);
    for (double& x : k_values) x = value(rng);
    q_host = ref::encode_values(spec.dtype, q_values);
    k_host = ref::encode_values(spec.dtype, k_values);
    std::uniform_int_distribution<int64_t> position(0, spec.max_position_embeddings - 1);
    positions.assign(size_t(tokens), 0);
    for (int64_t& p : positions) p = position(rng);
    positions.back() = spec.max_position_embeddings - 1;
    backend.copy_to_device(q.ptr, q_host.data(), q_host.size());
    backend.copy_to_device(k.ptr, k_host.data(), k_host.size());
    backend.copy_to_device(pos.ptr, positions.data(), positions.size() * sizeof(int64_t));
  }

  Args args() const {
    Args a;
    a.num_tokens = tokens;
    a.q = q.ptr;
    a.k = k.ptr;
    a.positions = pos.ptr;
    a.positions_type = PositionsType::int64;
    return a;
  }

  /// The q buffer as it is now.
  std::vector<uint8_t> read_q() const {
    std::vector<uint8_t> out(q_host.size());
    backend.copy_to_host(out.data(), q.ptr, out.size());
    return out;
  }

  /// q and k now hold the reference rotation of the inputs from the last fill().
  void expect_matches_reference() const {
    std::vector<uint8_t> k_out(k_host.size());
    backend.copy_to_host(k_out.data(), k.ptr, k_out.size());
    std::vector<uint8_t> q_out = read_q();
    expect_qk_match_reference(spec, tokens, q_host, k_host, positions, q_out, k_out);
  }
};

/// A fresh folder from mkdtemp, removed at scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ropejit-cuda-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

// ---------------------------------------------------------------- without a GPU

TEST(CudaBackend, UnusableDriverIsReportedNotFatal) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is usable here (the no-driver path runs on CPU-only machines)";
  EXPECT_FALSE(cuda_available());  // stable: the failed probe is remembered, not retried badly
  try {
    make_cuda_backend(0, "");
    FAIL() << "make_cuda_backend succeeded without a usable GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::backend_error) << e.what();
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("cuda backend: ", 0), 0u) << message;
    // One of: no libcuda.so.1, a driver whose cuInit fails (e.g. the toolkit's stub), no device.
    EXPECT_TRUE(message.find("libcuda.so.1") != std::string::npos || message.find("cuInit failed: CUDA_ERROR_") != std::string::npos ||
                message.find("no CUDA device") != std::string::npos)
        << message;
  }
}

TEST(CudaBackend, DriverIsLoadedOnceAndAgreesWithCudaAvailable) {
  // Loaded from several threads at once: one table, the same answer everywhere.
  std::vector<const CudaDriver*> seen(4, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&seen, i] { seen[i] = &cuda_driver(); });
  for (auto& t : threads) t.join();
  for (const CudaDriver* d : seen) EXPECT_EQ(d, &cuda_driver());
  const CudaDriver& d = cuda_driver();
  EXPECT_EQ(d.available(), cuda_available());
  EXPECT_EQ(d.available(), d.error.empty());
  if (d.available()) {
    EXPECT_GT(d.device_count, 0);
    EXPECT_GT(d.version, 0);
    EXPECT_NE(d.cuMemcpyDtoD, nullptr);
    EXPECT_NE(d.cuMemsetD8, nullptr);
  } else {
    EXPECT_TRUE(d.error.find("libcuda.so.1") != std::string::npos || d.error.find("cuInit failed: CUDA_ERROR_") == 0 ||
                d.error.find("no CUDA device") != std::string::npos)
        << d.error;
  }
}

TEST(CudaBackend, DriverCheckNamesTheCallTheCodeAndItsText) {
  // Works with or without a driver: the codes a missing driver returns are named built in.
  const CudaDriver& d = cuda_driver();
  EXPECT_NO_THROW(d.check(CUDA_SUCCESS, "cuInit"));
  for (const auto& [code, name] : {std::pair{CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
                                   std::pair{CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY"},
                                   std::pair{CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"}}) {
    try {
      d.check(code, "cuDeviceGetCount");
      ADD_FAILURE() << name << " did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Status::backend_error);
      const std::string message = e.what();
      EXPECT_EQ(message.rfind(std::string("cuDeviceGetCount failed: ") + name + ": ", 0), 0u) << message;
      EXPECT_GT(message.size(), std::string("cuDeviceGetCount failed: ").size() + std::strlen(name) + 2) << message;
      EXPECT_EQ(message.find("unknown error"), std::string::npos) << message;
    }
  }
}

// ---------------------------------------------------------------- with a GPU

TEST(CudaBackend, DescribesTheDevice) {
  SKIP_WITHOUT_GPU();
  auto backend = make_cuda_backend(0, "");
  EXPECT_EQ(backend->name(), "cuda");
  EXPECT_TRUE(std::regex_match(backend->arch(), std::regex(R"(sm_\d{2,3})"))) << backend->arch();
  EXPECT_GT(backend->sm_count(), 0);
  EXPECT_FALSE(backend->host_memory());
  std::printf("[cuda_backend] device 0: %s, %d SMs\n", backend->arch().c_str(), backend->sm_count());
  const DeviceProperties p = backend->properties();
  EXPECT_FALSE(p.name.empty());
  EXPECT_EQ(p.ordinal, 0);
  EXPECT_EQ(backend->arch(),
            "sm_" + std::to_string(p.compute_capability_major) + std::to_string(p.compute_capability_minor));
  EXPECT_EQ(p.sm_count, backend->sm_count());
  EXPECT_GT(p.l2_bytes, 0);
  EXPECT_EQ(p.driver_version, cuda_driver().version);
  EXPECT_GT(p.driver_version, 0);
  // The ordinal is the one opened, not guessed from the arch: the last device reports its own.
  const int last = cuda_driver().device_count - 1;
  EXPECT_EQ(make_cuda_backend(last, "")->properties().ordinal, last);
  EXPECT_EQ(make_cuda_backend(0, "sm_80")->arch(), "sm_80");

  for (const auto& [ordinal, arch] : {std::pair{-1, std::string()}, std::pair{4096, std::string()},
                                      std::pair{0, std::string("gfx90a")}}) {
    try {
      make_cuda_backend(ordinal, arch);
      ADD_FAILURE() << "ordinal " << ordinal << " arch " << arch << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Status::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find("is not allowed"), std::string::npos) << e.what();
    }
  }
}

TEST(CudaBackend, MemoryRoundTrip) {
  SKIP_WITHOUT_GPU();
  auto rng = seeded_rng();
  auto backend = make_cuda_backend(0, "");
  for (size_t bytes : {size_t(1), size_t(4093), size_t(3) << 20}) {
    std::vector<uint8_t> in(bytes), out(bytes, 0);
    for (auto& b : in) b = static_cast<uint8_t>(rng());
    out[0] = static_cast<uint8_t>(~in[0]);
    DeviceBuffer buffer(*backend, bytes);
    ASSERT_NE(buffer.ptr, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.ptr) % 256, 0u);
    backend->copy_to_device(buffer.ptr, in.data(), bytes);
    backend->copy_to_host(out.data(), buffer.ptr, bytes);
    EXPECT_EQ(std::memcmp(in.data(), out.data(), bytes), 0) << bytes << " bytes";
  }
  backend->free(nullptr);  // no-op
}

TEST(CudaBackend, CubinKernelsMatchTheFloat64Reference) {
  SKIP_WITHOUT_GPU();
  auto rng = seeded_rng();
  auto backend = make_cuda_backend(0, "");
  for (const char* spec_json : kSpecs) {
    const Compiled c = generate(spec_json);
    SCOPED_TRACE(c.spec.name);
    auto module = backend->load(c.source, nullptr);
    const Binary& binary = module->binary();
    EXPECT_FALSE(binary.is_ptx);
    EXPECT_EQ(binary.arch, backend->arch());
    EXPECT_EQ(binary.entry, c.source.entry);
    EXPECT_GT(binary.registers, 0);
    EXPECT_EQ(binary.spill_bytes, 0);
    EXPECT_FALSE(module->from_disk_cache());
    EXPECT_GT(module->load_ms(), 0.0);
    for (int64_t tokens : {int64_t(1), int64_t(7), int64_t(1000 + rng() % 3000)}) {
      SCOPED_TRACE(tokens);
      launch_and_check(*backend, *module, c, tokens, rng);
    }
  }
}

TEST(CudaBackend, PtxIsJitCompiledByTheDriver) {
  SKIP_WITHOUT_GPU();
  auto rng = seeded_rng();
  const std::string device_arch = make_cuda_backend(0, "")->arch();
  auto backend = make_cuda_backend(0, "compute_" + device_arch.substr(3));
  const Compiled c = generate(kSpecs[0]);
  auto module = backend->load(c.source, nullptr);
  EXPECT_TRUE(module->binary().is_ptx);
  EXPECT_EQ(module->binary().arch, "compute_" + device_arch.substr(3));
  EXPECT_NE(module->binary().image.find(".entry " + c.source.entry), std::string::npos);
  launch_and_check(*backend, *module, c, 333, rng);
}

TEST(CudaBackend, DiskCacheHitLoadsTheStoredCubin) {
  SKIP_WITHOUT_GPU();
  auto rng = seeded_rng();
  TempDir tmp;
  DiskCacheOptions options;
  options.dir = tmp.path;
  DiskCache cache(options);
  ASSERT_TRUE(cache.enabled());
  const Compiled c = generate(kSpecs[1]);

  auto first_backend = make_cuda_backend(0, "");
  auto compiled = first_backend->load(c.source, &cache);
  EXPECT_FALSE(compiled->from_disk_cache());
  EXPECT_EQ(cache.entry_count(), 1u);

  // A second backend (as a second process would) finds the entry and compiles nothing.
  auto second_backend = make_cuda_backend(0, "");
  auto cached = second_backend->load(c.source, &cache);
  EXPECT_TRUE(cached->from_disk_cache());
  EXPECT_EQ(cache.entry_count(), 1u);
  EXPECT_EQ(cached->binary().image, compiled->binary().image);
  EXPECT_EQ(cached->binary().registers, compiled->binary().registers);
  EXPECT_FALSE(cached->binary().is_ptx);
  std::printf("[cuda_backend] compile + load %.1f ms, disk hit + load %.1f ms\n", compiled->load_ms(),
              cached->load_ms());
  launch_and_check(*second_backend, *cached, c, 513, rng);

  // Another arch is another key: a miss and a new entry.
  auto sm80 = make_cuda_backend(0, "sm_80");
  if (sm80->arch() != first_backend->arch()) {
    const size_t entries = cache.entry_count();
    auto other = sm80->load(c.source, &cache);
    EXPECT_FALSE(other->from_disk_cache());
    EXPECT_GT(cache.entry_count(), entries);
  }
}

TEST(CudaBackend, CubinTheDeviceCannotRunFallsBackToPtx) {
  SKIP_WITHOUT_GPU();
  auto rng = seeded_rng();
  const std::string device_arch = make_cuda_backend(0, "")->arch();
  const int device_number = std::stoi(device_arch.substr(3));
  // SASS runs only within one major arch: an sm_80 CUBIN is rejected by sm_90+ GPUs, whose
  // driver can still JIT compute_80 PTX.
  if (device_number < 90) GTEST_SKIP() << "needs a GPU of sm_90 or newer (this is " << device_arch << ")";
  auto backend = make_cuda_backend(0, "sm_80");
  const Compiled c = generate(kSpecs[2]);
  TempDir tmp;
  DiskCacheOptions options;
  options.dir = tmp.path;
  DiskCache cache(options);
  auto module = backend->load(c.source, &cache);
  EXPECT_TRUE(module->binary().is_ptx);
  EXPECT_EQ(module->binary().arch, "compute_80");
  launch_and_check(*backend, *module, c, 77, rng);
  // The backend remembers: the next load goes to PTX directly and finds it on disk.
  auto again = backend->load(c.source, &cache);
  EXPECT_TRUE(again->binary().is_ptx);
  EXPECT_TRUE(again->from_disk_cache());
}

TEST(CudaBackend, TimesLaunchesWithEvents) {
  SKIP_WITHOUT_GPU();
  auto backend = make_cuda_backend(0, "");
  const Compiled c = generate(kSpecs[0]);
  auto module = backend->load(c.source, nullptr);
  const int64_t tokens = 4096;
  const size_t q_bytes = size_t(tokens) * c.spec.num_q_heads * c.spec.head_dim * 4;
  const size_t k_bytes = size_t(tokens) * c.spec.num_kv_heads * c.spec.head_dim * 4;
  DeviceBuffer q(*backend, q_bytes), k(*backend, k_bytes), pos(*backend, tokens * sizeof(int32_t));
  std::vector<int32_t> positions(tokens);
  for (int64_t t = 0; t < tokens; ++t) positions[t] = static_cast<int32_t>(t);
  std::vector<float> ones(q_bytes / 4, 1.0f);
  backend->copy_to_device(q.ptr, ones.data(), q_bytes);
  backend->copy_to_device(k.ptr, ones.data(), k_bytes);
  backend->copy_to_device(pos.ptr, positions.data(), positions.size() * sizeof(int32_t));
  Args args;
  args.num_tokens = tokens;
  args.q = q.ptr;
  args.k = k.ptr;
  args.positions = pos.ptr;
  const CheckedLaunch checked = check_launch(c.spec, c.config.vec, args, false);
  const LaunchDims dims = launch_dims(c.spec, c.config, checked.rows, backend->sm_count());
  const double us = backend->time_calls([&](void* stream) { module->launch(dims, checked.params, stream); }, 21);
  std::printf("[cuda_backend] %lld tokens: median %.2f us\n", static_cast<long long>(tokens), us);
  EXPECT_GT(us, 0.0);
  EXPECT_LT(us, 1e5);
  EXPECT_THROW(backend->time_calls([&](void* stream) { module->launch(dims, checked.params, stream); }, 0), Error);
}

TEST(CudaBackend, KernelLaunchIsCapturedIntoAGraphAndReplays) {
  if (!cuda_available()) GTEST_SKIP() << "SKIPPED: no usable GPU";
  auto rng = seeded_rng();
  RuntimeOptions options;
  options.backend = BackendKind::cuda;
  options.disk_cache = false;
  Runtime runtime(options);
  Backend& backend = runtime_backend(runtime);
  const Spec spec = parse_spec(kSpecs[1]);
  const Kernel kernel = runtime.get(spec, default_config(spec));
  // Decode sizes (the tuner's graph-timed buckets) and one prefill size: several buckets' modules.
  const std::vector<int64_t> token_counts = {1, int64_t(2 + rng() % 7), int64_t(9 + rng() % 56), 64,
                                             int64_t(300 + rng() % 700)};
  std::vector<std::unique_ptr<RopeCase>> cases;
  for (int64_t tokens : token_counts) {
    cases.push_back(std::make_unique<RopeCase>(backend, spec, tokens));
    cases.back()->fill(rng);
  }
  backend.synchronize();  // the uploads ran on the legacy stream, which the graph's stream does not wait for

  const CudaDriver& d = cuda_driver();
  CudaPrimaryContext context(d, backend.properties().ordinal);  // the context the runtime launches in
  CudaStream stream(d, context.ctx);
  // Thread-local capture fails on any allocation or synchronization inside Kernel::launch.
  CudaGraph graph(d, context.ctx, stream.get(), [&] {
    for (const auto& c : cases) kernel.launch(c->args(), stream.get());
  });
  EXPECT_EQ(graph.kernel_node_count(), cases.size());
  EXPECT_EQ(graph.node_count(), cases.size());
  // Capture records launches, it does not run them: the inputs are still as uploaded.
  for (const auto& c : cases) EXPECT_EQ(c->read_q(), c->q_host) << c->tokens << " tokens";

  for (int replay = 0; replay < 2; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    if (replay > 0) {
      // The graph holds the buffers' addresses: fresh contents there are what the next replay rotates.
      for (auto& c : cases) c->fill(rng);
      backend.synchronize();
    }
    graph.launch(stream.get());
    stream.synchronize();
    for (const auto& c : cases) c->expect_matches_reference();
  }

  // Replays time like launches: positive, and one replay of the whole graph is not free.
  CUevent start = nullptr, stop = nullptr;
  {
    CudaContextScope scope(d, context.ctx);
    d.check(d.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    d.check(d.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  }
  const double us = graph.time_replay_us(stream.get(), start, stop);
  std::printf("[cuda_backend] graph of %zu launches: %.2f us per replay\n", cases.size(), us);
  EXPECT_GT(us, 0.0);
  EXPECT_LT(us, 1e5);
  {
    CudaContextScope scope(d, context.ctx);
    d.cuEventDestroy(start);
    d.cuEventDestroy(stop);
  }

  // The default stream cannot be captured: refused with a clear error, not a driver crash.
  EXPECT_THROW(CudaGraph(d, context.ctx, nullptr, [] {}), Error);
}

// Two kernels chained in place on one stream, the second (a persistent grid sized by the
// occupancy query) reading the first's output: with programmatic dependent launch the result
// must be bit-identical to ordinary launches (a missing griddepcontrol.wait reads stale data).
TEST(CudaBackend, ProgrammaticDependentLaunchWaitsForThePreviousKernel) {
  SKIP_WITHOUT_GPU();
  const std::mt19937_64 inputs = seeded_rng();
  const Spec spec = parse_spec(kSpecs[1]);
  Config persistent = default_config(spec);
  persistent.grid = GridMode::persistent;
  std::vector<uint8_t> chained[2];
  for (int pdl = 0; pdl < 2; ++pdl) {
    RuntimeOptions options;
    options.backend = BackendKind::cuda;
    options.disk_cache = false;
    options.programmatic_dependent_launch = pdl == 1;
    Runtime runtime(options);
    Backend& backend = runtime_backend(runtime);
    if (backend.properties().compute_capability_major < 9)
      GTEST_SKIP() << "SKIPPED: programmatic dependent launch needs sm_90 or newer";
    const Kernel first = runtime.get(spec, default_config(spec)), second = runtime.get(spec, persistent);
    RopeCase c(backend, spec, 200000);  // long enough that a second grid racing ahead would show
    std::mt19937_64 rng = inputs;
    c.fill(rng);
    backend.synchronize();
    const CudaDriver& d = cuda_driver();
    CudaPrimaryContext context(d, backend.properties().ordinal);
    CudaStream stream(d, context.ctx);
    for (int round = 0; round < 3; ++round) {
      first.launch(c.args(), stream.get());
      second.launch(c.args(), stream.get());
    }
    stream.synchronize();
    chained[pdl] = c.read_q();
    EXPECT_NE(chained[pdl], c.q_host);
  }
  EXPECT_TRUE(chained[0] == chained[1]) << "programmatic dependent launch changed the chained result";
}

TEST(CudaBackend, DriverErrorsNameTheCallAndTheCode) {
  SKIP_WITHOUT_GPU();
  auto backend = make_cuda_backend(0, "");
  const Compiled c = generate(kSpecs[0]);
  auto module = backend->load(c.source, nullptr);
  KernelParams params{};
  LaunchDims dims;
  dims.grid = 1;
  dims.block = 4096;  // over the 1024-thread limit of every CUDA GPU
  try {
    module->launch(dims, params, nullptr);
    FAIL() << "a 4096-thread block launched";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::backend_error);
    EXPECT_NE(std::string(e.what()).find("cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE: "), std::string::npos)
        << e.what();
  }
  // The context is still usable after a rejected launch.
  backend->synchronize();
  DeviceBuffer buffer(*backend, 64);
}

}  // namespace
}  // namespace ropejit
