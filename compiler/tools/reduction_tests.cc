#include "compiler/tools/reduction_tests.h"

#include <memory>

#include <fmt/format.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/printer.h"
#include "compiler/support/file_io.h"
#include "compiler/support/subprocess.h"
#include "compiler/support/terminal_text.h"
#include "compiler/tools/hlo_bisect.h"

namespace xlens::tools {
namespace {

std::string Tail(const std::string& output) {
  std::string t = output;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  const size_t cut = t.size() > 400 ? t.rfind('\n', t.size() - 400) : std::string::npos;
  if (cut != std::string::npos) t = t.substr(cut + 1);
  return DisplayText(t);
}

// Runs a command on the candidate written to a file; `failing` judges the outcome.
ReductionTest CommandTest(ReductionTestSpec spec,
                          std::function<std::vector<std::string>(const std::string&)> command,
                          std::function<bool(const CommandOutcome&)> failing,
                          std::string description) {
  auto first = std::make_shared<bool>(true);
  return [spec, command, failing, description, first](const HloModule& candidate) -> StatusOr<bool> {
    const std::string path = spec.work_directory + "/candidate.hlo";
    RETURN_IF_ERROR(WriteFileAtomic(path, PrintModule(candidate)));
    ASSIGN_OR_RETURN(CommandOutcome outcome, RunCommand(command(path), spec.timeout_seconds));
    const bool was_first = *first;
    *first = false;
    if (was_first && outcome.timed_out) {
      return Error(fmt::format("{} timed out after {:g} s on the module as given (raise --timeout, "
                               "or make the test quicker)",
                               description, spec.timeout_seconds));
    }
    if (was_first && outcome.signal == 0 &&
        (outcome.exit_code == 126 || outcome.exit_code == 127)) {
      return Error(fmt::format("{} cannot run (exit {}: {})", description, outcome.exit_code,
                               Tail(outcome.output)));
    }
    if (outcome.timed_out || outcome.exit_code == 126 || outcome.exit_code == 127) return false;
    return failing(outcome);
  };
}

ReductionTest MiscompareTest(ReductionTestSpec spec) {
  return [spec](const HloModule& candidate) -> StatusOr<bool> {
    StatusOr<std::vector<Literal>> args = RandomArguments(candidate, spec.seed);
    if (!args.ok()) return false;
    StatusOr<Literal> expected = EvaluateModule(candidate, *args);
    if (!expected.ok()) return false;
    StatusOr<CompiledRun> run = CompileAndRun(candidate, *args, spec.compile);
    if (!run.ok()) return false;
    return !ExpectLiteralNear(*expected, run->result, spec.tolerance).ok();
  };
}

// The same verdict as on the module as given: the same culprit pass, or the same kind.
ReductionTest BisectTest(ReductionTestSpec spec) {
  struct Verdict {
    bool known = false;
    CulpritKind kind = CulpritKind::kNone;
    std::string pass;
  };
  auto original = std::make_shared<Verdict>();
  return [spec, original](const HloModule& candidate) -> StatusOr<bool> {
    StatusOr<std::vector<Literal>> args = RandomArguments(candidate, spec.seed);
    if (!args.ok()) return false;
    BisectOptions options;
    options.compile = spec.compile;
    options.tolerance = spec.tolerance;
    StatusOr<BisectResult> result = BisectModule(candidate, *args, options);
    if (!original->known) {
      if (!result.ok()) return result.status();
      *original = {true, result->kind, result->pass};
      return result->kind != CulpritKind::kNone;
    }
    if (!result.ok()) return false;
    return result->kind == original->kind && result->pass == original->pass;
  };
}

}  // namespace

StatusOr<ReductionTest> MakeReductionTest(const ReductionTestSpec& spec) {
  if (spec.test == "miscompare") return MiscompareTest(spec);
  if (spec.test == "bisect") return BisectTest(spec);
  if (spec.test.empty()) return Error("--test: give crash, miscompare, bisect or a shell command");
  if (spec.work_directory.empty()) return Error("reduce: no directory for the candidates");
  if (spec.test == "crash") {
    if (spec.xlens_binary.empty()) return Error("--test=crash: cannot find the xlens binary");
    return CommandTest(
        spec,
        [spec](const std::string& path) {
          std::vector<std::string> argv = {spec.xlens_binary, "run", path};
          argv.insert(argv.end(), spec.xlens_flags.begin(), spec.xlens_flags.end());
          return argv;
        },
        [](const CommandOutcome& o) { return o.signal != 0 || (o.exit_code != 0 && o.exit_code != 1); },
        "--test=crash (xlens run)");
  }
  const std::string command = spec.test;
  return CommandTest(
      spec,
      [command](const std::string& path) {
        std::string line = command;
        const std::string quoted = ShellQuote(path);
        if (line.find("{}") == std::string::npos) {
          line += " " + quoted;
        } else {
          for (size_t at = line.find("{}"); at != std::string::npos; at = line.find("{}", at + quoted.size())) {
            line.replace(at, 2, quoted);
          }
        }
        return std::vector<std::string>{"/bin/sh", "-c", line};
      },
      [](const CommandOutcome& o) { return o.signal != 0 || o.exit_code != 0; },
      fmt::format("the test '{}'", DisplayText(command)));
}

}  // namespace xlens::tools
