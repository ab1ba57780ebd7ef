#include "tests/bench/paired_run.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>

#include <fmt/format.h>

#include "compiler/hlo/npy.h"
#include "compiler/hlo/parser.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/runtime/executable.h"
#include "compiler/support/file_io.h"
#include "compiler/support/thread_pool.h"
#include "compiler/tools/module_runner.h"

namespace xlens::bench {
namespace {

using Json = nlohmann::json;

int64_t LiteralBytes(const Literal& literal) {
  if (!literal.shape().IsTuple()) return static_cast<int64_t>(literal.size_bytes());
  int64_t bytes = 0;
  for (const Literal& element : literal.tuple_elements()) bytes += LiteralBytes(element);
  return bytes;
}

// The value at `q` (0 to 1) of sorted `v`, interpolated between its neighbours.
double Quantile(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(at);
  if (below + 1 >= sorted.size()) return sorted.back();
  return sorted[below] + (at - static_cast<double>(below)) * (sorted[below + 1] - sorted[below]);
}

// The arguments as `xlens run` makes them: DIR/argI.npy, or random with its default seed (42).
StatusOr<std::vector<Literal>> Arguments(const HloModule& module, const std::string& dir) {
  if (dir.empty()) return tools::RandomArguments(module, 42);
  std::vector<Literal> arguments;
  for (int64_t i = 0; i < module.entry_computation()->num_parameters(); ++i) {
    ASSIGN_OR_RETURN(Literal literal, ReadNpy(fmt::format("{}/arg{}.npy", dir, i)));
    arguments.push_back(std::move(literal));
  }
  return arguments;
}

}  // namespace

StatusOr<Json> RunPaired(const PairedOptions& options) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(options.hlo_file));
  ASSIGN_OR_RETURN(std::unique_ptr<HloModule> module,
                   ParseHloModule(text, ParseOptions{.verify = true, .filename = options.hlo_file}));
  ASSIGN_OR_RETURN(std::vector<Literal> arguments, Arguments(*module, options.inputs_dir));
  runtime::CompileOptions compile_options;
  compile_options.persistent_cache_dir = options.persistent_cache_dir;
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                   runtime::CompileForCpu(std::move(module), compile_options));
  RETURN_IF_ERROR(executable->SetArguments(arguments));
  RETURN_IF_ERROR(executable->Run());  // first touch of the arena, as xlens run's untimed run
  int64_t bytes = options.bytes;
  if (bytes <= 0) {
    ASSIGN_OR_RETURN(Literal results, executable->Results());
    bytes = LiteralBytes(results);
    for (const Literal& argument : arguments) bytes += LiteralBytes(argument);
  }
  auto ms_since = [](std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  // The kernels run on the pool the module's loops run on (ThreadPool::Default()): the same
  // threads, started once, waiting between passes as between a module's loops, and stealing
  // each other's blocks. Timed on a team of threads started per timing and split evenly, the
  // kernels were the load-sensitive side of every pair: an identical b + 3c module over 48 MiB
  // beat its own triad floor. Alternating both ways, 6 processes of 10 pairs each at load 4.7-5.3
  // (each pair keeping its faster store variant in both): kernel/module median 0.59-0.86 on the
  // pool against 0.68-1.61 on a team per timing (5 of 6 at 0.99 or more), best passes 104-121
  // against 49-114 GB/s.
  ThreadPool& pool = ThreadPool::Default();
  // Each kernel's arrays, first touched, and its passes per pair: as many as take about 1 ms at
  // the best of four untimed-for-the-result passes of each store variant, each pass the mean: a
  // pass's wake-up of the pool costs tens of microseconds on a busy VM, which one pass of
  // row_reduce's 16 MiB in the cache (0.1 ms) would carry (the sum's median single pass 28 GB/s
  // beside other work, its best 122).
  std::vector<std::unique_ptr<profiler::StreamArrays>> arrays;
  std::vector<int64_t> passes;
  for (profiler::StreamKernel kernel : options.kernels) {
    arrays.push_back(std::make_unique<profiler::StreamArrays>(kernel, bytes, options.threads));
    int64_t best = INT64_MAX;
    for (int variant = 0; variant < (arrays.back()->has_streaming_variant() ? 2 : 1); ++variant) {
      for (int i = 0; i < 4; ++i) best = std::min(best, arrays.back()->TimeNs(1, variant == 1, pool));
    }
    passes.push_back(std::max<int64_t>(1, 1'000'000 / std::max<int64_t>(1, best)));
  }
  // A working set the last-level cache holds is timed there, as `xlens run`'s back-to-back runs
  // and the sweep's repeated passes find it: each timed run and each kernel's timed passes follow
  // kWarmRuns untimed ones of their own, or the module and the kernel evict each other's bytes and
  // both are timed from memory (column reduce's 16 MiB: 0.37-0.6 ms paired cold, 0.12 ms in xlens
  // run), and the pool's workers, asleep after the other side's work, have not yet found the pace
  // of runs that follow each other (one untimed run against three, alternating, 60 pairs each:
  // column reduce's medians 0.29-0.62 against 0.17-0.39 ms, bests 0.185-0.248 against
  // 0.137-0.152). The kernels are warmed as the module is: after one untimed pass against the
  // module's three, softmax's copy ran 16-23 GB/s in the median pair, and the
  // row read 73-137% of the pair floor; after three, 24-28 and 61-94% (4 alternating processes of
  // 20 pairs at load 5; row reduce's read-only sum moved less than the load moves it).
  const bool in_cache = bytes <= profiler::LastLevelCacheBytes();
  constexpr int kWarmRuns = 3;
  // A floor such as the library calls' leaves the pool's workers asleep behind it (it pauses for
  // OpenMP's threads to stop spinning), so the module's timed run follows warm-ups there too.
  const bool warm_up = in_cache || !options.floors.empty();
  std::vector<double> module_ms;
  std::vector<std::vector<double>> kernel_ms(options.kernels.size());
  // Each pair times both store variants where the kernel has two and keeps the faster: chosen
  // once from a few untimed passes the variant flipped from run to run beside other work (one
  // run's triad took plain stores, ratio median 1.38; the next streaming ones, 0.88).
  std::vector<int> streaming_pairs(options.kernels.size(), 0);
  std::vector<std::vector<double>> floor_ms(options.floors.size());
  // The fewest untimed runs the module's timed run followed, and untimed passes any kernel's timed
  // passes followed (reported as run, so that the test sees what the loops did).
  int fewest_warm_passes = -1;
  int fewest_warm_runs = -1;
  for (int pair = 0; pair < options.pairs; ++pair) {
    int warm_runs = 0;
    for (int warm = 0; warm_up && warm < kWarmRuns; ++warm, ++warm_runs) RETURN_IF_ERROR(executable->Run());
    fewest_warm_runs = fewest_warm_runs < 0 ? warm_runs : std::min(fewest_warm_runs, warm_runs);
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(executable->Run());
    module_ms.push_back(ms_since(start));
    for (size_t k = 0; k < arrays.size(); ++k) {
      double best_ms = 0;
      for (int variant = 0; variant < (arrays[k]->has_streaming_variant() ? 2 : 1); ++variant) {
        int warm_passes = 0;
        for (int warm = 0; in_cache && warm < kWarmRuns; ++warm, ++warm_passes) {
          arrays[k]->TimeNs(1, variant == 1, pool);
        }
        fewest_warm_passes = fewest_warm_passes < 0 ? warm_passes : std::min(fewest_warm_passes, warm_passes);
        const double ms = arrays[k]->TimeNs(passes[k], variant == 1, pool) / 1e6 / static_cast<double>(passes[k]);
        if (variant == 0 || ms < best_ms) {
          streaming_pairs[k] += variant == 1 ? 1 : 0;
          best_ms = ms;
        }
      }
      kernel_ms[k].push_back(best_ms);
    }
    for (size_t f = 0; f < options.floors.size(); ++f) {
      ASSIGN_OR_RETURN(double ms, options.floors[f].time_ms());
      floor_ms[f].push_back(ms);
    }
  }
  const double best_module = *std::min_element(module_ms.begin(), module_ms.end());
  // A floor's time against the module's run of the same pair, over the pairs.
  auto ratios_of = [&](const std::vector<double>& floor, double scale) {
    std::vector<double> ratios;
    for (int pair = 0; pair < options.pairs; ++pair) ratios.push_back(floor[pair] * scale / module_ms[pair]);
    std::sort(ratios.begin(), ratios.end());
    const double best_floor = *std::min_element(floor.begin(), floor.end()) * scale;
    return Json{{"median", Quantile(ratios, 0.5)}, {"q1", Quantile(ratios, 0.25)}, {"q3", Quantile(ratios, 0.75)},
                {"best_of_each", best_floor / best_module}};
  };
  Json kernels = Json::object();
  for (size_t k = 0; k < arrays.size(); ++k) {
    // The kernel's time over the module's bytes (its arrays round the working set down to whole
    // vector steps per thread), against the module's run of the same pair.
    const double scale = static_cast<double>(bytes) / static_cast<double>(arrays[k]->moved_bytes());
    std::vector<double> gbps;
    for (int pair = 0; pair < options.pairs; ++pair) {
      gbps.push_back(static_cast<double>(arrays[k]->moved_bytes()) / (kernel_ms[k][pair] * 1e6));
    }
    kernels[profiler::StreamKernelName(options.kernels[k])] = {{"gbps", gbps},
                                                              {"streaming_pairs", streaming_pairs[k]},
                                                              {"passes_per_pair", passes[k]},
                                                              {"ratio", ratios_of(kernel_ms[k], scale)}};
  }
  Json floors = Json::object();
  for (size_t f = 0; f < options.floors.size(); ++f) {
    floors[options.floors[f].name] = {{"ms", floor_ms[f]}, {"ratio", ratios_of(floor_ms[f], 1.0)}};
  }
  return Json{{"file", options.hlo_file}, {"bytes", bytes},         {"in_cache", in_cache},
              {"warm_runs", std::max(fewest_warm_runs, 0)}, {"warm_passes", std::max(fewest_warm_passes, 0)},
              {"pairs", options.pairs},   {"threads", options.threads}, {"module_ms", module_ms},
              {"kernels", kernels},       {"floors", floors}};
}

}  // namespace xlens::bench
