// Benchmarks of the HLO core. Each measured operation has a baseline in the same run, so the
// figures to compare across machines are the ratios:
//   parse+verify of a 100,000-instruction module  vs  one pass over its text (counting lines);
//   the evaluator adding two f32[16M] arrays       vs  a plain C++ loop doing the same add.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/parser.h"
#include "generated_module.h"

namespace xlens {
namespace {

const std::string& LargeModuleText() {
  static const std::string* text = new std::string(xlens::bench::MakeLargeModuleText(100000));
  return *text;
}

void BM_Baseline_ScanText100k(benchmark::State& state) {
  const std::string& text = LargeModuleText();
  for (auto _ : state) {
    benchmark::DoNotOptimize(std::count(text.begin(), text.end(), '\n'));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_Baseline_ScanText100k)->Unit(benchmark::kMillisecond);

void BM_ParseAndVerify100k(benchmark::State& state) {
  const std::string& text = LargeModuleText();
  for (auto _ : state) {
    auto module = ParseHloModule(text, ParseOptions{.verify = true, .filename = "large"});
    if (!module.ok()) {
      state.SkipWithError(module.status().message().c_str());
      return;
    }
    state.counters["instructions"] = static_cast<double>((*module)->instruction_count());
    benchmark::DoNotOptimize(module);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ParseAndVerify100k)->Unit(benchmark::kMillisecond);

constexpr int64_t k16M = 16 * 1024 * 1024;

void BM_Baseline_LoopAdd16M(benchmark::State& state) {
  std::vector<float> a(k16M, 1.5f), b(k16M, 2.25f), c(k16M);
  for (auto _ : state) {
    for (int64_t i = 0; i < k16M; ++i) c[i] = a[i] + b[i];
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * k16M);
}
BENCHMARK(BM_Baseline_LoopAdd16M)->Unit(benchmark::kMillisecond);

void BM_EvaluateAdd16M(benchmark::State& state) {
  auto module = ParseHloModule(fmt::format(R"(HloModule add16m
ENTRY e {{
  a = f32[{0}] parameter(0)
  b = f32[{0}] parameter(1)
  ROOT c = f32[{0}] add(a, b)
}})", k16M));
  if (!module.ok()) {
    state.SkipWithError(module.status().message().c_str());
    return;
  }
  std::vector<Literal> args;
  for (int i = 0; i < 2; ++i) {
    Literal lit(Shape(PrimitiveType::F32, {k16M}));
    std::fill(lit.data<float>().begin(), lit.data<float>().end(), 1.5f + i);
    args.push_back(std::move(lit));
  }
  for (auto _ : state) {
    auto result = EvaluateModule(**module, args);
    if (!result.ok()) {
      state.SkipWithError(result.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(result);
  }
  state.SetItemsProcessed(state.iterations() * k16M);
}
BENCHMARK(BM_EvaluateAdd16M)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace xlens
