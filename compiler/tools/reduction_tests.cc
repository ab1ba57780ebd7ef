#include "compiler/tools/reduction_tests.h"

#include <memory>

#include <fmt/format.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/printer.h"
#include "compiler/support/file_io.h"
#include "compiler/support/subprocess.h"
#include "compiler/support/terminal_text.h"
#include "compiler/support/watchdog.h"
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

// A built-in test's bound: the watchdog of one run, and what a run past it means. A run past the
// limit on the module as given is an error (there is nothing to reduce); on a candidate, it does
// not fail the test.
class BoundedRun {
 public:
  BoundedRun(const ReductionTestSpec& spec, const HloModule& candidate, bool first)
      : spec_(spec), first_(first), watchdog_(spec.timeout_seconds, "reduce") {
    watchdog_.SetActivity(fmt::format(
        "testing {} (--test={}; compiled code that never ends cannot be stopped otherwise: give "
        "the test as a command to skip such candidates)",
        first ? "the module as given" : fmt::format("a candidate of {} instructions", CountInstructions(candidate)),
        spec.test));
  }
  EvaluatorOptions evaluator() const {
    return EvaluatorOptions{.cancel = watchdog_.cancel_flag(), .max_work = spec_.max_work};
  }
  // The verdict once the run is over: `failing` unless the watchdog fired.
  StatusOr<bool> Verdict(bool failing) const {
    if (!watchdog_.fired()) return failing;
    if (first_) {
      return Error(fmt::format("--test={} timed out after {:g} s on the module as given (raise "
                               "--timeout, or make the test quicker)",
                               spec_.test, spec_.timeout_seconds));
    }
    return false;
  }

 private:
  const ReductionTestSpec& spec_;
  const bool first_;
  Watchdog watchdog_;
};

ReductionTest MiscompareTest(ReductionTestSpec spec) {
  auto first = std::make_shared<bool>(true);
  return [spec, first](const HloModule& candidate) -> StatusOr<bool> {
    BoundedRun bound(spec, candidate, *first);
    *first = false;
    StatusOr<std::vector<Literal>> args = RandomArguments(candidate, spec.seed);
    if (!args.ok()) return bound.Verdict(false);
    StatusOr<Literal> expected = EvaluateModule(candidate, *args, bound.evaluator());
    if (!expected.ok()) return bound.Verdict(false);
    StatusOr<CompiledRun> run = CompileAndRun(candidate, *args, spec.compile);
    if (!run.ok()) return bound.Verdict(false);
    return bound.Verdict(!ExpectLiteralNear(*expected, run->result, spec.tolerance).ok());
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
    BoundedRun bound(spec, candidate, !original->known);
    StatusOr<std::vector<Literal>> args = RandomArguments(candidate, spec.seed);
    if (!args.ok()) return false;
    BisectOptions options;
    options.compile = spec.compile;
    options.tolerance = spec.tolerance;
    options.evaluator = bound.evaluator();
    StatusOr<BisectResult> result = BisectModule(candidate, *args, options);
    // Past the limit, whatever bisect concluded from cancelled evaluations does not count.
    if (StatusOr<bool> in_time = bound.Verdict(true); !in_time.ok() || !*in_time) return in_time;
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
