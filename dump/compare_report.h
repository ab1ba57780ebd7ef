// The JSON `xlens compare DIR --json FILE` writes (compiler/cli/compare_command.cc, ModuleJson and
// KernelJson), read back for the viewer, which reads files and never runs xlens:
//
//   {"directory", "modules": [{"id", "name", "before", "after", "backend",
//      "xla": {"kernel_count", "kernels": [KERNEL, ...]}, "xlens": {... the same},
//      "pairs": [{"xla", "xlens", "jaccard", "shared_atoms", "exact", "by"}],
//      "xla_fused_more": [{"kernel", "xlens_kernels": [...]}],
//      "xlens_fused_more": [{"kernel", "xla_kernels": [...]}], "xlens_run_problem"?}],
//    "skipped": [{"id", "name", "reason"}], "trace"?: {"file", "events", ...}, "xlens_trace"?}
//   KERNEL: {"name", "kind", "op_names", "instructions", "source": {"file", "line", "function"} or
//            null, "matched": NAME or null, "reason" (when unmatched), "trace"?: {"events", "total_us"}}
//
// Every field is checked: a file that is not such a report (hand-edited, truncated, another
// program's) is one error naming the file and what was expected there, never a crash. Names that
// pairs and notes refer to must be kernels of their side, so the viewer can index them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/status.h"

namespace xlens {

// Reports are a few MiB at most; anything far past that is not one.
inline constexpr int64_t kMaxCompareReportBytes = int64_t{256} << 20;

struct CompareKernelTime {
  int64_t events = 0;
  double total_us = 0;
};

struct CompareSource {
  std::string file;
  int64_t line = 0;
  std::string function;
};

struct CompareKernel {
  std::string name;
  std::string kind;  // the fusion kind, else the opcode
  std::vector<std::string> op_names;
  std::vector<std::string> instructions;
  std::optional<CompareSource> source;
  std::optional<std::string> matched;  // the other side's kernel it is paired with
  std::string reason;                  // why it is unpaired (empty when paired)
  std::optional<CompareKernelTime> time;
  int pair = -1;  // index into CompareModule::pairs, -1: unpaired (derived on reading)
};

struct ComparePair {
  std::string xla, xlens;
  size_t xla_index = 0, xlens_index = 0;  // into CompareModule::xla / xlens
  double jaccard = 0;                     // the overlap score, in [0, 1]
  int64_t shared_atoms = 0;
  bool exact = false;
  std::string by;  // "atoms" or "short_atoms"
};

// A kernel of one side that runs what the other side runs as several kernels.
struct CompareFusedMore {
  std::string kernel;
  size_t index = 0;                  // into its side's kernels
  std::vector<std::string> others;   // the other side's kernels
};

struct CompareModule {
  int64_t id = 0;
  std::string name, before, after, backend;
  std::vector<CompareKernel> xla, xlens;
  std::vector<ComparePair> pairs;
  std::vector<CompareFusedMore> xla_fused_more, xlens_fused_more;
  std::string xlens_run_problem;
};

struct CompareSkipped {
  int64_t id = 0;
  std::string name, reason;
};

struct CompareReport {
  std::string directory;
  std::vector<CompareModule> modules;
  std::vector<CompareSkipped> skipped;
  std::string xla_trace, xlens_trace;  // the profiles' file names, empty when not given

  const CompareModule* FindModule(int64_t id) const;
};

// Parses a report's text; errors say where in it (e.g. "modules[0].pairs[3].xla: ...").
StatusOr<CompareReport> ParseCompareReport(std::string_view text);
// Reads and parses `path` (at most kMaxCompareReportBytes); errors start with the path.
StatusOr<CompareReport> ReadCompareReport(const std::string& path);

}  // namespace xlens
