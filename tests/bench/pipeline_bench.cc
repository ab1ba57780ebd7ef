// Benchmarks of the HLO pass pipeline. Baselines in the same run: parse+verify of the same text,
// so the figure to compare is "the pipeline costs N times a parse".
//   BM_CpuPipeline10k     the whole CPU pipeline (+ buffer assignment) on a 10,000-instruction module
//   BM_CpuPipelineCorpus  the same over every corpus module that parses (counters: kernels before
//                         and after, summed over the corpus)
//   BM_CpuPipelineChain/N       the CPU pipeline on a chain of N = 10k, 30k, 100k elementwise ops
//   BM_CpuPipelineFanOutChain/N the same with values read three steps later too
//                         (counter per_instruction: wall time per instruction; near-linear scaling
//                         keeps it flat from 10k to 100k, and the fitted complexity says O(N))
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/hlo/parser.h"
#include "compiler/passes/hlo_optimizer.h"
#include "generated_module.h"

namespace xlens {
namespace {

const std::string& Module10kText() {
  static const std::string* text = new std::string(bench::MakeLargeModuleText(10000));
  return *text;
}

void BM_Baseline_ParseVerify10k(benchmark::State& state) {
  for (auto _ : state) {
    auto module = ParseHloModule(Module10kText());
    if (!module.ok()) {
      state.SkipWithError(module.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(module);
  }
}
BENCHMARK(BM_Baseline_ParseVerify10k)->Unit(benchmark::kMillisecond);

void BM_CpuPipeline10k(benchmark::State& state) {
  int64_t before = 0, after = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto module = ParseHloModule(Module10kText());
    state.ResumeTiming();
    if (!module.ok()) {
      state.SkipWithError(module.status().message().c_str());
      return;
    }
    auto result = OptimizeHloModule(**module, OptimizeOptions{.backend = Backend::kCpu});
    if (!result.ok()) {
      state.SkipWithError(result.status().message().c_str());
      return;
    }
    before = result->kernels_before;
    after = result->kernels_after;
  }
  state.counters["kernels_before"] = static_cast<double>(before);
  state.counters["kernels_after"] = static_cast<double>(after);
}
BENCHMARK(BM_CpuPipeline10k)->Unit(benchmark::kMillisecond);

std::vector<std::string> CorpusTexts() {
  std::vector<std::string> texts;
  std::string dir = std::string(XLENS_SHARED_DIR) + "/corpus/hlo";
  if (!std::filesystem::is_directory(dir)) return texts;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".hlo") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    if (ParseHloModule(text.str()).ok()) texts.push_back(text.str());
  }
  return texts;
}

void BM_CpuPipelineCorpus(benchmark::State& state) {
  static const std::vector<std::string> texts = CorpusTexts();
  if (texts.empty()) {
    state.SkipWithError("../shared/corpus/hlo is not beside the clone");
    return;
  }
  int64_t before = 0, after = 0;
  for (auto _ : state) {
    before = after = 0;
    for (const std::string& text : texts) {
      state.PauseTiming();
      auto module = ParseHloModule(text);
      state.ResumeTiming();
      auto result = OptimizeHloModule(**module, OptimizeOptions{.backend = Backend::kCpu});
      if (!result.ok()) {
        state.SkipWithError(result.status().message().c_str());
        return;
      }
      before += result->kernels_before;
      after += result->kernels_after;
    }
  }
  state.counters["modules"] = static_cast<double>(texts.size());
  state.counters["kernels_before"] = static_cast<double>(before);
  state.counters["kernels_after"] = static_cast<double>(after);
}
BENCHMARK(BM_CpuPipelineCorpus)->Unit(benchmark::kMillisecond);

// The pipeline on a long chain: `per_instruction` is the figure to compare across sizes.
void RunChain(benchmark::State& state, bool fan_out) {
  const int n = static_cast<int>(state.range(0));
  const std::string text = bench::MakeChainModuleText(n, fan_out);
  int64_t after = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto module = ParseHloModule(text);
    state.ResumeTiming();
    if (!module.ok()) {
      state.SkipWithError(module.status().message().c_str());
      return;
    }
    auto result = OptimizeHloModule(**module, OptimizeOptions{.backend = Backend::kCpu});
    if (!result.ok()) {
      state.SkipWithError(result.status().message().c_str());
      return;
    }
    after = result->kernels_after;
  }
  state.SetComplexityN(n);
  state.counters["kernels_after"] = static_cast<double>(after);
  state.counters["per_instruction"] = benchmark::Counter(
      n, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_CpuPipelineChain(benchmark::State& state) { RunChain(state, /*fan_out=*/false); }
BENCHMARK(BM_CpuPipelineChain)
    ->Arg(10000)->Arg(30000)->Arg(100000)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Complexity();

void BM_CpuPipelineFanOutChain(benchmark::State& state) { RunChain(state, /*fan_out=*/true); }
BENCHMARK(BM_CpuPipelineFanOutChain)
    ->Arg(10000)->Arg(30000)->Arg(100000)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Complexity();

}  // namespace
}  // namespace xlens
