// GPU benchmark of ropejit alone (issue 6): shapes × tokens × dtype on the cuda backend, timed
// with CUDA events (Backend::time_calls, median) over rotating input buffers larger than L2,
// GB/s from the exact byte accounting (bytes_moved), every configuration verified against
// the float64 reference (positions up to 10^6) before it is timed. Without a usable GPU every
// benchmark reports "SKIPPED: no usable GPU" (visible, never a silent pass).
// The peer comparison (PyTorch, torch.compile, FlashInfer, copy) is bench/peers.py.
#include <benchmark/benchmark.h>

#include "support/repo_paths.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ropejit/internal/backend.h"
#include "ropejit/internal/cuda_driver.h"
#include "ropejit/internal/device_workload.h"
#include "ropejit/runtime.h"
#include "ropejit/check/harness.h"

namespace {

using namespace ropejit;

/// The shapes, as spec files in specs/ (dtype replaced per run).
struct Shape {
  const char* label;      ///< row label in the output
  const char* spec_file;  ///< specs/<name>.json, or tests/data/<name>.json when it starts so
};
constexpr Shape kShapes[] = {
    {"llama-3.1-8b", "llama-3.1-8b"},           // 32/8 heads, 128, llama3 scaling
    {"llama-3.1-8b-fp8-q", "llama-3.1-8b-fp8-q"},  // ... q_out in FP8 e4m3 (static q_scale) for FP8 attention
    {"llama-3.1-8b-nvfp4", "llama-3.1-8b-nvfp4"},  // ... k and v appended to an NVFP4 cache (Blackwell)
    {"llama-3.1-8b-cos-sin-cache", "llama-3.1-8b-cos-sin-cache"},  // vLLM's / FlashInfer's call: the engine's cache
    {"qwen2.5-7b-fused", "qwen2.5-7b"},         // packed qkv + bias + copy v, in place
    {"qwen2.5-7b-padded", "qwen2.5-7b-padded"}, // packed qkv + bias -> padded [B, H, S, D], varlen
    {"mistral-7b", "mistral-7b-v0.1"},          // 32/8, 128, default
    {"deepseek-v3-rope", "deepseek-v3"},        // 128 heads x 64, interleaved, yarn
    {"gpt-neox-20b", "gpt-neox-20b"},           // partial: 24 of 96
    {"gemma-2", "gemma-2-2b"},                  // head_dim 256
    {"qwen2.5-vl-7b-mrope", "qwen2.5-vl-7b"},   // [3, T] mrope positions + packed qkv + bias
    {"qwen2.5-vl-7b-mrope-cos-sin-cache", "qwen2.5-vl-7b-mrope-cos-sin-cache"},  // vLLM's MRoPE: a row per pair's stream
    {"qwen3-8b-qknorm", "qwen3-8b"},            // per-head RMSNorm of q and k, then RoPE
    {"gemma-3-12b-qknorm", "gemma-3-12b"},      // head_dim 256, (1 + w) norm, linear x8
    {"olmo-2-7b-allnorm", "olmo-2-7b"},         // RMSNorm over all 32 q heads (and 32 k heads), then RoPE
    {"qwen3-8b-paged-fp8", "qwen3-8b-paged-fp8"},  // QK-norm + RoPE + k, v into an FP8 e4m3 paged cache
    {"phi-3.5-rerotate", "phi-3.5-mini-rerotate"},    // re-rotate cached keys: LongRoPE switch, HND, block tables
    {"llama-3.1-8b-shift-fp8", "llama-3.1-8b-context-shift"},  // re-rotate an FP8 e4m3 K cache: a context shift
    {"deepseek-v3-mla", "deepseek-v3-mla"},          // MLA: 128 q heads' rope part + [kv_c | k_pe] latent row
    {"deepseek-v3-mla-fp8", "deepseek-v3-mla-fp8"},  // ... into an FP8 e4m3 latent cache
    {"deepseek-v3-mla-ds", "deepseek-v3-mla-ds"},    // ... into vLLM's fp8_ds_mla rows (scales per 128 computed)
    {"deepseek-v3-mla-prefill", "deepseek-v3-mla-prefill"},  // ... and k [T, 128, 192] from k_nope + k_pe (concat_k)
    {"deepseek-v3-mla-absorbed", "deepseek-v3-mla-absorbed"},  // decode: q_out [T, 128, 512 + 64] from q_latent + q_pe
    {"deepseek-v4-main", "deepseek-v4-main"},        // 64 + 1 heads of 512, norm, trailing 64 rotated
    {"deepseek-v4-main-paged", "deepseek-v4-main-paged"},  // ... K = V appended to a paged cache once
    {"deepseek-v4-output", "deepseek-v4-output"},    // attention output's rope slice turned back
    {"deepseek-v4-indexer", "deepseek-v4-indexer"},  // indexer queries alone (rope_tensor): 64 heads of 128, trailing 64
    // V3.2's indexer as engines fuse it: k LayerNorm + RoPE (neox 64 of 128) + FP8 indexer cache, q FP8 per head
    // (not in specs/: the static model puts it over the gate; the GPU decides, docs/PERF.md)
    {"deepseek-v3.2-indexer", "tests/data/deepseek-v3.2-indexer"},
    {"flux-dev-1024", "flux-dev"},                   // 3 axes [8, 28, 28], QK-norm per head: 4096 + 512 tokens at 1024^2
    {"wan2.1-14b-720p", "wan2.1-14b"},               // 3 axes [22, 21, 21], QK-norm over 40 heads: 75600 tokens
    {"qwen2.5-vl-7b-vision", "qwen2.5-vl-7b-vision"},  // 2 axes [20, 20], head 80, packed qkv + bias
};
constexpr int64_t kTokens[] = {1, 8, 64, 512, 4096, 16384, 65536};
constexpr const char* kDTypes[] = {"bf16", "fp16"};

constexpr int64_t kMaxPosition = 1000000;          // positions drawn from [0, 10^6)
constexpr int64_t kVerifyElements = int64_t(1) << 22;  // reference cost cap per verification
constexpr int64_t kMinRotationBytes = int64_t(256) << 20;
constexpr int64_t kDistinctElements = int64_t(1) << 18;  // random values per buffer, repeated beyond

Spec load_variant(const char* spec_file, const char* dtype) {
  const std::string file = spec_file;
  const std::string data_prefix = "tests/data/";
  const bool data = file.rfind(data_prefix, 0) == 0;
  const std::string path = data ? ropejit::test::data_path(file.substr(data_prefix.size()) + ".json")
                                 : ropejit::test::spec_path(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str());
  j["dtype"] = dtype;
  j["name"] = (data ? file.substr(data_prefix.size()) : file) + "-" + dtype;
  return parse_spec(j.dump());
}

/// ROPEJIT_BENCH_GPU_ON_HOST=1: a smoke run of this program's buffers, launch arguments and
/// checks on the host backend (T <= 64, nothing timed), for machines without a GPU.
bool host_smoke() {
  static const bool on_host = std::getenv("ROPEJIT_BENCH_GPU_ON_HOST") != nullptr;
  return on_host;
}

/// The process's cuda runtime (host runtime in a smoke run), or null with the reason.
Runtime* bench_runtime(std::string* why) {
  static std::unique_ptr<Runtime> runtime;
  static std::string error;
  static bool tried = false;
  if (!tried) {
    tried = true;
    if (!host_smoke() && !cuda_available()) {
      error = "no usable GPU";
    } else {
      try {
        RuntimeOptions o;
        o.backend = host_smoke() ? BackendKind::host : BackendKind::cuda;
        // ROPEJIT_BENCH_PDL=1: every launch with programmatic dependent launch (sm_90+).
        const char* pdl = std::getenv("ROPEJIT_BENCH_PDL");
        o.programmatic_dependent_launch = pdl && std::string(pdl) == "1";
        runtime = std::make_unique<Runtime>(o);
      } catch (const std::exception& e) {
        error = std::string("no usable GPU: ") + e.what();
      }
    }
  }
  if (!runtime) *why = error;
  return runtime.get();
}

/// Sequences of the varlen forms: equal lengths of about 1024 tokens, S = the longest.
int batch_for(int64_t tokens) { return static_cast<int>(std::max<int64_t>(1, tokens / 1024)); }

/// Device buffers for at least two independent launches of (spec, tokens), together at least
/// `min_total_bytes`: random values (a block of them repeated), positions in [0, 10^6).
std::unique_ptr<DeviceWorkload> rotating_buffers(Backend& backend, const Spec& spec, int64_t tokens,
                                                 int64_t min_total_bytes) {
  WorkloadOptions o;
  o.tokens = tokens;
  o.batch = batch_for(tokens);
  o.sequence_tokens = (tokens + o.batch - 1) / o.batch;
  o.max_position = kMaxPosition;
  o.distinct_elements = kDistinctElements;
  o.seed = std::random_device{}();
  HostWorkload host = make_host_workload(spec, o);
  const int64_t set_bytes = std::max<int64_t>(1, DeviceWorkload::set_bytes(host));
  const int sets = static_cast<int>(std::max<int64_t>(2, (min_total_bytes + set_bytes - 1) / set_bytes));
  return std::make_unique<DeviceWorkload>(backend, std::move(host), sets);
}

/// Verifies (spec, the config used at `tokens`) once per process on random data, positions up
/// to 10^6, at min(tokens, the reference cost cap) tokens; returns "" or the failure.
std::string verify(Runtime& runtime, const Spec& spec, const Kernel& kernel, int64_t tokens) {
  static std::map<std::string, std::string> done;
  const Config& config = kernel.config_for(tokens);
  const int64_t row_elements = int64_t(spec.num_q_heads + 2 * spec.num_kv_heads) * spec.head_dim;
  const int64_t check_tokens = std::min<int64_t>(tokens, std::max<int64_t>(1, kVerifyElements / row_elements));
  const std::string key = fmt::format("{}/{}/{}", spec.name, config_name(config), check_tokens);
  if (auto it = done.find(key); it != done.end()) return it->second;
  std::string problem;
  try {
    const Kernel fixed = runtime.get(spec, config);  // the very config timed at `tokens`
    check::CaseOptions o;
    o.tokens = check_tokens;
    o.max_position = kMaxPosition;
    const check::CaseReport report = check::run_case(runtime, fixed, o);
    if (!report.ok()) problem = "conformance check FAILED: " + report.summary();
  } catch (const std::exception& e) {
    problem = std::string("conformance check FAILED: ") + e.what();
  }
  done[key] = problem;
  return problem;
}

void BM_Rope(benchmark::State& state, Shape shape, const char* dtype, int64_t tokens) {
  std::string why;
  Runtime* runtime = bench_runtime(&why);
  if (!runtime) {
    state.SkipWithError(("SKIPPED: " + why).c_str());
    return;
  }
  if (host_smoke() && tokens > 64) {
    state.SkipWithError("SKIPPED: host smoke run covers T <= 64");
    return;
  }
  Backend& backend = runtime_backend(*runtime);
  const Spec spec = load_variant(shape.spec_file, dtype);
  const Kernel kernel = runtime->get(spec);
  if (const std::string problem = verify(*runtime, spec, kernel, tokens); !problem.empty()) {
    state.SkipWithError(problem.c_str());
    return;
  }
  const int64_t rotation =
      host_smoke() ? int64_t(1) << 20 : std::max<int64_t>(3 * backend.properties().l2_bytes, kMinRotationBytes);
  const std::unique_ptr<DeviceWorkload> buffers = rotating_buffers(backend, spec, tokens, rotation);
  const int64_t bytes = buffers->host().bytes_moved();
  std::vector<Args> set_args;  // built before timing: a launch only picks the next set
  for (size_t i = 0; i < buffers->set_count(); ++i) set_args.push_back(buffers->args(i));
  const size_t sets = set_args.size();
  size_t next = 0;
  if (host_smoke()) {
    for (const Args& a : set_args) kernel.launch(a, nullptr);  // launch checks each set
    state.SkipWithError(fmt::format("SKIPPED: host smoke run: verified, {} sets launched, {} bytes/launch, not timed",
                                    sets, bytes).c_str());
    return;
  }
  const int repeats = tokens >= 16384 ? 30 : 200;
  // T <= 64: 20 launches back to back between the two events, the time per launch their mean: a
  // stream of decode launches, not one launch's round trip through two events (about 9 us on an
  // H200, 2026-11-28, whatever the kernel), and the only way PDL can overlap launches.
  const int batch = tokens <= 64 ? 20 : 1;
  auto launch = [&](void* stream) {
    for (int i = 0; i < batch; ++i) kernel.launch(set_args[next++ % sets], stream);
  };
  for (int i = 0; i < 3; ++i) launch(nullptr);  // warm-up: module load, clocks
  std::vector<double> medians;
  for (auto _ : state) {
    const double us = backend.time_calls(launch, repeats) / batch;
    medians.push_back(us);
    state.SetIterationTime(us * 1e-6);
  }
  std::sort(medians.begin(), medians.end());
  const double us = medians[medians.size() / 2];
  state.counters["us"] = us;
  state.counters["GB/s"] = double(bytes) / (us * 1e3);
  state.counters["bytes"] = double(bytes);
  state.counters["sets"] = double(sets);
  state.counters["batch"] = double(batch);
  state.SetLabel(config_name(kernel.config_for(tokens)));
}

/// The achievable ceiling: a device-to-device copy (cuMemcpyDtoD), GB/s counting bytes read
/// and written, as bytes_moved counts them.
void BM_CopyCeiling(benchmark::State& state) {
  std::string why;
  Runtime* runtime = host_smoke() ? nullptr : bench_runtime(&why);
  if (!runtime) {
    state.SkipWithError(("SKIPPED: " + (host_smoke() ? std::string("host smoke run") : why)).c_str());
    return;
  }
  Backend& backend = runtime_backend(*runtime);
  const CudaDriver& d = cuda_driver();
  const int64_t bytes = state.range(0);
  void* src = backend.alloc(static_cast<size_t>(bytes));
  void* dst = backend.alloc(static_cast<size_t>(bytes));
  auto copy = [&](void*) {
    d.check(d.cuMemcpyDtoD(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                           static_cast<size_t>(bytes)),
            "cuMemcpyDtoD");
  };
  backend.time_calls(copy, 3);
  double us = 0;
  for (auto _ : state) {
    us = backend.time_calls(copy, 20);
    state.SetIterationTime(us * 1e-6);
  }
  state.counters["us"] = us;
  state.counters["GB/s"] = 2.0 * double(bytes) / (us * 1e3);
  backend.free(src);
  backend.free(dst);
}

void register_all() {
  benchmark::RegisterBenchmark("copy_ceiling", BM_CopyCeiling)
      ->Arg(int64_t(256) << 20)
      ->Arg(int64_t(1) << 30)
      ->UseManualTime()
      ->Iterations(3)
      ->Unit(benchmark::kMicrosecond);
  for (const Shape& shape : kShapes)
    for (const char* dtype : kDTypes)
      for (int64_t tokens : kTokens)
        benchmark::RegisterBenchmark(fmt::format("rope/{}/{}/T:{}", shape.label, dtype, tokens).c_str(), BM_Rope, shape,
                                     dtype, tokens)
            ->UseManualTime()
            ->Iterations(3)
            ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
