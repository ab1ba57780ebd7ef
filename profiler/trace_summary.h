// `xlens trace summary FILE`: what a timeline holds, in text. The kernels that took the most time
// (host kernels, library calls and GPU kernels alike, grouped by name) and the totals per
// category, from any trace the reader reads.
//
// Names and categories come from the file: they are printed escaped (EscapeForTerminal), so a
// NUL or an escape sequence in a name shows as text instead of cutting the line or reaching the
// terminal, and names past 1000 bytes are shortened with their length shown. Totals are summed in
// 128 bits: no sum of durations overflows, whatever the file holds.
#pragma once

#include <string>

#include "compiler/support/status.h"
#include "profiler/trace.h"

namespace xlens::profiler {

// The per-device collectives section of the summary (empty when the trace has no collective
// spans): one line per device with its collectives, the bytes they brought, the time it waited
// in them and the device it waited for longest.
std::string SummarizeDeviceCollectives(const Trace& trace);

// The summary of a trace in memory.
std::string SummarizeTrace(const Trace& trace, int top_kernels = 15);

// The summary of the trace file at `path`, streamed: memory holds one entry per kernel name and
// per category, never the file's events. Flows are not bound (unbound_flow_points is shown only
// when the file's otherData has it).
StatusOr<std::string> SummarizeChromeTrace(const std::string& path, int top_kernels = 15);

}  // namespace xlens::profiler
