// The tests `xlens reduce` keeps failing: a user's shell command, or a built-in one. Every run of a
// test is bounded by `timeout_seconds`: a command is killed with its process group; a built-in
// test's evaluations are cancelled, and a candidate that runs past the limit does not fail the
// test. Compiled code cannot be cancelled: a built-in test whose compiled candidate never ends is
// stopped by the watchdog, which ends the process with one line (a command test has no such
// limit).
//   crash       `xlens run` on the candidate dies of a signal or exits with neither 0 nor 1
//   miscompare  the compiled result departs from the evaluator's (in this process)
//   bisect      bisect still names the same culprit (the same pass, or a kernel / pass kind)
//   COMMAND     a shell command given the candidate's path ("{}" in it, else appended) that
//               exits non-zero while the bug is there
#pragma once

#include <string>
#include <vector>

#include "compiler/hlo/literal_comparison.h"
#include "compiler/tools/hlo_reducer.h"
#include "compiler/tools/module_runner.h"

namespace xlens::tools {

struct ReductionTestSpec {
  std::string test;                 // "crash", "miscompare", "bisect" or a shell command
  double timeout_seconds = 60;      // per run of the test, built-in or command; 0: none
  double max_work = 1e12;           // built-in tests: the evaluator's largest instruction
  CompileSettings compile;          // miscompare and bisect
  ErrorSpec tolerance{1e-3, 1e-3};
  uint64_t seed = 42;               // random arguments of each candidate
  std::string xlens_binary;         // crash: the `xlens` to run
  std::vector<std::string> xlens_flags;  // crash: --xla_* flags for `xlens run`
  std::string work_directory;       // where the candidate file is written for commands
};

// The test. Its first call must be on the module as given: a command that cannot run (exit 126
// or 127) or times out there is an error that says so, rather than a reduction of nothing.
StatusOr<ReductionTest> MakeReductionTest(const ReductionTestSpec& spec);

}  // namespace xlens::tools
