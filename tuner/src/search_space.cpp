// The tuner's search space: tunables() combined, then pruned per spec and per token count
// (and, on request, by the static report's estimate).
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "ropejit/parallel.h"
#include "ropejit/runtime.h"
#include "ropejit/source.h"
#include "ropejit/tuner.h"

namespace ropejit {

namespace {

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

std::vector<Config> full_config_space() {
  std::vector<Config> out{Config{}};
  for (const Tunable& t : tunables()) {
    std::vector<Config> next;
    next.reserve(out.size() * t.values.size());
    for (const Config& base : out)
      for (int v : t.values) {
        Config c = base;
        set_tunable(c, t.name, v);
        next.push_back(c);
      }
    out = std::move(next);
  }
  return out;
}

SearchSpace search_space(const Spec& spec) {
  SearchSpace space;
  const Config fallback = default_config(spec);
  const int heads = total_heads(spec);
  // Vector widths valid for this spec (validity of vec depends on the spec alone).
  std::vector<int> valid_vecs;
  for (const Tunable& t : tunables())
    if (t.name == "vec")
      for (int v : t.values) {
        Config probe = fallback;
        probe.vec = v;
        if (!config_problem(spec, probe)) valid_vecs.push_back(v);
      }
  std::sort(valid_vecs.rbegin(), valid_vecs.rend());
  const std::set<int> kept_vecs(valid_vecs.begin(), valid_vecs.begin() + std::min<size_t>(2, valid_vecs.size()));

  // The baseline is always measured, also where the heuristic takes a value no axis lists (role
  // slots: heads_per_thread = heads / Hkv; Gemma 4's 6 heads per thread).
  std::vector<Config> all = full_config_space();
  const Config decode = default_config(spec, 1);  // the decode buckets' baseline
  for (const Config& base : {fallback, decode})
    if (std::find(all.begin(), all.end(), base) == all.end()) all.push_back(base);
  for (const Config& c : all) {
    std::string reason;
    if (auto problem = config_problem(spec, c)) reason = "invalid: " + *problem;
    else if (c.heads_per_thread > 1 && c.heads_per_thread > heads)
      reason = fmt::format("heads_per_thread {} exceeds the spec's {} heads", c.heads_per_thread, heads);
    else if (!kept_vecs.count(c.vec))
      reason = fmt::format("vec {} is narrower than the two widest valid widths", c.vec);
    else if (c.ahead && c.heads_per_thread > 1 && lane_load_bytes(spec, c) > 16)
      reason = fmt::format("ahead with {} bytes a lane and head already in flight: two heads' words spill",
                           lane_load_bytes(spec, c));
    if (c == fallback || c == decode) reason.clear();  // the baselines are always measured
    if (reason.empty()) space.configs.push_back(c);
    else space.pruned.push_back({c, std::move(reason)});
  }
  return space;
}

WorkloadShape workload_shape(const Spec& spec, int64_t tokens) {
  WorkloadShape w;
  w.tokens = std::max<int64_t>(1, tokens);
  const bool sequences = spec.io.positions == PositionsForm::varlen;
  if (sequences) {
    // Decode: one new token per sequence; prefill: sequences of up to 1024 tokens.
    const int64_t per_sequence = w.tokens <= 64 ? 1 : std::min<int64_t>(w.tokens, 1024);
    w.batch = static_cast<int>((w.tokens + per_sequence - 1) / per_sequence);
    w.max_seq_len = per_sequence;
  } else {
    w.batch = 1;
    w.max_seq_len = w.tokens;
  }
  w.rows = grid_rows(spec.io.output, w.tokens, w.batch, w.max_seq_len);
  w.bytes = bytes_moved(spec, w.tokens, w.batch, w.max_seq_len);  // batch and S only count for their forms
  return w;
}

std::vector<Config> bucket_candidates(const Spec& spec, const std::vector<Config>& space, int64_t tokens,
                                      int sm_count, std::vector<PrunedConfig>* pruned) {
  const WorkloadShape shape = workload_shape(spec, tokens);
  const Config fallback = default_config(spec, tokens);
  int smallest_block = 1024;
  for (const Tunable& t : tunables())
    if (t.name == "block_threads")
      for (int v : t.values) smallest_block = std::min(smallest_block, v);
  std::vector<Config> out;
  for (const Config& c : space) {
    const WorkShape w = work_shape(spec, c);
    const int64_t items = shape.rows * w.head_groups * w.lanes;
    const int64_t enough = std::max<int64_t>(smallest_block, next_pow2(items));
    std::string reason;
    if (c.block_threads > enough)
      reason = fmt::format("block_threads {} exceeds the {} work items at {} tokens", c.block_threads, items, tokens);
    else if (c.grid == GridMode::persistent) {
      Config as_blocks = c;
      as_blocks.grid = GridMode::blocks;
      if (launch_dims(spec, c, shape.rows, sm_count).grid == launch_dims(spec, as_blocks, shape.rows, sm_count).grid)
        reason = fmt::format("persistent grid equals the blocks grid at {} tokens", tokens);
    }
    if (c == fallback) reason.clear();
    if (reason.empty()) out.push_back(c);
    else if (pruned) pruned->push_back({c, std::move(reason)});
  }
  return out;
}

std::map<std::string, KernelStats> static_reports(const Spec& spec, const std::vector<Config>& configs,
                                                  const std::vector<const Binary*>& binaries, unsigned threads) {
  const DistinctSources distinct =
      distinct_sources(spec, configs, [&](size_t i) { return i < binaries.size() && binaries[i]; });
  const std::vector<Source>& sources = distinct.sources;
  const std::vector<size_t>& first_config = distinct.first_config;
  const std::vector<size_t>& source_of = distinct.source_of;
  std::vector<std::optional<KernelStats>> reports(sources.size());
  parallel_for(sources.size(), threads, [&](size_t j) {
    try {
      reports[j] = kernel_stats(spec, configs[first_config[j]], sources[j], *binaries[first_config[j]]);
    } catch (const Error&) {
      // No report: the whole set is dropped below.
    }
  });
  std::map<std::string, KernelStats> out;
  for (size_t i = 0; i < source_of.size(); ++i) {
    if (source_of[i] == SIZE_MAX) continue;
    if (!reports[source_of[i]]) return {};
    KernelStats own = *reports[source_of[i]];
    own.config = config_name(configs[i]);
    out.emplace(own.config, std::move(own));
  }
  return out;
}

std::vector<Config> static_prune(const Spec& spec, const std::vector<Config>& candidates,
                                 const std::map<std::string, KernelStats>& stats, const GpuPart& part,
                                 const WorkloadShape& shape, double factor, std::vector<PrunedConfig>* pruned) {
  std::vector<Roofline> estimates;
  double best_us = 0.0, memory_us = 0.0;
  for (const Config& c : candidates) {
    const auto it = stats.find(config_name(c));
    if (it == stats.end())
      throw Error(Status::internal, fmt::format("static_prune: no static report for {}", config_name(c)));
    LaunchShape launch;
    launch.tokens = shape.tokens;
    launch.batch = shape.batch;
    launch.max_seq_len = shape.max_seq_len;
    estimates.push_back(roofline(it->second, part, shape.rows, memory_access(spec, c, launch)));
    const double us = estimates.back().estimate_us;
    if (us > 0 && (best_us == 0.0 || us < best_us)) best_us = us;
    memory_us = std::max(memory_us, estimates.back().memory_us);
  }
  if (factor <= 0 || best_us <= 0 || memory_us < kStaticPruneMinMemoryUs) return candidates;
  const Config fallback = default_config(spec, shape.tokens);
  std::vector<Config> out;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Roofline& r = estimates[i];
    if (candidates[i] == fallback || r.estimate_us <= factor * best_us) {
      out.push_back(candidates[i]);
    } else if (pruned) {
      pruned->push_back({candidates[i], fmt::format("static estimate {:.1f} us on {} ({}-bound) > {} x the best {:.1f} us",
                                                    r.estimate_us, part.name, r.bound, factor, best_us)});
    }
  }
  return out;
}

}  // namespace ropejit
