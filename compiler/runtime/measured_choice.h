// A choice between implementations of one call made by timing them, as XLA's GPU autotuner
// chooses a GEMM or convolution algorithm: when a thunk has two kernels for its shape and no
// rule picks the faster on every machine, it runs each on scratch buffers at build, a few
// alternating rounds, and keeps the faster. The pick is cached for the process under a key that
// names the shape (the machine is the one the process runs on), so a module compiled again, or a
// layer repeated in a network, is not timed again.
//
// Each candidate runs on the calling thread and is timed by that thread's CPU time, which a
// machine busy with other work disturbs far less than the wall clock (a run descheduled halfway
// is not charged the wait); what remains (caches and memory shared with that work) is met by
// taking each candidate's best run, in blocks of runs of its own, the blocks alternating.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace xlens::runtime {

// How a thunk with candidates chooses: by timing them (the default), or by the fixed rule it
// falls back on (deterministic: what tests that check a kernel by name use, and
// --xla_cpu_xlens_measure_kernel_choice=false).
enum class KernelChoiceMode { kMeasured, kRule };
KernelChoiceMode GetKernelChoiceMode();
void SetKernelChoiceMode(KernelChoiceMode mode);

struct MeasuredChoice {
  int winner = 0;                // index of the fastest candidate
  std::vector<double> best_ms;   // each candidate's best run, milliseconds
  bool cached = false;           // taken from an earlier choice under the same key
};

// Runs `candidates` in kPasses passes, the second in the opposite order; in each pass each
// candidate runs kSettleRuns times untimed (to find the caches as its own runs leave them) and
// then kRunsPerBlock times timed (once where its runs take kLongRunMs or more), and the one of
// lowest best time wins. A later call with the same `key` returns the same choice without
// running anything.
inline constexpr int kPasses = 2, kSettleRuns = 2, kRunsPerBlock = 3;
inline constexpr double kLongRunMs = 5;
MeasuredChoice ChooseByMeasuring(const std::string& key, const std::vector<std::function<void()>>& candidates);

// Forgets every cached choice (tests).
void ClearMeasuredChoices();

}  // namespace xlens::runtime
