// One config of a spec, loaded: plan → source → module (+ table), and Args → checked launch.
#include "ropejit/internal/kernel_variant.h"

#include "cos_sin_table.h"
#include "launch/launch_args.h"
#include "ropejit/source.h"

namespace ropejit {

struct KernelVariant::UsedFields {
  ArgsFieldSet set;
};

std::shared_ptr<const KernelVariant> KernelVariant::create(Backend& backend, const Spec& spec, const Config& config,
                                                           DiskCache* disk, const VariantCaches& caches) {
  std::shared_ptr<KernelVariant> v(new KernelVariant());
  v->backend_ = &backend;
  v->spec_ = spec;
  v->config_ = config;
  v->used_fields_ = std::make_shared<const UsedFields>(UsedFields{used_args_fields(spec)});  // once, not per launch
  const Plan plan = make_plan(spec, config);
  const Source source = generate_source(plan);
  bool created = false;
  auto load = [&] {
    created = true;
    return backend.load(source, disk);
  };
  if (caches.modules)
    v->module_ = caches.modules->get_or_create(MemoryCacheKey{source.hash, backend.name(), backend.arch()}, load);
  else
    v->module_ = load();
  v->from_cache_ = !created || v->module_->from_disk_cache();
  if (config.grid == GridMode::persistent) v->blocks_per_sm_ = v->module_->resident_blocks_per_sm(config.block_threads);
  if (config.sincos == SinCosMode::table) {
    auto build = [&] { return build_cos_sin_table(plan, backend); };
    if (caches.tables)
      v->table_ = caches.tables->get_or_create(
          MemoryCacheKey{cos_sin_table_hash(plan), backend.name(), backend.arch()}, build);
    else
      v->table_ = build();
  }
  return v;
}

CheckedLaunch KernelVariant::prepare(const Args& args) const {
  CheckedLaunch checked = check_launch(spec_, config_.vec, args, backend_->host_memory(), used_fields_->set);
  if (table_) {
    checked.params.cos_sin_table = table_->data;
    checked.params.cos_sin_table_rows = table_->rows;
  }
  return checked;
}

LaunchDims KernelVariant::dims(int64_t rows) const {
  return launch_dims(spec_, config_, rows, backend_->sm_count(), blocks_per_sm_);
}

void KernelVariant::launch(const KernelParams& params, const LaunchDims& dims, void* stream) const {
  module_->launch(dims, params, stream);
}

void KernelVariant::launch(const Args& args, void* stream) const {
  const CheckedLaunch checked = prepare(args);
  if (checked.rows == 0) return;
  launch(checked.params, dims(checked.rows), stream);
}

}  // namespace ropejit
