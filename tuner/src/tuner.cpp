// The tuning loop: compile the pruned space once per spec, then per token count check and
// time every candidate within the budget, re-measure the best few head to head, pick a winner.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "ropejit/parallel.h"
#include "ropejit/tuner.h"

namespace ropejit {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2) return v[mid];
  const double upper = v[mid];
  return (*std::max_element(v.begin(), v.begin() + mid) + upper) / 2.0;
}

struct Resources {
  int registers = -1;
  int spill_bytes = 0;
};

/// Fills time-derived fields of `r` from its median time.
void set_rates(CandidateResult& r, const WorkloadShape& shape, double copy_gbps) {
  r.gbps = r.time_us > 0 ? double(shape.bytes) / (r.time_us * 1e3) : 0.0;
  r.copy_fraction = copy_gbps > 0 ? r.gbps / copy_gbps : 0.0;
}

/// Token counts to tune, one per bucket (the first given for a bucket wins), in bucket order.
std::vector<int64_t> one_per_bucket(const std::vector<int64_t>& tokens) {
  std::map<int, int64_t> by_bucket;
  for (int64_t t : tokens) {
    if (t < 1) throw Error(Status::invalid_argument, fmt::format("tokens {} is not allowed: must be >= 1", t));
    by_bucket.emplace(bucket_of(t), t);
  }
  std::vector<int64_t> out;
  for (const auto& [bucket, t] : by_bucket) out.push_back(t);
  return out;
}

class BucketTuner {
 public:
  BucketTuner(Measurer& m, const TuneOptions& o, double copy_gbps) : m_(m), o_(o), copy_gbps_(copy_gbps) {}

