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
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend.h"
#include "cuda_driver.h"
#include "ropejit/runtime.h"
#include "ropejit/check/fp_convert.h"
#include "ropejit/check/harness.h"

namespace {

using namespace ropejit;

/// The shapes, as spec files in specs/ (dtype replaced per run).
struct Shape {
  const char* label;      ///< row label in the output
  const char* spec_file;  ///< specs/<name>.json
};
constexpr Shape kShapes[] = {
    {"llama-3.1-8b", "llama-3.1-8b"},           // 32/8 heads, 128, llama3 scaling
    {"qwen2.5-7b-fused", "qwen2.5-7b"},         // packed qkv + bias + copy v, in place
    {"qwen2.5-7b-padded", "qwen2.5-7b-padded"}, // packed qkv + bias -> padded [B, H, S, D], varlen
    {"mistral-7b", "mistral-7b-v0.1"},          // 32/8, 128, default
    {"deepseek-v3-rope", "deepseek-v3"},        // 128 heads x 64, interleaved, yarn
    {"gpt-neox-20b", "gpt-neox-20b"},           // partial: 24 of 96
    {"gemma-2", "gemma-2-2b"},                  // head_dim 256
};
constexpr int64_t kTokens[] = {1, 8, 64, 512, 4096, 16384, 65536};
constexpr const char* kDTypes[] = {"bf16", "fp16"};

constexpr int64_t kMaxPosition = 1000000;          // positions drawn from [0, 10^6)
constexpr int64_t kVerifyElements = int64_t(1) << 22;  // reference cost cap per verification
constexpr int64_t kMinRotationBytes = int64_t(256) << 20;
constexpr int64_t kAlign = 256;

int64_t align_up(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

Spec load_variant(const char* spec_file, const char* dtype) {
  const std::string path = ropejit::test::spec_path(spec_file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str());
  j["dtype"] = dtype;
  j["name"] = std::string(spec_file) + "-" + dtype;
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

/// One rotation set of device buffers for one launch, carved out of a pool.
struct LaunchSet {
  Args args;
};

/// Device buffers for `sets` independent launches of (spec, tokens), filled with random data.
class RotatingBuffers {
 public:
  RotatingBuffers(Backend& backend, const Spec& spec, int64_t tokens, int64_t min_total_bytes)
      : backend_(backend) {
    const int64_t T = tokens, D = spec.head_dim, Hq = spec.num_q_heads, Hkv = spec.num_kv_heads;
    const int64_t es = dtype_size(spec.dtype);
    const bool packed = spec.io.input == InputForm::packed_qkv;
    const bool varlen = spec.io.positions == PositionsForm::varlen;
    const bool padded = spec.io.output == OutputForm::padded_bhsd;
    batch_ = varlen ? batch_for(T) : 0;
    const int64_t seq = varlen ? (T + batch_ - 1) / batch_ : 0;
    max_seq_len_ = padded ? std::max<int64_t>(seq, 1) : 0;

    // Layout of one set: (offset, bytes, kind) regions; kind 0 data, 1 positions, 2 output.
    std::vector<int64_t> sizes;
    auto region = [&](int64_t bytes) {
      sizes.push_back(align_up(std::max<int64_t>(bytes, 16)));
      return static_cast<int>(sizes.size()) - 1;
    };
    const int q = packed ? region(T * (Hq + 2 * Hkv) * D * es) : region(T * Hq * D * es);
    const int k = packed ? -1 : region(T * Hkv * D * es);
    const int v = (!packed && spec.io.copy_v) ? region(T * Hkv * D * es) : -1;
    const int bias = spec.io.qkv_bias ? region((Hq + 2 * Hkv) * D * es) : -1;
    const int pos = varlen ? region((batch_ + 1) * 4) : region(T * 4);
    const int start = varlen ? region(batch_ * 8) : -1;
    const bool separate_out = spec.io.output != OutputForm::inplace;
    const int64_t out_rows = padded ? batch_ * max_seq_len_ : T;
    const int qo = separate_out ? region(out_rows * Hq * D * es) : -1;
    const int ko = separate_out ? region(out_rows * Hkv * D * es) : -1;
    const int vo = separate_out && spec.io.copy_v ? region(out_rows * Hkv * D * es) : -1;
    int64_t set_bytes = 0;
    std::vector<int64_t> offsets;
    for (int64_t s : sizes) offsets.push_back(set_bytes), set_bytes += s;
    const int sets = static_cast<int>(std::max<int64_t>(2, (min_total_bytes + set_bytes - 1) / set_bytes));
    total_bytes_ = set_bytes * sets;
    pool_ = static_cast<uint8_t*>(backend.alloc(static_cast<size_t>(total_bytes_)));

    // One set's contents on the host (random storage values tiled over the data regions,
    // positions in [0, 10^6)), replicated into chunks of about 64 MiB for few large copies.
    std::mt19937_64 rng(std::random_device{}());
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> values(1 << 18);
    for (auto& x : values) x = normal(rng);
    const std::vector<uint8_t> tile = ref::encode_values(spec.dtype, values);
    std::vector<uint8_t> image(static_cast<size_t>(set_bytes));
    for (int r : {q, k, v, bias})
      for (int64_t at = 0; r >= 0 && at < sizes[r]; at += static_cast<int64_t>(tile.size()))
        std::memcpy(image.data() + offsets[r] + at, tile.data(),
                    static_cast<size_t>(std::min<int64_t>(tile.size(), sizes[r] - at)));
    auto put = [&](int r, const void* data, size_t bytes) { std::memcpy(image.data() + offsets[r], data, bytes); };
    if (varlen) {
      std::vector<int32_t> cu(batch_ + 1);
      std::vector<int64_t> start_pos(batch_);
      for (int b = 0; b <= batch_; ++b) cu[b] = static_cast<int32_t>(std::min<int64_t>(T, b * seq));
      for (int b = 0; b < batch_; ++b)
        start_pos[b] = std::uniform_int_distribution<int64_t>(0, kMaxPosition - seq)(rng);
      put(pos, cu.data(), cu.size() * 4);
      put(start, start_pos.data(), start_pos.size() * 8);
    } else {
      std::vector<int32_t> p(static_cast<size_t>(T));
      std::uniform_int_distribution<int32_t> position(0, kMaxPosition - 1);
      for (auto& x : p) x = position(rng);
      put(pos, p.data(), p.size() * 4);
    }
    const int per_chunk = static_cast<int>(std::clamp<int64_t>((int64_t(64) << 20) / set_bytes, 1, sets));
    std::vector<uint8_t> chunk;
    if (per_chunk > 1) {
      chunk.resize(static_cast<size_t>(set_bytes * per_chunk));
      for (int i = 0; i < per_chunk; ++i) std::memcpy(chunk.data() + i * set_bytes, image.data(), image.size());
    } else {
      chunk.swap(image);  // one set per copy: no second host image of a multi-GB set
    }
    for (int s = 0; s < sets; s += per_chunk)
      backend.copy_to_device(pool_ + s * set_bytes, chunk.data(),
                             static_cast<size_t>(std::min(per_chunk, sets - s) * set_bytes));
    for (int s = 0; s < sets; ++s) {
      uint8_t* base = pool_ + s * set_bytes;
      auto at = [&](int r) -> uint8_t* { return r < 0 ? nullptr : base + offsets[r]; };
      Args a;
      a.num_tokens = T;
      (packed ? a.qkv : a.q) = at(q);
      a.k = at(k);
      a.v = at(v);
      a.bias = at(bias);
      a.q_out = at(qo);
      a.k_out = at(ko);
      a.v_out = at(vo);
      if (varlen) {
        a.cu_seqlens = reinterpret_cast<const int32_t*>(at(pos));
        a.start_pos = reinterpret_cast<const int64_t*>(at(start));
        a.batch = batch_;
        a.max_seq_len = static_cast<int>(max_seq_len_);
        a.seq_len = kMaxPosition;
      } else {
        a.positions = at(pos);
        a.seq_len = kMaxPosition;
      }
      sets_.push_back({a});
    }
    backend.synchronize();
  }
  ~RotatingBuffers() { backend_.free(pool_); }
  RotatingBuffers(const RotatingBuffers&) = delete;
  RotatingBuffers& operator=(const RotatingBuffers&) = delete;

  const Args& next() { return sets_[next_++ % sets_.size()].args; }
  int sets() const { return static_cast<int>(sets_.size()); }
  int64_t total_bytes() const { return total_bytes_; }
  int batch() const { return batch_; }
  int64_t max_seq_len() const { return max_seq_len_; }

 private:
  Backend& backend_;
  uint8_t* pool_ = nullptr;
  int64_t total_bytes_ = 0;
  int batch_ = 0;
  int64_t max_seq_len_ = 0;
  std::vector<LaunchSet> sets_;
  size_t next_ = 0;
};

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
  RotatingBuffers buffers(backend, spec, tokens, rotation);
  const int64_t bytes = bytes_moved(spec, tokens, buffers.batch(), buffers.max_seq_len());
  if (host_smoke()) {
    for (int i = 0; i < buffers.sets(); ++i) kernel.launch(buffers.next(), nullptr);  // launch checks each set
    state.SkipWithError(fmt::format("SKIPPED: host smoke run: verified, {} sets launched, {} bytes/launch, not timed",
                                    buffers.sets(), bytes).c_str());
    return;
  }
  const int repeats = tokens >= 16384 ? 30 : 200;
  auto launch = [&](void* stream) { kernel.launch(buffers.next(), stream); };
  for (int i = 0; i < 3; ++i) launch(nullptr);  // warm-up: module load, clocks
  std::vector<double> medians;
  for (auto _ : state) {
    const double us = backend.time_calls(launch, repeats);
    medians.push_back(us);
    state.SetIterationTime(us * 1e-6);
  }
  std::sort(medians.begin(), medians.end());
  const double us = medians[medians.size() / 2];
  state.counters["us"] = us;
  state.counters["GB/s"] = double(bytes) / (us * 1e3);
  state.counters["bytes"] = double(bytes);
  state.counters["sets"] = buffers.sets();
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
