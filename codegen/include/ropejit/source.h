#pragma once
/// Plan and Source: the generator stages (docs/architecture.md §1).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "ropejit/config.h"
#include "ropejit/freqs.h"
#include "ropejit/spec.h"
#include "ropejit/version.h"

namespace ropejit {

/// A spec, one launch Config and the host-computed frequency data (hf_fp32 mode).
struct Plan {
  Spec spec;
  Config config;
  FreqTable freqs;
  FreqTable from_freqs;  ///< op rerotate: the frequencies of rerotate.from (else empty)
};

/// Checks the config against the spec (Error unsupported naming the problem) and computes
/// the frequency tables.
Plan make_plan(const Spec& spec, const Config& config);

/// How one block of the plan's kernel shares its rows' cos/sin (shape.cuh shared_angle_shape);
/// not enabled for ops whose kernel computes them per item.
SharedAngleShape shared_angles(const Plan& plan);

/// Generated CUDA text: includes of embedded templates, constexpr lines, baked tables and
/// one `extern "C" __global__` entry named `entry`. Deterministic for a given Plan.
struct Source {
  std::string text;
  std::string entry;  ///< kernel symbol name
  Hash128 hash;       ///< XXH3-128 of text and templates_hash(): every byte NVRTC compiles
};

/// XXH3-128 of every embedded template header the sources include (names and contents), so
/// a template edited without a version bump changes every Source hash and cache key.
Hash128 templates_hash();

/// Emits the source of a plan.
Source generate_source(const Plan& plan);

/// The distinct sources of a spec's configs (configs that differ only in launch fields share
/// one): `sources[j]` was made for config `first_config[j]`, and config i uses
/// `sources[source_of[i]]` (SIZE_MAX for one `keep` leaves out), so each is compiled once.
struct DistinctSources {
  std::vector<Source> sources;
  std::vector<size_t> first_config;
  std::vector<size_t> source_of;
};
/// The distinct sources of `configs` (all, or those `keep(i)` is true for).
DistinctSources distinct_sources(const Spec& spec, const std::vector<Config>& configs,
                                 const std::function<bool(size_t)>& keep = {});


}  // namespace ropejit
