// machine_limits --paired: a compiled module's runs alternated, pair by pair, with single passes of
// the stream kernels over the same bytes, in one process. A shared machine's memory runs in slow
// and fast phases (STREAM copy 50-89 GB/s from one minute to the next); a floor measured in
// another process, even seconds away, can meet another phase than the runs it judges (chain8 and
// triad moved the same bytes in the same time, 51.6 GB/s each, yet read 58% and 95% of the floors
// measured right around their rounds). A run and the pass right after it meet the same phase, so
// the distribution of per-pair ratios answers whether the module moves bytes as fast as the
// kernel does, whatever the weather.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/support/status.h"
#include "profiler/machine_limits.h"

namespace xlens::bench {

// A floor other than a stream kernel, timed right after each of the module's runs (after the
// kernels): `time_ms` measures it now and returns its time for the module's work, e.g. the
// module's library calls run standalone.
struct PairedFloor {
  std::string name;
  std::function<StatusOr<double>()> time_ms;
};

struct PairedOptions {
  std::string hlo_file;
  // arg0.npy, arg1.npy, ... as `xlens run --inputs DIR` reads them; empty: random values with
  // xlens run's default seed, as `xlens run` makes them without --inputs.
  std::string inputs_dir;
  // The kernels the row's rule needs (roofline.py: read for a reduction, copy and triad for the
  // rest), each timed over about 1 ms of passes per pair, in this order after the module's run.
  std::vector<profiler::StreamKernel> kernels;
  // The working set the kernels walk: the module's bytes (arguments and results); 0 counts them.
  int64_t bytes = 0;
  std::vector<PairedFloor> floors;
  int pairs = 30;
  // The slices the kernels' arrays are cut into (each first touched by a thread of its own); the
  // passes run on the module's pool, ThreadPool::Default(), whatever this is.
  int threads = 1;
  // --xla_xlens_persistent_cache_dir, as `xlens run` takes it: kernel choices timed at compile
  // time (and compiled kernels) are taken from and kept here, so that the module runs the same
  // kernels as the benchmark's `xlens run` processes that share the directory.
  std::string persistent_cache_dir;
};

// Compiles the module as `xlens run` does (runtime::CompileForCpu, the default options with
// `persistent_cache_dir`), runs it
// once untimed, then `pairs` times: one timed run of the module, then each kernel timed over
// about 1 ms of passes ("passes_per_pair", 1 for a pass that long). JSON: "bytes", "in_cache",
// "warm_runs" and "warm_passes" (the untimed runs before each timed run of the module, and the
// untimed passes before each kernel's timed ones: as many on both sides where the working set is
// in the cache), "pairs", "module_ms" (per pair), and per kernel "gbps" (per pair, as STREAM counts its bytes),
// "streaming_pairs" (of the pairs, those where non-temporal stores beat plain ones: a pair
// times both variants where the kernel has two, on the pool's threads, and keeps the faster),
// "passes_per_pair" and "ratio" (the module's time against the kernel's over the
// same bytes, per pair: "median", "q1", "q3", and "best_of_each", the best pass against the best run);
// and per floor under "floors", its "ms" per pair and the same "ratio".
StatusOr<nlohmann::json> RunPaired(const PairedOptions& options);

}  // namespace xlens::bench
