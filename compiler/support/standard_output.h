// Whether everything a command printed reached its standard output.
//
// printf and std::cout buffer what they are given, and a write that fails (stdout on a full disk,
// on /dev/full, on a pipe that broke) only sets the stream's error flag: without a check here a
// command whose output was lost would exit 0. main calls this after the command returns, so
// every command is covered at once, and a failure is one line and exit 1.
#pragma once

#include <cstdio>

#include "compiler/support/status.h"

namespace xlens {

// Flushes std::cout and `stream` (stdout unless told otherwise). An error when the flush failed
// or any earlier write to either did: "cannot write to standard output: No space left on device"
// (the reason when the system still gives one).
Status FlushStandardOutput(std::FILE* stream = stdout);

}  // namespace xlens
