// `xlens inspect DIR --trace FILE`: which of a trace's kernel events ran which kernel of a dump,
// by XLA's names (an event's hlo_op argument, else its name; its hlo_module, when present, picks
// the module). Here, above dump/ and profiler/, which know nothing of each other; the command
// line and Python's xlens.inspect(dir, trace=) both link through it.
#pragma once

#include <string>

#include "compiler/support/status.h"
#include "dump/dump_directory.h"
#include "dump/dump_directory_report.h"

namespace xlens {

// Streams the trace at `trace_path`, counting its events and kernel events and summing the time
// of those that link to a kernel of `dump`. Errors are the trace reader's.
StatusOr<DumpTraceLinks> LinkTraceToDump(const DumpDirectory& dump, const std::string& trace_path);

}  // namespace xlens
