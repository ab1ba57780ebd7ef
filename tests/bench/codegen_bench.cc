// CPU code generation benchmarks: fused against unfused (--xla_disable_hlo_passes=fusion) on an
// 8-op elementwise chain, softmax and layer-norm; the fused chain against the machine's memory
// bandwidth, measured by a triad loop in this binary with the same threads; and compile time per
// corpus module. Ratios are taken against baselines measured in the same run.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <benchmark/benchmark.h>

#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/support/thread_pool.h"

namespace xlens {
namespace {

// The benchmark modules are HLO files in tests/bench/modules, shared with codegen_vs_xla.py.
std::string ReadModule(const std::string& name) {
  std::ifstream in(std::string(XLENS_BENCH_MODULES_DIR) + "/" + name + ".hlo");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::string kChain = ReadModule("chain8");

const std::string kSoftmax = ReadModule("softmax");

const std::string kLayerNorm = ReadModule("layer_norm");

struct Compiled {
  std::unique_ptr<runtime::Executable> executable;
  int64_t kernels = 0;
};

Compiled Compile(const std::string& text, bool fused) {
  auto module = ParseHloModule(text).value();
  runtime::CompileOptions options;
  if (!fused) options.optimize.filter.disabled = {"fusion", "multi-output-fusion"};
  auto exe = runtime::CompileForCpu(std::move(module), options);
  if (!exe.ok()) {
    std::fprintf(stderr, "compile failed: %s\n", exe.status().message().c_str());
    std::abort();
  }
  std::mt19937_64 rng(1);
  std::vector<Literal> args;
  for (const HloInstruction* p : (*exe)->module().entry_computation()->parameter_instructions()) {
    args.push_back(MakeRandomLiteral(p->shape(), rng).value());
  }
  if (!(*exe)->SetArguments(args).ok()) std::abort();
  Compiled c;
  c.kernels = static_cast<int64_t>((*exe)->kernels().size());
  c.executable = std::move(*exe);
  return c;
}

// Seconds per run: the fastest of `runs` after one warm-up (the machine is shared; the minimum is
// the figure least disturbed by other work, and the triad is measured the same way).
double SecondsPerRun(runtime::Executable& exe, int runs = 15) {
  (void)exe.Run();
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    (void)exe.Run();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return *std::min_element(t.begin(), t.end());
}

// One block of the triad, compiled for the widest vector unit the CPU has (the generated kernels
// use it too), so that the baseline is the memory system and not the loop.
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3"))) void TriadBlock(
    float* __restrict a, const float* __restrict b, const float* __restrict c, int64_t begin,
    int64_t end) {
  for (int64_t i = begin; i < end; ++i) a[i] = b[i] + 3.0f * c[i];
}

// The machine's streaming bandwidth: a[i] = b[i] + s * c[i] over 16M floats on the same thread
// pool the kernels use; bytes counted as 3 arrays (read b, c; write a).
double TriadBytesPerSecond() {
  static double measured = [] {
    const int64_t n = int64_t{1} << 24;
    std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
    ThreadPool& pool = ThreadPool::Default();
    auto triad = [&] {
      pool.ParallelFor(n / 8192, 4, [&](int64_t begin, int64_t end) {
        TriadBlock(a.data(), b.data(), c.data(), begin * 8192, end * 8192);
      });
    };
    triad();
    std::vector<double> t;
    for (int i = 0; i < 20; ++i) {
      auto start = std::chrono::steady_clock::now();
      triad();
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    benchmark::DoNotOptimize(a.data());
    return 3.0 * n * sizeof(float) / *std::min_element(t.begin(), t.end());
  }();
  return measured;
}

void BM_Triad(benchmark::State& state) {
  for (auto _ : state) state.SetIterationTime(1.0);
  state.counters["GB/s"] = TriadBytesPerSecond() / 1e9;
}
BENCHMARK(BM_Triad)->UseManualTime()->Iterations(1);

// Runs the fused module in the loop; reports the unfused one's time as a ratio, the kernel
// counts, and (for streaming modules) achieved bandwidth as a fraction of the triad's.
void RunFusedAgainstUnfused(benchmark::State& state, const std::string& text, double bytes_moved) {
  Compiled fused = Compile(text, true);
  Compiled unfused = Compile(text, false);
  const double unfused_s = SecondsPerRun(*unfused.executable);
  for (auto _ : state) {
    (void)fused.executable->Run();
  }
  const double fused_s = SecondsPerRun(*fused.executable);
  state.counters["kernels_fused"] = fused.kernels;
  state.counters["kernels_unfused"] = unfused.kernels;
  state.counters["fused_ms"] = fused_s * 1e3;
  state.counters["unfused_ms"] = unfused_s * 1e3;
  state.counters["speedup_vs_unfused"] = unfused_s / fused_s;
  state.counters["GB/s"] = bytes_moved / fused_s / 1e9;
  state.counters["fraction_of_triad"] = bytes_moved / fused_s / TriadBytesPerSecond();
}

void BM_ElementwiseChain8(benchmark::State& state) {
  // Two inputs read, one output written.
  RunFusedAgainstUnfused(state, kChain, 3.0 * 16777216 * 4);
}
BENCHMARK(BM_ElementwiseChain8)->Unit(benchmark::kMillisecond);

void BM_Softmax(benchmark::State& state) {
  RunFusedAgainstUnfused(state, kSoftmax, 2.0 * 4096 * 1000 * 4);
}
BENCHMARK(BM_Softmax)->Unit(benchmark::kMillisecond);

void BM_LayerNorm(benchmark::State& state) {
  RunFusedAgainstUnfused(state, kLayerNorm, 2.0 * 4096 * 1024 * 4);
}
BENCHMARK(BM_LayerNorm)->Unit(benchmark::kMillisecond);

// A column reduction (dimension 0 of a row-major f32[4096,1024]) against the row reduction of the
// same array, measured in the same run: both read 16 MiB once.
const std::string kColumnReduce = ReadModule("column_reduce");
const std::string kRowReduce = ReadModule("row_reduce");

void BM_ColumnReduction(benchmark::State& state) {
  Compiled column = Compile(kColumnReduce, true);
  Compiled row = Compile(kRowReduce, true);
  const double row_s = SecondsPerRun(*row.executable);
  for (auto _ : state) (void)column.executable->Run();
  const double column_s = SecondsPerRun(*column.executable);
  state.counters["column_ms"] = column_s * 1e3;
  state.counters["row_ms"] = row_s * 1e3;
  state.counters["column_over_row"] = column_s / row_s;
  state.counters["fraction_of_triad"] = 4096.0 * 1024 * 4 / column_s / TriadBytesPerSecond();
}
BENCHMARK(BM_ColumnReduction)->Unit(benchmark::kMillisecond);

// Compile time of every corpus module the CPU backend compiles: median and max.
void BM_CorpusCompileTime(benchmark::State& state) {
  const std::string dir = std::string(XLENS_SHARED_DIR) + "/corpus/hlo";
  std::vector<std::string> texts;
  if (std::filesystem::is_directory(dir)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".hlo") continue;
      std::ifstream in(entry.path());
      std::stringstream s;
      s << in.rdbuf();
      texts.push_back(s.str());
    }
  }
  if (texts.empty()) {
    state.SkipWithError("corpus absent");
    return;
  }
  std::vector<double> ms;
  for (auto _ : state) {
    ms.clear();
    for (const std::string& text : texts) {
      auto module = ParseHloModule(text);
      if (!module.ok()) continue;
      auto start = std::chrono::steady_clock::now();
      auto exe = runtime::CompileForCpu(std::move(*module), {});
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (exe.ok()) ms.push_back(t);
    }
  }
  std::sort(ms.begin(), ms.end());
  state.counters["modules"] = static_cast<double>(ms.size());
  state.counters["median_ms"] = ms.empty() ? 0 : ms[ms.size() / 2];
  state.counters["max_ms"] = ms.empty() ? 0 : ms.back();
}
BENCHMARK(BM_CorpusCompileTime)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace xlens
