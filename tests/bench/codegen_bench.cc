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

constexpr const char* kChain = R"(HloModule chain
ENTRY main {
  x = f32[16777216] parameter(0)
  y = f32[16777216] parameter(1)
  a = f32[16777216] multiply(x, y)
  b = f32[16777216] add(a, x)
  c = f32[16777216] subtract(b, y)
  d = f32[16777216] maximum(c, x)
  e = f32[16777216] multiply(d, d)
  f = f32[16777216] minimum(e, y)
  g = f32[16777216] add(f, a)
  ROOT h = f32[16777216] negate(g)
})";

constexpr const char* kSoftmax = R"(HloModule softmax
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY main {
  x = f32[4096,1000] parameter(0)
  lo = f32[] constant(-inf)
  m = f32[4096] reduce(x, lo), dimensions={1}, to_apply=max
  mb = f32[4096,1000] broadcast(m), dimensions={0}
  s = f32[4096,1000] subtract(x, mb)
  e = f32[4096,1000] exponential(s)
  z = f32[] constant(0)
  sum = f32[4096] reduce(e, z), dimensions={1}, to_apply=add
  sb = f32[4096,1000] broadcast(sum), dimensions={0}
  ROOT d = f32[4096,1000] divide(e, sb)
})";

constexpr const char* kLayerNorm = R"(HloModule layer_norm
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY main {
  x = f32[4096,1024] parameter(0)
  gamma = f32[1024] parameter(1)
  beta = f32[1024] parameter(2)
  z = f32[] constant(0)
  n = f32[] constant(1024)
  nb = f32[4096] broadcast(n), dimensions={}
  sum = f32[4096] reduce(x, z), dimensions={1}, to_apply=add
  mean = f32[4096] divide(sum, nb)
  mb = f32[4096,1024] broadcast(mean), dimensions={0}
  c = f32[4096,1024] subtract(x, mb)
  sq = f32[4096,1024] multiply(c, c)
  vs = f32[4096] reduce(sq, z), dimensions={1}, to_apply=add
  var = f32[4096] divide(vs, nb)
  eps = f32[] constant(1e-5)
  eb = f32[4096] broadcast(eps), dimensions={}
  ve = f32[4096] add(var, eb)
  rs = f32[4096] rsqrt(ve)
  rb = f32[4096,1024] broadcast(rs), dimensions={0}
  normed = f32[4096,1024] multiply(c, rb)
  gb = f32[4096,1024] broadcast(gamma), dimensions={1}
  bb = f32[4096,1024] broadcast(beta), dimensions={1}
  scaled = f32[4096,1024] multiply(normed, gb)
  ROOT out = f32[4096,1024] add(scaled, bb)
})";

struct Compiled {
  std::unique_ptr<runtime::Executable> executable;
  int64_t kernels = 0;
};

Compiled Compile(const char* text, bool fused) {
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

// Seconds per run: the median of `runs` after one warm-up.
double SecondsPerRun(runtime::Executable& exe, int runs = 7) {
  (void)exe.Run();
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    (void)exe.Run();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
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
        for (int64_t i = begin * 8192; i < end * 8192; ++i) a[i] = b[i] + 3.0f * c[i];
      });
    };
    triad();
    std::vector<double> t;
    for (int i = 0; i < 9; ++i) {
      auto start = std::chrono::steady_clock::now();
      triad();
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(t.begin(), t.end());
    benchmark::DoNotOptimize(a.data());
    return 3.0 * n * sizeof(float) / t[t.size() / 2];
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
void RunFusedAgainstUnfused(benchmark::State& state, const char* text, double bytes_moved) {
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
constexpr const char* kColumnReduce = R"(HloModule column_reduce
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY main {
  x = f32[4096,1024] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[1024] reduce(x, z), dimensions={0}, to_apply=add
})";
constexpr const char* kRowReduce = R"(HloModule row_reduce
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY main {
  x = f32[4096,1024] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4096] reduce(x, z), dimensions={1}, to_apply=add
})";

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
