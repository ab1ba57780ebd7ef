// Kernel choices as files, as XLA keeps its GPU autotuner's results (AutotuneResults, written by
// --xla_gpu_dump_autotune_results_to and read by --xla_gpu_load_autotune_results_from): JSON
// that names the machine, the choice's key, the candidates in order, each one's best time and
// the winner, e.g.
//   {"format": "xlens kernel choices", "version": 1, "choices": [
//     {"machine": "sapphirerapids, features 3f2a..., 2 hardware threads",
//      "key": "depthwise 8x56x56x128 -> ...", "candidates": ["depthwise:avx512",
//      "brdgmm_dw:avx512_core"], "best_ms": [1.340, 0.941], "winner": "brdgmm_dw:avx512_core"}]}
// The same document is a module's dump (module_NNNN.NAME.kernel_choices.json), the file of
// --xla_cpu_xlens_dump_kernel_choices_to, the file --xla_cpu_xlens_load_kernel_choices_from
// forces, and one entry of the persistent cache (compiler/runtime/kernel_choice_file.h, which
// names the machine and keeps the entries). The format is read here, on support alone, so that
// whatever reads a dump or a bundle reads it without linking the compiler, and it is fuzzed
// (tests/fuzz/kernel_choices_fuzz.cc).
//
// Whatever the file holds, reading it never crashes: a document that is not this format, a
// wrong type, a winner that is not among the candidates, a time that is not a finite
// non-negative number, both or neither of "best_ms" and "estimated_run_ms" in a choice, a key
// or name of more than kMaxKernelChoiceTextBytes, are each one error naming what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/status.h"

namespace xlens {

struct KernelChoiceRecord {
  std::string machine;                  // the machine it was timed on (MachineForKernelChoices())
  std::string key;                      // what the times depend on (the caller's key)
  std::vector<std::string> candidates;  // their names, in the caller's order
  std::vector<double> best_ms;          // each candidate's best run; empty: not timed
  int winner = 0;                       // index into candidates
  double estimated_run_ms = 0;          // where not timed: the estimate of one run that kept it so

  bool timed() const { return !best_ms.empty(); }
};

// The document's "format" and "version" (the version written; 1 is read too).
inline constexpr std::string_view kKernelChoiceFormat = "xlens kernel choices";
inline constexpr int kKernelChoiceFormatVersion = 2;
// The longest key or candidate name read (keys are a line of shape text).
inline constexpr size_t kMaxKernelChoiceTextBytes = 4096;
// The largest file of choices loaded by flag.
inline constexpr int64_t kMaxChoicesFileBytes = 16 << 20;

// The document of `records`; times are written to 0.1 us.
std::string SerializeKernelChoices(const std::vector<KernelChoiceRecord>& records);
// The records of a document; `source` names it in errors.
StatusOr<std::vector<KernelChoiceRecord>> ParseKernelChoices(std::string_view text, std::string_view source);

}  // namespace xlens
