// Runtime and Kernel: spec → plan → source → (memory/disk cache) → loaded module per bucket.
#include "ropejit/runtime.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "ropejit/internal/backend.h"
#include "ropejit/internal/kernel_variant.h"
#include "ropejit/internal/memory_cache.h"
#include "ropejit/buckets.h"
#include "ropejit/cache.h"
#include "ropejit/source.h"
#include "caches/tuned_configs.h"

namespace ropejit {

class KernelImpl {
 public:
  // First member, so destroyed last: modules and tables release through it, and a Kernel may
  // outlive the Runtime that made it.
  std::shared_ptr<Backend> backend;
  Spec spec;
  std::array<std::shared_ptr<const KernelVariant>, kNumBuckets> variants;  // by token bucket
  bool from_cache = true;
  double load_ms = 0.0;
};

class RuntimeImpl {
 public:
  RuntimeOptions options;
  std::shared_ptr<Backend> backend;
  std::unique_ptr<DiskCache> disk;
  MemoryCache<LoadedModule> modules;
  MemoryCache<DeviceTable> tables;
  MemoryCache<const KernelImpl> kernels;  // (spec hash, per-bucket configs) → kernel
  std::unique_ptr<TunedConfigs> tuned;
};

namespace {

std::unique_ptr<Backend> open_backend(const RuntimeOptions& o) {
  switch (o.backend) {
    case BackendKind::cuda: return make_cuda_backend(o.device, o.arch, o.programmatic_dependent_launch);
    case BackendKind::host: return make_host_backend();
    case BackendKind::auto_: break;
  }
  if (cuda_available()) return make_cuda_backend(o.device, o.arch, o.programmatic_dependent_launch);
  return make_host_backend();
}

}  // namespace

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<RuntimeImpl>()) {
  impl_->options = std::move(options);
  impl_->backend = open_backend(impl_->options);
  if (impl_->options.disk_cache) {
    DiskCacheOptions disk_options;
    disk_options.dir = impl_->options.cache_dir;
    disk_options.warn = impl_->options.on_warning;
    impl_->disk = std::make_unique<DiskCache>(disk_options);
  }
  std::string db = impl_->options.tuning_db;
  if (db.empty())
    if (const char* env = std::getenv("ROPEJIT_TUNING_DB")) db = env;
  impl_->tuned = std::make_unique<TunedConfigs>(db, impl_->options.shipped_tuning_dir, *impl_->backend,
                                                impl_->options.on_warning);
}

Runtime::~Runtime() = default;

Backend& Runtime::backend_impl() { return *impl_->backend; }

std::string Runtime::backend() const { return impl_->backend->name(); }
std::string Runtime::arch() const { return impl_->backend->arch(); }
int Runtime::sm_count() const { return impl_->backend->sm_count(); }

Kernel Runtime::get(const Spec& spec) {
  std::array<Config, kNumBuckets> configs;
  // The decode buckets' default differs from the others' (default_config(spec, tokens)) on a GPU;
  // the host backend keeps one variant a spec (one compile: its launches are a CPU's, not a
  // decode step's round trips).
  const bool per_bucket = impl_->backend->name() != "host";
  for (int b = 0; b < kNumBuckets; ++b)
    configs[b] = impl_->tuned->lookup(spec, b).value_or(
        per_bucket ? default_config(spec, bucket_representative(b)) : default_config(spec));
  return make_kernel(spec, configs);
}

Kernel Runtime::get(const Spec& spec, const Config& config) {
  std::array<Config, kNumBuckets> configs;
  configs.fill(config);
  return make_kernel(spec, configs);
}

Kernel Runtime::make_kernel(const Spec& spec, const std::array<Config, kNumBuckets>& configs) {
  // A repeated get() of the same spec and configs costs one spec hash and a lookup.
  std::string config_names;
  for (const Config& c : configs) config_names += config_name(c) + ";";
  const MemoryCacheKey key{spec_hash(spec), impl_->backend->name(), config_names};
  return Kernel(impl_->kernels.get_or_create(key, [&] { return build_kernel(spec, configs); }));
}

std::shared_ptr<const KernelImpl> Runtime::build_kernel(const Spec& spec,
                                                        const std::array<Config, kNumBuckets>& configs) {
  const auto start = std::chrono::steady_clock::now();
  auto k = std::make_shared<KernelImpl>();
  k->spec = spec;
  k->backend = impl_->backend;
  const VariantCaches caches{&impl_->modules, &impl_->tables};
  for (int b = 0; b < kNumBuckets; ++b) {
    // Buckets sharing a config (the usual case) share one variant.
    const int same = static_cast<int>(std::find(configs.begin(), configs.begin() + b, configs[b]) - configs.begin());
    k->variants[b] = same < b ? k->variants[same]
                              : KernelVariant::create(*impl_->backend, spec, configs[b], impl_->disk.get(), caches);
    if (!k->variants[b]->from_cache()) k->from_cache = false;
  }
  k->load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return k;
}

void Kernel::launch(const Args& args, void* stream) const {
  impl_->variants[bucket_of(args.num_tokens)]->launch(args, stream);
}

const Spec& Kernel::spec() const { return impl_->spec; }
const Config& Kernel::config_for(int64_t num_tokens) const {
  return impl_->variants[bucket_of(num_tokens)]->config();
}
const Binary& Kernel::binary_for(int64_t num_tokens) const {
  return impl_->variants[bucket_of(num_tokens)]->module().binary();
}
std::string Kernel::backend() const { return impl_->backend->name(); }
bool Kernel::from_cache() const { return impl_->from_cache; }
double Kernel::load_ms() const { return impl_->load_ms; }

Backend& runtime_backend(Runtime& runtime) { return runtime.backend_impl(); }

bool can_implement(const Spec& spec, std::string* why) {
  if (auto problem = config_problem(spec, default_config(spec))) {
    if (why) *why = *problem;
    return false;
  }
  return true;
}

}  // namespace ropejit
