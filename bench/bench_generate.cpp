// Generator benchmarks (issue 2): spec parse + validate, spec → source, NVRTC compile per arch.
#include <benchmark/benchmark.h>

#include "support/repo_paths.h"

#include <fstream>
#include <sstream>

#include "ropejit/compile.h"
#include "ropejit/source.h"

namespace {

std::string spec_text(const char* name) {
  std::ifstream in(ropejit::test::source_dir() + "/specs/" + name + ".json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* const kSpecs[] = {"llama-3.1-8b", "phi-3.5-mini", "deepseek-v3", "gpt-neox-20b"};

void BM_ParseValidate(benchmark::State& state) {
  const std::string text = spec_text(kSpecs[state.range(0)]);
  for (auto _ : state) benchmark::DoNotOptimize(ropejit::parse_spec(text));
  state.SetLabel(kSpecs[state.range(0)]);
}
BENCHMARK(BM_ParseValidate)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

void BM_SpecToSource(benchmark::State& state) {
  const ropejit::Spec spec = ropejit::parse_spec(spec_text(kSpecs[state.range(0)]));
  for (auto _ : state) {
    const auto plan = ropejit::make_plan(spec, ropejit::default_config(spec));
    benchmark::DoNotOptimize(ropejit::generate_source(plan));
  }
  state.SetLabel(kSpecs[state.range(0)]);
}
BENCHMARK(BM_SpecToSource)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

// Cold compile: every iteration compiles the kernel from scratch (no cache involved), with NVRTC's
// own time per phase as counters. The first compile of a process also pays NVRTC's one-time
// start (about 6 ms here) that these repeated compiles do not: `ropejit compile --phases` shows it.
const char* const kCompileSpecs[] = {"llama-3.1-8b", "qwen3-8b-paged-fp8", "llama-3.1-8b-context-shift"};

void BM_NvrtcCompile(benchmark::State& state) {
  const char* name = kCompileSpecs[state.range(0)];
  const ropejit::Spec spec = ropejit::parse_spec(spec_text(name));
  const auto source = ropejit::generate_source(ropejit::make_plan(spec, ropejit::default_config(spec)));
  const std::string arch = "sm_" + std::to_string(state.range(1));
  double frontend = 0, nvvm = 0, ptxas = 0;
  for (auto _ : state) {
    const ropejit::Binary b = ropejit::compile_nvrtc_timed(source, arch);
    frontend += b.phases.frontend_ms;
    nvvm += b.phases.nvvm_ms;
    ptxas += b.phases.ptxas_ms;
  }
  const auto avg = benchmark::Counter::kAvgIterations;
  state.counters["fe_ms"] = benchmark::Counter(frontend, avg);
  state.counters["nvvm_ms"] = benchmark::Counter(nvvm, avg);
  state.counters["ptxas_ms"] = benchmark::Counter(ptxas, avg);
  state.SetLabel(std::string(name) + " " + arch);
}
// Repetitions report mean/median/stddev; the target (100 ms) is on the median.
BENCHMARK(BM_NvrtcCompile)
    ->ArgsProduct({{0, 1, 2}, {80, 90}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace

BENCHMARK_MAIN();
