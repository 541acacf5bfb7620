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

// Cold compile: every iteration compiles the kernel from scratch (no cache involved).
void BM_NvrtcCompile(benchmark::State& state) {
  const ropejit::Spec spec = ropejit::parse_spec(spec_text("llama-3.1-8b"));
  const auto source = ropejit::generate_source(ropejit::make_plan(spec, ropejit::default_config(spec)));
  const char* arch = state.range(0) == 80 ? "sm_80" : "sm_90";
  for (auto _ : state) benchmark::DoNotOptimize(ropejit::compile_nvrtc(source, arch));
  state.SetLabel(arch);
}
// Repetitions report mean/median/stddev; the target is on the median.
BENCHMARK(BM_NvrtcCompile)->Arg(80)->Arg(90)->Unit(benchmark::kMillisecond)->Iterations(3)->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace

BENCHMARK_MAIN();
