// `xlens trace summary FILE`: what a timeline holds, in text. The kernels that took the most time
// (host kernels, library calls and GPU kernels alike, grouped by name) and the totals per
// category, from any trace the reader reads.
#pragma once

#include <string>

#include "profiler/trace.h"

namespace xlens::profiler {

std::string SummarizeTrace(const Trace& trace, int top_kernels = 15);

}  // namespace xlens::profiler
