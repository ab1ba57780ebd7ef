// `xlens trace`: reading timelines. `summary` says where the time went in any trace the reader
// reads (ours, PyTorch's profiler's, chrome://tracing's), streaming the file: a trace of any size
// is summarized in the memory the summary needs.
#include <cstdio>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "profiler/trace_summary.h"

namespace xlens::cli {

int RunTraceSummary(const TraceSummaryArgs& args) {
  if (args.top < 0) return Fail(Error("trace summary: --top must be 0 or more"));
  auto summary = profiler::SummarizeChromeTrace(args.file, args.top);
  if (!summary.ok()) return Fail(summary.status());
  // Written whole: the text is escaped, but a write must not stop at any byte either.
  if (std::fwrite(summary->data(), 1, summary->size(), stdout) != summary->size() || std::fflush(stdout) != 0) {
    return Fail(Error("cannot write the summary to standard output"));
  }
  return 0;
}

}  // namespace xlens::cli
