// Reads a Chrome Trace Event file back into a Trace: what WriteChromeTrace writes, what PyTorch's
// profiler (Kineto) writes, and Chrome's plain array form. Gzip is recognised by its magic bytes,
// whatever the name.
//
// Complete events ("X"), begin/end pairs ("B"/"E"), instants ("i"), process and thread names and
// sort indices ("M") and flows ("s"/"f", bound to the event that starts where the flow point is)
// are read; counters and other phases are skipped. Times become baseTimeNanoseconds (0 when
// absent) plus the event's ts, in nanoseconds: the reader's clock is the file's.
//
// Broken input (not JSON, truncated, wrong types, events without a phase) is an error naming the
// file and, for JSON errors, the line and column; for a bad event, its index and name.
#pragma once

#include <string>

#include "compiler/support/status.h"
#include "profiler/trace.h"

namespace xlens::profiler {

StatusOr<Trace> ReadChromeTrace(const std::string& path);

// The same from text already in memory; `source` names it in errors.
StatusOr<Trace> ParseChromeTrace(const std::string& text, const std::string& source);

}  // namespace xlens::profiler
