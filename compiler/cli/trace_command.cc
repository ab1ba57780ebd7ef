// `xlens trace`: reading timelines. `summary` says where the time went in any trace the reader
// reads (ours, PyTorch's profiler's, chrome://tracing's).
#include <cstdio>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "profiler/chrome_trace_reader.h"
#include "profiler/trace_summary.h"

namespace xlens::cli {

int RunTraceSummary(const TraceSummaryArgs& args) {
  auto trace = profiler::ReadChromeTrace(args.file);
  if (!trace.ok()) return Fail(trace.status());
  std::fputs(profiler::SummarizeTrace(*trace, args.top).c_str(), stdout);
  return 0;
}

}  // namespace xlens::cli
