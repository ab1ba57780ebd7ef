// Profiler benchmarks: the cost of one host span with tracing off (one branch) and on (two clock
// reads and a record in the thread's buffer; a scoped span copies its strings, a kernel's shares
// its description), and the run-time overhead of tracing modules with many small kernels: the
// same executable timed with the trace session off and on, in the same run.
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
#include "profiler/host_tracer.h"

namespace xlens {
namespace {

// Restarts the session now and then so a long benchmark does not hold millions of spans.
void RecycleSessionEvery(benchmark::State& state, int64_t& count) {
  if (++count % (1 << 20) != 0) return;
  state.PauseTiming();
  profiler::TracerSession::Stop();
  profiler::TracerSession::Start();
  state.ResumeTiming();
}

void BM_SpanDisabled(benchmark::State& state) {
  for (auto _ : state) {
    profiler::TraceSpan span("fusion.3", profiler::category::kCpuKernel);
    benchmark::DoNotOptimize(span.active());
  }
}
BENCHMARK(BM_SpanDisabled);

void BM_SpanEnabled(benchmark::State& state) {
  profiler::TracerSession::Start();
  int64_t count = 0;
  for (auto _ : state) {
    {
      profiler::TraceSpan span("fusion.3", profiler::category::kCpuKernel);
      benchmark::DoNotOptimize(span.active());
    }
    RecycleSessionEvery(state, count);
  }
  profiler::TracerSession::Stop();
}
BENCHMARK(BM_SpanEnabled);

// What a kernel thunk records: a shared description (name, category, six arguments) and its
// two times.
void BM_KernelSpanEnabled(benchmark::State& state) {
  auto info = std::make_shared<const profiler::SpanInfo>(profiler::SpanInfo{
      "fusion.3", profiler::category::kCpuKernel,
      {{"hlo_op", std::string("fusion.3")},
       {"fusion_kind", std::string("kLoop")},
       {"op_names", std::string("dense/add;relu")},
       {"module", std::string("mnist")},
       {"bytes_accessed", int64_t{1 << 20}},
       {"flops", int64_t{1 << 18}}}});
  profiler::TracerSession::Start();
  int64_t count = 0;
  for (auto _ : state) {
    int64_t start = profiler::NowNs();
    profiler::RecordSpan(info, start, profiler::NowNs());
    RecycleSessionEvery(state, count);
  }
  profiler::TracerSession::Stop();
}
BENCHMARK(BM_KernelSpanEnabled);

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct SmallKernelModule {
  std::unique_ptr<runtime::Executable> executable;
  std::string name;
};

SmallKernelModule LoadUnfused(const std::string& path) {
  auto parsed = ParseHloModule(ReadText(path));
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), parsed.status().message().c_str());
    std::abort();
  }
  runtime::CompileOptions options;
  options.optimize.filter.disabled = {"fusion", "multi-output-fusion"};
  auto exe = runtime::CompileForCpu(std::move(*parsed), options);
  if (!exe.ok()) std::abort();
  std::mt19937_64 rng(1);
  std::vector<Literal> args;
  for (const HloInstruction* p : (*exe)->module().entry_computation()->parameter_instructions()) {
    args.push_back(MakeRandomLiteral(p->shape(), rng).value());
  }
  if (!(*exe)->SetArguments(args).ok()) std::abort();
  return {std::move(*exe), std::filesystem::path(path).stem().string()};
}

// The corpus's fibonacci_add_chain unfused: 34 scalar kernels of a few ns each, the worst case
// (the span costs more than the kernel). Without ../shared, the MNIST step stands in.
SmallKernelModule& ScalarChain() {
  static SmallKernelModule* module = [] {
    std::string corpus = std::string(XLENS_SHARED_DIR) + "/corpus/hlo/fibonacci_add_chain.hlo";
    std::string path = std::filesystem::exists(corpus)
                           ? corpus
                           : std::string(XLENS_SOURCE_DIR) + "/samples/mnist_softmax_train_step.hlo";
    return new SmallKernelModule(LoadUnfused(path));
  }();
  return *module;
}

// The MNIST training step of samples/ unfused: 30-odd small kernels over 100x10 arrays and two
// dots, the kind of program the tutorial traces.
SmallKernelModule& MnistUnfused() {
  static SmallKernelModule* module = new SmallKernelModule(
      LoadUnfused(std::string(XLENS_SOURCE_DIR) + "/samples/mnist_softmax_train_step.hlo"));
  return *module;
}

// Runs the module in batches and reports the fastest batch's time per run (the shared machine's
// noise inflates means; the minimum is the figure least disturbed).
void RunModule(benchmark::State& state, SmallKernelModule& module, bool traced) {
  runtime::Executable& exe = *module.executable;
  if (traced) profiler::TracerSession::Start();
  const int batch = static_cast<int>(state.range(0));
  double best = 1e30;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) (void)exe.Run();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, seconds / batch);
    state.SetIterationTime(seconds);
    if (traced) {
      // Keep memory flat: a fresh session per batch, outside the timed part.
      profiler::TracerSession::Stop();
      profiler::TracerSession::Start();
    }
  }
  if (traced) profiler::TracerSession::Stop();
  state.counters["best_us_per_run"] = best * 1e6;
  state.counters["thunks"] = static_cast<double>(exe.thunks().size());
  state.SetLabel(module.name + (traced ? " traced" : " untraced"));
}

void BM_ScalarChain_Untraced(benchmark::State& state) { RunModule(state, ScalarChain(), false); }
void BM_ScalarChain_Traced(benchmark::State& state) { RunModule(state, ScalarChain(), true); }
void BM_MnistUnfused_Untraced(benchmark::State& state) { RunModule(state, MnistUnfused(), false); }
void BM_MnistUnfused_Traced(benchmark::State& state) { RunModule(state, MnistUnfused(), true); }
// Each pair twice, interleaved, so drift on the shared machine hits both alike.
BENCHMARK(BM_ScalarChain_Untraced)->UseManualTime()->Iterations(30)->Arg(200);
BENCHMARK(BM_ScalarChain_Traced)->UseManualTime()->Iterations(30)->Arg(200);
BENCHMARK(BM_ScalarChain_Untraced)->UseManualTime()->Iterations(30)->Arg(200);
BENCHMARK(BM_ScalarChain_Traced)->UseManualTime()->Iterations(30)->Arg(200);
BENCHMARK(BM_MnistUnfused_Untraced)->UseManualTime()->Iterations(30)->Arg(20);
BENCHMARK(BM_MnistUnfused_Traced)->UseManualTime()->Iterations(30)->Arg(20);
BENCHMARK(BM_MnistUnfused_Untraced)->UseManualTime()->Iterations(30)->Arg(20);
BENCHMARK(BM_MnistUnfused_Traced)->UseManualTime()->Iterations(30)->Arg(20);

}  // namespace
}  // namespace xlens
