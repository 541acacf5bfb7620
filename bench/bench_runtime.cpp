// Runtime benchmarks (issue 3): memory-cache hit, disk-cache hit to a loaded kernel, host
// backend compile, host backend throughput. GPU-only parts skip with a visible message.
#include <benchmark/benchmark.h>

#include "support/repo_paths.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ropejit/internal/backend.h"
#include "ropejit/internal/host_jit.h"
#include "ropejit/internal/memory_cache.h"
#include "ropejit/cache.h"
#include "ropejit/runtime.h"

namespace {

ropejit::Spec load(const char* name) {
  return ropejit::load_spec_file(ropejit::test::spec_path(name));
}

ropejit::Source llama_source() {
  const ropejit::Spec spec = load("llama-3.1-8b");
  return ropejit::generate_source(ropejit::make_plan(spec, ropejit::default_config(spec)));
}

// A host-backend runtime, or nullptr after marking the benchmark SKIPPED (built without it).
std::unique_ptr<ropejit::Runtime> host_runtime_or_skip(benchmark::State& state) {
  if (!ropejit::host_backend_available()) {
    state.SkipWithError("SKIPPED: built without the host backend");
    return nullptr;
  }
  ropejit::RuntimeOptions o;
  o.backend = ropejit::BackendKind::host;
  return std::make_unique<ropejit::Runtime>(o);
}

// The lookup a get() of an already-loaded kernel does per module.
void BM_MemoryCacheHit(benchmark::State& state) {
  ropejit::MemoryCache<int> cache;
  const ropejit::Source source = llama_source();
  const ropejit::MemoryCacheKey key{source.hash, "cuda", "sm_90"};
  cache.get_or_create(key, [] { return std::make_shared<int>(1); });
  for (auto _ : state) benchmark::DoNotOptimize(cache.find(key));
}
BENCHMARK(BM_MemoryCacheHit)->Unit(benchmark::kNanosecond);

// A whole Runtime::get of a spec whose kernels are loaded: plan + source + hash per bucket.
void BM_RuntimeGetLoaded(benchmark::State& state) {
  const auto runtime_ptr = host_runtime_or_skip(state);
  if (!runtime_ptr) return;
  ropejit::Runtime& runtime = *runtime_ptr;
  const ropejit::Spec spec = load("llama-3.1-8b");
  runtime.get(spec);
  for (auto _ : state) benchmark::DoNotOptimize(runtime.get(spec));
}
BENCHMARK(BM_RuntimeGetLoaded)->Unit(benchmark::kMicrosecond);

// Disk hit: read + verify + deserialize a cached CUBIN (the driver's module load excluded).
void BM_DiskCacheHitToBinary(benchmark::State& state) {
  const std::string dir = (std::filesystem::temp_directory_path() / "ropejit-bench-cache").string();
  ropejit::DiskCacheOptions options;
  options.dir = dir;
  ropejit::DiskCache disk(options);
  const ropejit::Source source = llama_source();
  const ropejit::Binary binary = ropejit::compile_nvrtc(source, "sm_90");
  const ropejit::CacheKey key{source.hash.hex(), "bench", "sm_90", ropejit::nvrtc_version(), ropejit::version(), "cuda"};
  disk.store(key, ropejit::serialize_binary(binary));
  for (auto _ : state) {
    auto payload = disk.load(key);
    benchmark::DoNotOptimize(ropejit::deserialize_binary(*payload));
  }
  state.SetLabel(std::to_string(binary.image.size()) + " byte CUBIN");
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_DiskCacheHitToBinary)->Unit(benchmark::kMicrosecond);

// Disk hit to a loaded module on the GPU (after driver init).
void BM_DiskCacheHitToLoadedKernelCuda(benchmark::State& state) {
  if (!ropejit::cuda_available()) {
    state.SkipWithError("SKIPPED: no usable GPU");
    return;
  }
  const std::string dir = (std::filesystem::temp_directory_path() / "ropejit-bench-cache-cuda").string();
  ropejit::DiskCacheOptions options;
  options.dir = dir;
  ropejit::DiskCache disk(options);
  auto backend = ropejit::make_cuda_backend(0, "");
  const ropejit::Source source = llama_source();
  backend->load(source, &disk);  // compile + store
  for (auto _ : state) benchmark::DoNotOptimize(backend->load(source, &disk));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_DiskCacheHitToLoadedKernelCuda)->Unit(benchmark::kMillisecond);

void BM_HostCompile(benchmark::State& state) {
  if (!host_runtime_or_skip(state)) return;
  const ropejit::Source source = llama_source();
  for (auto _ : state) benchmark::DoNotOptimize(ropejit::HostModule::compile(source.text, source.entry));
}
BENCHMARK(BM_HostCompile)->Unit(benchmark::kMillisecond)->Iterations(3)->Repetitions(5)->ReportAggregatesOnly(true);

// Host backend throughput on Llama-3.1-8B (bf16, 32/8 heads), in-place q/k rotation.
void BM_HostThroughput(benchmark::State& state) {
  const auto runtime_ptr = host_runtime_or_skip(state);
  if (!runtime_ptr) return;
  ropejit::Runtime& runtime = *runtime_ptr;
  const ropejit::Spec spec = load("llama-3.1-8b");
  const ropejit::Kernel kernel = runtime.get(spec);
  const int64_t tokens = state.range(0);
  std::vector<uint16_t> q(tokens * 32 * 128, 0x3f80), k(tokens * 8 * 128, 0x3f00);
  std::vector<int32_t> positions(tokens);
  for (int64_t t = 0; t < tokens; ++t) positions[t] = static_cast<int32_t>((t * 7919) % 131072);
  ropejit::Args args;
  args.num_tokens = tokens;
  args.q = q.data();
  args.k = k.data();
  args.positions = positions.data();
  for (auto _ : state) kernel.launch(args);
  const int64_t bytes = ropejit::bytes_moved(spec, tokens, 0, 0);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["tokens/s"] = benchmark::Counter(double(tokens) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_HostThroughput)->Arg(1)->Arg(64)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
