// Runs a program with a time limit, in a process group of its own: the tests `xlens reduce` runs
// on its candidates, and ptxas.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "compiler/support/status.h"

namespace xlens {

struct CommandOutcome {
  int exit_code = 0;       // when it exited
  int signal = 0;          // when a signal ended it (not our timeout)
  bool timed_out = false;  // killed by us after the time limit, with every process it started
  std::string output;      // the end of its stdout and stderr together (RunCommand's limit)
  // "exit 3", "killed by signal 11 (Segmentation fault)", "timed out after 5 s".
  std::string Describe(double timeout_seconds) const;
};

// Runs `argv` (argv[0] looked up in PATH) in a process group of its own, stdin from /dev/null,
// stdout and stderr captured; after `timeout_seconds` (0: none) the whole group is killed. An
// error only when the process cannot be started at all. `output` keeps the last
// `max_output_bytes` of what it printed.
StatusOr<CommandOutcome> RunCommand(const std::vector<std::string>& argv, double timeout_seconds,
                                    size_t max_output_bytes = 4096);

// Single quotes for /bin/sh.
std::string ShellQuote(const std::string& text);

}  // namespace xlens
