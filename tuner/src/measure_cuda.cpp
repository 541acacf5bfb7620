// The GPU Measurer: candidates compiled in parallel on the cuda backend, checked against the
// default config's output, timed with CUDA events over input sets rotated through more than
// 4x the L2 size so no launch reads what the previous one left in cache. Decode-size buckets
// time CUDA-graph replays, so the gaps between tiny launches do not dominate their time.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "ropejit/internal/backend.h"
#include "ropejit/internal/cuda_driver.h"
#include "ropejit/internal/cuda_graph.h"
#include "ropejit/internal/device_info.h"
#include "ropejit/internal/device_workload.h"
#include "ropejit/internal/kernel_variant.h"
#include "ropejit/cache.h"
#include "ropejit/parallel.h"
#include "ropejit/runtime.h"
#include "ropejit/source.h"
#include "ropejit/tuner.h"
#include "workload_data.h"

namespace ropejit {

namespace {

constexpr int kMaxInputSets = 1 << 20;
constexpr int kMaxLaunchesPerSample = 64;
constexpr int64_t kCheckTokens = 1024;
constexpr int64_t kTimingDistinctElements = int64_t(1) << 22;
constexpr int64_t kGraphMaxTokens = kBucketUpperBounds[2];  // decode-size buckets (1, 2-8, 9-64) replay graphs
constexpr int kGraphLaunches = 20;  // launches per graph, each on its own input set
constexpr int kMaxGraphs = 16;      // graphs per config, replayed in turn to rotate over more sets

class CudaMeasurer final : public Measurer {
 public:
  explicit CudaMeasurer(const CudaMeasurerOptions& o) : options_(o), d_(cuda_driver()) {
    backend_ = make_cuda_backend(o.device, "");  // throws, naming why, when the driver is unusable
    metadata_ = device_metadata(*backend_);
    if (o.disk_cache) {
      DiskCacheOptions disk_options;
      disk_options.dir = o.cache_dir;
      disk_ = std::make_unique<DiskCache>(disk_options);
    }
    // Events need a current context: the same primary context the backend launches in.
    context_ = std::make_unique<CudaPrimaryContext>(d_, backend_->properties().ordinal);
    CudaContextScope scope(d_, context_->ctx);
    d_.check(d_.cuEventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate");
    d_.check(d_.cuEventCreate(&stop_, CU_EVENT_DEFAULT), "cuEventCreate");
    graph_stream_ = std::make_unique<CudaStream>(d_, context_->ctx);
  }

  ~CudaMeasurer() override {
    graphs_.clear();
    graph_stream_.reset();
    timing_.reset();
    checking_.reset();
    try {
      CudaContextScope scope(d_, context_->ctx);
      d_.cuEventDestroy(start_);
      d_.cuEventDestroy(stop_);
    } catch (const Error&) {
      // At process exit the driver may already be deinitialized: the events go with it.
    }
    variants_.clear();
    modules_.clear();
    tables_.clear();
    backend_.reset();
    context_.reset();
  }

  std::vector<Prepared> prepare(const Spec& spec, const std::vector<Config>& configs) override {
    graphs_.clear();  // they launch the modules and read the workload released below
    timing_.reset();
    checking_.reset();
    spec_ = spec;
    variants_.clear();
    modules_.clear();
    tables_.clear();
    std::vector<Prepared> out(configs.size());
    std::vector<std::shared_ptr<const KernelVariant>> loaded(configs.size());
    // One compile per distinct source (grid-mode twins wait for it), one table per spec.
    const VariantCaches caches{&modules_, &tables_};
    parallel_for(configs.size(), worker_threads(options_.compile_threads), [&](size_t i) {
      try {
        loaded[i] = KernelVariant::create(*backend_, spec, configs[i], disk_.get(), caches);
        out[i].binary = loaded[i]->module().binary();
      } catch (const Error& e) {
        out[i].error = e.what();
      }
    });
    for (size_t i = 0; i < configs.size(); ++i)
      if (loaded[i]) variants_[config_name(configs[i])] = loaded[i];
    return out;
  }

  void set_workload(const WorkloadShape& shape) override {
    graphs_.clear();
    timing_.reset();
    checking_.reset();
    // Timed data repeats a block of random values: drawing every element of a multi-GB set is slow.
    HostWorkload host = tuning_workload(spec_, shape, seed_++, kTimingDistinctElements);
    const int64_t rotate_bytes =
        int64_t(options_.rotate_l2_multiple * double(std::max<int64_t>(metadata_.l2_bytes, 1 << 20)));
    const int64_t set_bytes = std::max<int64_t>(1, DeviceWorkload::set_bytes(host));
    const int sets = static_cast<int>(std::clamp<int64_t>((rotate_bytes + set_bytes - 1) / set_bytes, 1, kMaxInputSets));
    timing_ = std::make_unique<DeviceWorkload>(*backend_, std::move(host), sets);
    // Outputs are checked at a bounded size: host copies of a 65536-token output per
    // candidate would cost more than timing it. Larger launches only repeat the same indexing.
    const WorkloadShape check_shape = workload_shape(spec_, std::min<int64_t>(shape.tokens, kCheckTokens));
    checking_ = std::make_unique<DeviceWorkload>(*backend_, tuning_workload(spec_, check_shape, seed_++), 1);
    reference_ = run_for_check(default_config(spec_));
    next_set_ = 0;
    graph_timing_ = shape.tokens <= kGraphMaxTokens;
  }

  std::string check(const Config& config) override {
    const auto outputs = run_for_check(config);
    for (size_t i = 0; i < outputs.size(); ++i)
      if (auto why = compare_output_bytes(spec_.dtype, outputs[i].name, outputs[i].bytes, reference_[i].bytes);
          !why.empty())
        return why;
    // Captured here, not in the first time() call: the tuner sizes sample counts from the
    // warm-up's cost, which must not include a one-time capture.
    if (graph_timing_) graphs_for(config);
    return {};
  }

  std::vector<double> time(const Config& config, int samples) override {
    if (graph_timing_) return time_graph_replays(config, samples);
    const KernelVariant& variant = variant_for(config);
    const KernelParams first = timing_->params(variant);
    const LaunchDims dims = variant.dims(timing_->rows());
    const size_t sets = timing_->set_count();
    const int per_sample = static_cast<int>(std::clamp<size_t>(sets, 1, kMaxLaunchesPerSample));
    CudaContextScope scope(d_, context_->ctx);
    std::vector<double> us;
    for (int s = 0; s < samples; ++s) {
      d_.check(d_.cuEventRecord(start_, nullptr), "cuEventRecord");
      for (int i = 0; i < per_sample; ++i) {
        variant.launch(timing_->params_of_set(first, next_set_ % sets), dims, nullptr);
        next_set_ = (next_set_ + 1) % sets;
      }
      d_.check(d_.cuEventRecord(stop_, nullptr), "cuEventRecord");
      d_.check(d_.cuEventSynchronize(stop_), "cuEventSynchronize");
      float ms = 0.0f;
      d_.check(d_.cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime");
      us.push_back(double(ms) * 1e3 / per_sample);
    }
    return us;
  }

  double copy_bandwidth_gbps() override {
    if (copy_gbps_ > 0) return copy_gbps_;  // measured once per measurer
    const size_t bytes = size_t(std::max<int64_t>(256 << 20, 4 * metadata_.l2_bytes));
    void* a = backend_->alloc(bytes);
    void* b = backend_->alloc(bytes);
    double best_ms = 0.0;
    try {
      CudaContextScope scope(d_, context_->ctx);
      const auto src = reinterpret_cast<CUdeviceptr>(a), dst = reinterpret_cast<CUdeviceptr>(b);
      d_.check(d_.cuMemsetD8(src, 0x3c, bytes), "cuMemsetD8");
      for (int i = 0; i < 12; ++i) {
        d_.check(d_.cuEventRecord(start_, nullptr), "cuEventRecord");
        d_.check(d_.cuMemcpyDtoD(i % 2 ? src : dst, i % 2 ? dst : src, bytes), "cuMemcpyDtoD");
        d_.check(d_.cuEventRecord(stop_, nullptr), "cuEventRecord");
        d_.check(d_.cuEventSynchronize(stop_), "cuEventSynchronize");
        float ms = 0.0f;
        d_.check(d_.cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime");
        if (i >= 2 && (best_ms == 0.0 || ms < best_ms)) best_ms = ms;  // first two warm up
      }
    } catch (...) {
      backend_->free(a);
      backend_->free(b);
      throw;
    }
    backend_->free(a);
    backend_->free(b);
    copy_gbps_ = best_ms > 0 ? 2.0 * double(bytes) / (best_ms * 1e6) : 0.0;
    return copy_gbps_;
  }

  int sm_count() const override { return backend_->sm_count(); }
  const GpuPart* gpu_part() const override {
    return gpu_part_for_device(backend_->properties().name, backend_->sm_count());
  }

  double now_ms() override {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  const DeviceMetadata& metadata() const { return metadata_; }

 private:
  const KernelVariant& variant_for(const Config& c) const {
    auto it = variants_.find(config_name(c));
    if (it == variants_.end())
      throw Error(Status::internal, fmt::format("tuner: config {} was not prepared", config_name(c)));
    return *it->second;
  }

  /// Graphs of one config on the timing workload, replayed in turn.
  struct GraphRing {
    std::vector<std::unique_ptr<CudaGraph>> graphs;
    size_t next = 0;  ///< the graph the next sample replays
  };

  /// The graphs of `config` on the timing workload, captured on first use: graph g holds
  /// kGraphLaunches launches on sets g * kGraphLaunches ... (mod the set count), so replaying
  /// them in turn rotates over up to kMaxGraphs * kGraphLaunches sets.
  GraphRing& graphs_for(const Config& config) {
    const std::string name = config_name(config);
    if (auto it = graphs_.find(name); it != graphs_.end()) return it->second;
    const KernelVariant& variant = variant_for(config);
    const KernelParams first = timing_->params(variant);
    const LaunchDims dims = variant.dims(timing_->rows());
    const size_t sets = timing_->set_count();
    const size_t count = std::clamp<size_t>((sets + kGraphLaunches - 1) / kGraphLaunches, 1, kMaxGraphs);
    // The sets were uploaded on the legacy stream, which a non-blocking stream does not wait for.
    backend_->synchronize();
    CUstream stream = graph_stream_->get();
    GraphRing ring;
    for (size_t g = 0; g < count; ++g)
      ring.graphs.push_back(std::make_unique<CudaGraph>(d_, context_->ctx, stream, [&] {
        for (int i = 0; i < kGraphLaunches; ++i)
          variant.launch(timing_->params_of_set(first, (g * kGraphLaunches + size_t(i)) % sets), dims, stream);
      }));
    return graphs_.emplace(name, std::move(ring)).first->second;
  }

  /// `samples` replays, one graph each in turn; per-launch time = replay time / launches.
  std::vector<double> time_graph_replays(const Config& config, int samples) {
    GraphRing& ring = graphs_for(config);
    CUstream stream = graph_stream_->get();
    std::vector<double> us;
    us.reserve(size_t(std::max(samples, 0)));
    for (int s = 0; s < samples; ++s) {
      us.push_back(ring.graphs[ring.next]->time_replay_us(stream, start_, stop_) / kGraphLaunches);
      ring.next = (ring.next + 1) % ring.graphs.size();
    }
    return us;
  }

  /// One launch on the check workload's fresh inputs (outputs poisoned first), read back.
  std::vector<HostTensor> run_for_check(const Config& config) {
    checking_->reset_first_set();
    const KernelVariant& variant = variant_for(config);
    const KernelParams& params = checking_->params(variant);
    variant.launch(params, variant.dims(checking_->rows()), nullptr);
    backend_->synchronize();
    return checking_->read_first_set();
  }

  CudaMeasurerOptions options_;
  const CudaDriver& d_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<DiskCache> disk_;
  DeviceMetadata metadata_;
  std::unique_ptr<CudaPrimaryContext> context_;
  CUevent start_ = nullptr, stop_ = nullptr;
  std::unique_ptr<CudaStream> graph_stream_;  // graphs are captured and replayed on it
  Spec spec_;
  std::map<std::string, std::shared_ptr<const KernelVariant>> variants_;  // by config name
  MemoryCache<LoadedModule> modules_;  // configs differing only in launch fields share a module
  MemoryCache<DeviceTable> tables_;
  uint64_t seed_ = 0x5eed;
  std::unique_ptr<DeviceWorkload> timing_, checking_;
  size_t next_set_ = 0;
  bool graph_timing_ = false;  // this workload is decode-size: time graph replays
  std::map<std::string, GraphRing> graphs_;  // by config name
  std::vector<HostTensor> reference_;
  double copy_gbps_ = 0.0;
};

}  // namespace

std::unique_ptr<Measurer> make_cuda_measurer(const CudaMeasurerOptions& options) {
  if (!cuda_available()) {
    std::string why;
    try {
      make_cuda_backend(options.device, "");
    } catch (const Error& e) {
      why = e.what();
    }
    throw Error(Status::backend_error,
                fmt::format("tuning measures on a GPU, and no CUDA device is usable here ({}); "
                            "use --dry-run to enumerate and compile the search space without one",
                            why.empty() ? "cuda_available() is false" : why));
  }
  return std::make_unique<CudaMeasurer>(options);
}

DeviceMetadata cuda_device_metadata(int device) {
  auto backend = make_cuda_backend(device, "");
  return device_metadata(*backend);
}

}  // namespace ropejit