  BucketResult run(const Spec& spec, int64_t tokens, const std::vector<Config>& compiled,
                   const std::map<std::string, Resources>& resources,
                   const std::map<std::string, KernelStats>& stats,
                   const std::function<void(int, int)>& on_candidate) {
    BucketResult b;
    b.tokens = tokens;
    b.bucket = bucket_of(tokens);
    b.shape = workload_shape(spec, tokens);
    const Config fallback = default_config(spec, tokens);
    std::vector<Config> candidates = bucket_candidates(spec, compiled, tokens, m_.sm_count());
    if (const GpuPart* part = m_.gpu_part(); part && !stats.empty()) {
      std::vector<PrunedConfig> pruned;
      candidates = static_prune(spec, candidates, stats, *part, b.shape, o_.static_prune_factor, &pruned);
      for (auto& p : pruned) {
        CandidateResult r;
        r.config = p.config;
        r.rejected = "pruned: " + p.reason;
        b.candidates.push_back(std::move(r));
      }
    }
    // The default goes first: it is the baseline and is measured whatever the budget.
    std::stable_partition(candidates.begin(), candidates.end(), [&](const Config& c) { return c == fallback; });
    m_.set_workload(b.shape);
    const double start = m_.now_ms();
    const double first_phase_ms = o_.budget_ms * (1.0 - o_.head_to_head_share);
    double sample_cost_ms = 0.0;  // wall cost of one timed launch, the largest seen so far
    std::map<std::string, std::vector<double>> samples;

    for (size_t i = 0; i < candidates.size(); ++i) {
      const Config& c = candidates[i];
      if (on_candidate) on_candidate(static_cast<int>(i), static_cast<int>(candidates.size()));
      CandidateResult r;
      r.config = c;
      if (auto it = resources.find(config_name(c)); it != resources.end()) {
        r.registers = it->second.registers;
        r.spill_bytes = it->second.spill_bytes;
      }
      const double elapsed = m_.now_ms() - start;
      const double min_cost = sample_cost_ms * (o_.warmup_samples + o_.min_samples);
      if (!(c == fallback) && elapsed + min_cost > first_phase_ms) {
        r.rejected = "skipped: measuring budget spent";
        b.candidates.push_back(std::move(r));
        continue;
      }
      if (std::string why = m_.check(c); !why.empty()) {
        r.rejected = "wrong output: " + why;
        b.candidates.push_back(std::move(r));
        continue;
      }
      const double before_warmup = m_.now_ms();
      const int warmup = std::max(1, o_.warmup_samples);
      m_.time(c, warmup);
      const double per_sample = std::max(1e-6, (m_.now_ms() - before_warmup) / warmup);
      sample_cost_ms = std::max(sample_cost_ms, per_sample);
      const double left = first_phase_ms - (m_.now_ms() - start);
      const double share = left / double(candidates.size() - i);
      const int n = std::clamp(static_cast<int>(share / per_sample), o_.min_samples, std::max(o_.min_samples, o_.max_samples));
      auto& s = samples[config_name(c)];
      s = m_.time(c, n);
      r.samples = static_cast<int>(s.size());
      r.time_us = median(s);
      set_rates(r, b.shape, copy_gbps_);
      b.candidates.push_back(std::move(r));
    }

    head_to_head(b, fallback, start, sample_cost_ms);

    std::vector<const CandidateResult*> ranked;
    for (const auto& r : b.candidates)
      if (r.rejected.empty() && r.samples > 0) ranked.push_back(&r);
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const CandidateResult* x, const CandidateResult* y) { return x->time_us < y->time_us; });
    if (!ranked.empty()) b.best = *ranked[0];
    if (ranked.size() > 1) b.runner_up = *ranked[1];
    for (const auto& r : b.candidates)
      if (r.config == fallback) b.default_result = r;
    if (b.best && b.default_result.rejected.empty() && b.default_result.time_us > 0)
      b.speedup = b.default_result.time_us / b.best->time_us;
    b.elapsed_ms = m_.now_ms() - start;
    return b;
  }

 private:
  /// Re-times the best few and the default in interleaved rounds with what is left of the
  /// budget, so drift (clocks, temperature) hits them alike; their times become these medians.
  void head_to_head(BucketResult& b, const Config& fallback, double start, double sample_cost_ms) {
    std::vector<CandidateResult*> valid;
    for (auto& r : b.candidates)
      if (r.rejected.empty() && r.samples > 0) valid.push_back(&r);
    std::stable_sort(valid.begin(), valid.end(),
                     [](const CandidateResult* x, const CandidateResult* y) { return x->time_us < y->time_us; });
    std::vector<CandidateResult*> finalists(valid.begin(),
                                            valid.begin() + std::min<size_t>(valid.size(), size_t(std::max(0, o_.head_to_head))));
    for (auto* r : valid)
      if (r->config == fallback && std::find(finalists.begin(), finalists.end(), r) == finalists.end())
        finalists.push_back(r);
    if (finalists.size() < 2) return;
    const int per_round = std::max(1, o_.min_samples);
    const double round_cost = sample_cost_ms * per_round * double(finalists.size());
    std::vector<std::vector<double>> fresh(finalists.size());
    const int max_rounds = std::max(1, o_.max_samples / per_round);
    for (int round = 0; round < max_rounds; ++round) {
      if (m_.now_ms() - start + round_cost > o_.budget_ms) break;
      for (size_t i = 0; i < finalists.size(); ++i) {
        auto s = m_.time(finalists[i]->config, per_round);
        fresh[i].insert(fresh[i].end(), s.begin(), s.end());
      }
    }
    for (size_t i = 0; i < finalists.size(); ++i) {
      if (fresh[i].empty()) continue;
      finalists[i]->time_us = median(fresh[i]);
      finalists[i]->samples += static_cast<int>(fresh[i].size());
      set_rates(*finalists[i], b.shape, copy_gbps_);
    }
  }

  Measurer& m_;
  const TuneOptions& o_;
  double copy_gbps_;
};

/// The static reports of the compiled candidates when static pruning is on and possible (a
/// known GPU part, CUBINs to read); else empty.
std::map<std::string, KernelStats> candidate_reports(const Spec& spec, const std::vector<Config>& configs,
                                                     const std::vector<Measurer::Prepared>& prepared,
                                                     const std::vector<Config>& compiled, const Measurer& measurer,
                                                     const TuneOptions& options) {
  if (options.static_prune_factor <= 0 || !measurer.gpu_part()) return {};
  std::vector<const Binary*> binaries(configs.size(), nullptr);
  for (size_t i = 0; i < configs.size() && i < prepared.size(); ++i) {
    if (std::find(compiled.begin(), compiled.end(), configs[i]) == compiled.end()) continue;
    if (!prepared[i].binary || prepared[i].binary->image.empty()) return {};  // nothing to read: no pruning
    binaries[i] = &*prepared[i].binary;
  }
  return static_reports(spec, configs, binaries, worker_threads(0));
}

}  // namespace

