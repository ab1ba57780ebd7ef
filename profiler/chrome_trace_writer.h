// Writes a Trace as Chrome Trace Event JSON (timeline.ctf.json), as Perfetto UI,
// chrome://tracing and the tools that read PyTorch profiler traces load it:
//
//   {"schemaVersion":1, "displayTimeUnit":"ms", "baseTimeNanoseconds":N, "distributedInfo":...,
//    "otherData":{...counters...}, "traceEvents":[
//      {"ph":"M","name":"process_name",...}, {"ph":"X","cat":"cpu_kernel","name":"fusion.3",
//       "pid":0,"tid":1,"ts":12.345,"dur":6.789,"args":{...}}, {"ph":"s",...}, {"ph":"f",...}]}
//
// baseTimeNanoseconds is the wall-clock time (Unix epoch) of the trace's base when the trace
// knows it, as PyTorch writes it; `ts` and `dur` are microseconds after it, printed to the nanosecond, so no
// timestamp needs more digits than a double holds exactly. displayTimeUnit is "ms" as PyTorch
// writes it: some older viewers let "ns" change how ts is read. distributedInfo is written as
// HolisticTraceAnalysis looks for it ("rank": 0, with the space).
//
// The JSON is streamed through a small buffer (to gzip when the name ends in .gz) into an
// OutputFile (compiler/support/file_io.h): a regular file is written beside the target and renamed
// over it at the end, so a failed write never leaves a half trace under the user's name; a
// symlink's target is replaced and the link kept; a device such as /dev/null or a FIFO is written
// through, never replaced.
#pragma once

#include <string>
#include <string_view>

#include "compiler/support/status.h"
#include "profiler/trace.h"

namespace xlens::profiler {

Status WriteChromeTrace(const Trace& trace, const std::string& path);

// Appends `text` to `out` as the inside of a JSON string: quotes, backslashes and control
// characters escaped, bytes that are not UTF-8 replaced by U+FFFD.
void AppendJsonEscaped(std::string_view text, std::string& out);

// Microseconds with three decimals for a nanosecond count ("-0.250", "12.345").
std::string FormatMicros(int64_t ns);

}  // namespace xlens::profiler
