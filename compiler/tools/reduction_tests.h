// The tests `xlens reduce` keeps failing: a user's shell command, or a built-in one.
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
  double timeout_seconds = 60;      // per run of a command (crash and shell commands)
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