std::vector<TuningEntry> SpecTuneResult::entries() const {
  std::vector<TuningEntry> out;
  const std::string date = utc_now_iso8601();
  for (const auto& b : buckets) {
    if (!b.best) continue;
    TuningEntry e;
    e.spec_hash = spec_hash;
    e.spec_name = spec.name;
    e.bucket = b.bucket;
    e.tokens = b.tokens;
    e.best = {b.best->config, b.best->time_us};
    if (b.runner_up) e.runner_up = TimedConfig{b.runner_up->config, b.runner_up->time_us};
    e.default_time_us = b.default_result.time_us;
    e.gbps = b.best->gbps;
    e.date = date;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<SpecTuneResult> tune(const std::vector<Spec>& specs, Measurer& measurer, const TuneOptions& options,
                                 const ProgressSink& progress) {
  if (!(options.budget_ms > 0))
    throw Error(Status::invalid_argument, fmt::format("budget_ms {} is not allowed: must be > 0", options.budget_ms));
  const std::vector<int64_t> token_counts = one_per_bucket(options.tokens);
  const double copy_gbps = measurer.copy_bandwidth_gbps();
  const double run_start = measurer.now_ms();
  const double units = double(specs.size() * token_counts.size());
  BucketTuner bucket_tuner(measurer, options, copy_gbps);
  std::vector<SpecTuneResult> results;

  for (size_t si = 0; si < specs.size(); ++si) {
    SpecTuneResult result;
    result.spec = specs[si];
    result.spec_hash = spec_hash(specs[si]).hex();
    result.space = search_space(specs[si]);
    const auto prepared = measurer.prepare(specs[si], result.space.configs);
    std::vector<Config> compiled;
    std::map<std::string, Resources> resources;
    const Config fallback = default_config(specs[si]), decode = default_config(specs[si], 1);
    for (size_t i = 0; i < result.space.configs.size(); ++i) {
      const Config& c = result.space.configs[i];
      const auto& p = i < prepared.size() ? prepared[i] : Measurer::Prepared{std::nullopt, "not prepared"};
      CandidateResult r;
      r.config = c;
      if (p.binary) {
        r.registers = p.binary->registers;
        r.spill_bytes = p.binary->spill_bytes;
        resources[config_name(c)] = {r.registers, r.spill_bytes};
      }
      if (!p.binary) r.rejected = "compile failed: " + p.error;
      else if (p.binary->spill_bytes > 0 && !(c == fallback) && !(c == decode))
        r.rejected = fmt::format("spills {} bytes of registers", p.binary->spill_bytes);
      if (r.rejected.empty()) compiled.push_back(c);
      else if (c == fallback || c == decode)
        throw Error(Status::compile_error, fmt::format("tuner: the default config {} of spec \"{}\" does not compile: {}",
                                                       config_name(c), specs[si].name, p.error));
      else result.compile_rejected.push_back(std::move(r));
    }
    const std::map<std::string, KernelStats> stats =
        candidate_reports(specs[si], result.space.configs, prepared, compiled, measurer, options);
    for (size_t ti = 0; ti < token_counts.size(); ++ti) {
      const double unit_index = double(si * token_counts.size() + ti);
      auto on_candidate = [&](int i, int n) {
        if (!progress) return;
        TuneProgress p;
        p.spec_index = static_cast<int>(si);
        p.spec_count = static_cast<int>(specs.size());
        p.spec_name = specs[si].name;
        p.token_index = static_cast<int>(ti);
        p.token_count = static_cast<int>(token_counts.size());
        p.tokens = token_counts[ti];
        p.candidate = i;
        p.candidates = n;
        p.elapsed_s = (measurer.now_ms() - run_start) / 1e3;
        const double done = (unit_index + double(i) / std::max(1, n)) / units;
        p.eta_s = done > 0 ? p.elapsed_s / done - p.elapsed_s : 0.0;
        progress(p);
      };
      result.buckets.push_back(bucket_tuner.run(specs[si], token_counts[ti], compiled, resources, stats, on_candidate));
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace ropejit
