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
// forces, and one entry of the persistent cache (DIR/HASH.xlenschoice beside the object cache's
// entries, one file per machine and key, so processes never rewrite each other's files).
//
// Whatever the file holds, reading it never crashes: a document that is not this format, a
// wrong type, a winner that is not among the candidates, a time that is not a finite
// non-negative number, a key or name of more than kMaxTextBytes, are each one error naming
// what is wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/status.h"

namespace xlens::runtime {

struct KernelChoiceRecord {
  std::string machine;                  // MachineForKernelChoices() where it was timed
  std::string key;                      // what the times depend on (the caller's key)
  std::vector<std::string> candidates;  // their names, in the caller's order
  std::vector<double> best_ms;          // each candidate's best run
  int winner = 0;                       // index into candidates
};

inline constexpr int kKernelChoiceFormatVersion = 1;
// The longest key or candidate name read (keys are a line of shape text).
inline constexpr size_t kMaxTextBytes = 4096;
// The largest cache entry read (one choice), and the largest file loaded by flag.
inline constexpr int64_t kMaxCacheEntryBytes = 64 << 10;
inline constexpr int64_t kMaxChoicesFileBytes = 16 << 20;

// The machine a timing holds for: the CPU LLVM names, a digest of its features, and the number
// of hardware threads (the pool's size, in the key, is one of the caller's).
const std::string& MachineForKernelChoices();

std::string SerializeKernelChoices(const std::vector<KernelChoiceRecord>& records);
// The records of a document; `source` names it in errors.
StatusOr<std::vector<KernelChoiceRecord>> ParseKernelChoices(std::string_view text, std::string_view source);

// The persistent cache's entry for (machine, key) in `dir`: its record, or nothing when there is
// none. An entry that cannot be read, is not one document of one record, or holds another
// machine's or key's record is not returned; why goes into `warning`.
std::string KernelChoiceCachePath(const std::string& dir, const std::string& machine, const std::string& key);
std::optional<KernelChoiceRecord> LookupKernelChoice(const std::string& dir, const std::string& machine,
                                                     const std::string& key, std::string* warning);
// Writes `record` as its entry in `dir` (created 0700 when missing; a directory that is not
// private is refused, as the object cache refuses it), atomically. A failure goes into `warning`.
void StoreKernelChoice(const std::string& dir, const KernelChoiceRecord& record, std::string* warning);

}  // namespace xlens::runtime
