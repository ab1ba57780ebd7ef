// `xlens bisect` and `xlens reduce`: the culprit of a wrong result (a pass, or a kernel's code),
// and the smallest module that still shows a bug. The searches live in compiler/tools; this is
// their command line: inputs, flags, files written, the commands that reproduce.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/npy.h"
#include "compiler/hlo/printer.h"
#include "compiler/support/file_io.h"
#include "compiler/support/subprocess.h"
#include "compiler/support/temporary_directory.h"
#include "compiler/support/terminal_text.h"
#include "compiler/support/watchdog.h"
#include "compiler/tools/hlo_bisect.h"
#include "compiler/tools/hlo_reducer.h"
#include "compiler/tools/reduction_tests.h"
#include "compiler/tools/text_diff.h"
#include "dump/flags.h"

namespace xlens::cli {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The arguments of a bisect: DIR/arg0.npy ... as `xlens run --inputs` reads them, or the
// arguments of one execution in a snapshot dump (NAME.arg0.npy, NAME.arg1.npy, ...; the first
// execution by name when there are several), or random ones.
StatusOr<std::vector<Literal>> LoadBisectInputs(const HloComputation& entry, const std::string& dir,
                                                uint64_t seed, std::string& described) {
  if (dir.empty() || dir == "random") {
    described = fmt::format("random (seed {})", seed);
    return LoadInputs(entry, dir, seed);
  }
  if (entry.num_parameters() == 0 || GetPathKind(dir + "/arg0.npy") != PathKind::kMissing ||
      GetPathKind(dir) != PathKind::kDirectory) {
    described = DisplayPath(dir);
    return LoadInputs(entry, dir, seed);
  }
  std::set<std::string> prefixes;
  std::error_code error;
  for (const auto& item : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = item.path().filename().string();
    constexpr std::string_view kSuffix = ".arg0.npy";
    if (name.size() > kSuffix.size() && name.ends_with(kSuffix)) {
      prefixes.insert(name.substr(0, name.size() - kSuffix.size()));
    }
  }
  if (prefixes.empty()) return LoadInputs(entry, dir, seed);  // its message names arg0.npy
  const std::string prefix = *prefixes.begin();
  ASSIGN_OR_RETURN(std::vector<Literal> args, LoadInputs(entry, dir, seed, prefix));
  described = fmt::format("{}/{}.arg*.npy{}", DisplayPath(dir), prefix,
                          prefixes.size() > 1 ? fmt::format(" (the first of {} executions)", prefixes.size())
                                              : "");
  return args;
}

// The compile settings the flags ask for (XLA_FLAGS and the command's --xla_* arguments).
StatusOr<tools::CompileSettings> SettingsFromFlags(const std::vector<std::string>& extra_flags,
                                                   std::string_view command,
                                                   const std::string& backend,
                                                   const std::string& passes, FlagsSetup& setup) {
  RETURN_IF_ERROR(SetUpFromFlags(extra_flags, command, setup));
  tools::CompileSettings settings;
  ASSIGN_OR_RETURN(settings.backend, tools::ParseRunBackend(backend));
  settings.optimize = setup.optimize;
  settings.optimize.dump = nullptr;
  settings.opt_level = setup.opt_level;
  if (!passes.empty()) {
    for (size_t start = 0; start <= passes.size();) {
      size_t comma = std::min(passes.find(',', start), passes.size());
      if (comma > start) settings.optimize.only_passes.push_back(passes.substr(start, comma - start));
      start = comma + 1;
    }
    RETURN_IF_ERROR(CheckPassNames(settings.optimize.only_passes, "--pipeline"));
  }
  return settings;
}

// `text` as one shell word: as it is when that is safe, else single-quoted.
std::string ShellQuoteArg(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789-_./=:,+@%") == std::string::npos) {
    return text;
  }
  return ShellQuote(text);
}

// The XLA flags in effect (XLA_FLAGS and the command line) but the dump ones, as command-line
// arguments for the commands printed to reproduce.
std::string FlagArguments(const DebugOptions& debug) {
  DebugOptions effective = debug;
  effective.xla_dump_to.clear();
  effective.xla_dump_hlo_pass_re.clear();
  const FlagStrings flags = DebugOptionsToFlags(effective);
  return flags.xla_flags.empty() ? "" : " " + flags.xla_flags;
}

std::string Indented(std::string_view text, size_t max_lines) {
  std::string out;
  size_t lines = 0;
  while (!text.empty() && lines < max_lines) {
    size_t end = text.find('\n');
    out += "    " + std::string(text.substr(0, end)) + "\n";
    ++lines;
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  if (!text.empty() && lines == max_lines) out += "    ...\n";
  return out;
}

}  // namespace

int RunBisect(const BisectArgs& args) {
  const auto start = Clock::now();
  FlagsSetup setup;
  auto settings = SettingsFromFlags(args.extra_flags, "bisect", args.backend, args.pipeline, setup);
  if (!settings.ok()) return Fail(settings.status());
  auto module = LoadModule(args.file, /*verify=*/true);
  if (!module.ok()) return Fail(module.status());
  std::string described;
  auto inputs = LoadBisectInputs(*(*module)->entry_computation(), args.inputs, args.seed, described);
  if (!inputs.ok()) return Fail(inputs.status());
  if (Status s = CheckEvaluationWork(**module, args.max_work); !s.ok()) {
    return Fail(s.WithContext(args.file));
  }
  std::printf("bisect: module %s, %lld instructions, inputs %s, backend %s\n",
              (*module)->name().c_str(), static_cast<long long>(tools::CountInstructions(**module)),
              described.c_str(), args.backend.c_str());
  std::fflush(stdout);

  tools::BisectOptions options;
  options.compile = *settings;
  options.tolerance = ReferenceTolerance(args.tolerance, args.tolerance_given);
  options.passes_only = args.passes_only;
  // A module that never ends (a while loop whose condition stays true) is stopped here: the
  // evaluations are cancelled, compiled code that does not stop ends the process with one line.
  Watchdog watchdog(args.timeout_seconds, "bisect");
  watchdog.SetActivity(fmt::format("bisecting module {}", EscapeForTerminal((*module)->name())));
  options.evaluator = EvaluatorOptions{.cancel = watchdog.cancel_flag(), .max_work = args.max_work};
  options.progress = [&watchdog](const std::string& line) {
    std::fprintf(stderr, "xlens bisect: %s\n", line.c_str());
    watchdog.SetActivity(fmt::format("bisecting: {}", line));
  };
  auto result = tools::BisectModule(**module, *inputs, options);
  // Whatever bisect concluded from cancelled evaluations does not count.
  if (watchdog.fired()) return Fail(Error(watchdog.StopMessage()).WithContext(args.file));
  if (!result.ok()) return Fail(result.status().WithContext(args.file));
  const tools::BisectResult& r = *result;
  std::printf("culprit: %s\n", r.summary.c_str());
  if (r.kind == tools::CulpritKind::kNone) {
    std::printf("(%lld evaluations, %lld compilations, %.1f s)\n", static_cast<long long>(r.evaluations),
                static_cast<long long>(r.compilations), SecondsSince(start));
    return 2;
  }

  // The files of the report.
  const std::string& dir = args.output_dir;
  std::vector<std::string> written;
  auto write = [&](const std::string& name, std::string_view text) -> Status {
    const std::string path = dir + "/" + name;
    RETURN_IF_ERROR(WriteFileAtomic(path, text));
    written.push_back(path);
    return OkStatus();
  };
  Status files = CreateDirectories(dir + "/inputs");
  std::string diff;
  if (files.ok()) files = write("original.hlo", PrintModule(**module));
  if (files.ok() && !r.before_text.empty()) {
    const std::string what = r.kind == tools::CulpritKind::kPass
                                 ? fmt::format("before {}", r.pass)
                                 : fmt::format("optimized with {} disabled", fmt::join(r.disabled, ","));
    const std::string after = r.kind == tools::CulpritKind::kPass ? fmt::format("after {}", r.pass)
                                                                  : std::string("optimized");
    diff = tools::UnifiedDiff(r.before_text, r.after_text, "before.hlo (" + what + ")",
                              "after.hlo (" + after + ")");
    files = write("before.hlo", r.before_text);
    if (files.ok()) files = write("after.hlo", r.after_text);
    if (files.ok()) files = write("change.diff", diff);
  } else if (files.ok() && !r.after_text.empty()) {
    files = write("optimized.hlo", r.after_text);
  }
  if (files.ok() && !r.kernel_text.empty()) files = write("kernel.hlo", r.kernel_text + "\n");
  for (size_t i = 0; files.ok() && i < inputs->size(); ++i) {
    const std::string path = fmt::format("{}/inputs/arg{}.npy", dir, i);
    files = WriteNpy(path, (*inputs)[i]);
    if (files.ok()) written.push_back(path);
  }
  const std::string flags = FlagArguments(setup.debug);
  const std::string backend = args.backend == "cpu" ? "" : " --backend=" + args.backend;
  const std::string tolerance =
      args.tolerance_given ? fmt::format(" --tolerance {:g}", args.tolerance) : "";
  const std::string reproduce =
      fmt::format("xlens run {} --inputs {}/inputs --reference{}{}{}", ShellQuoteArg(args.file),
                  ShellQuoteArg(dir), tolerance, backend, flags);
  std::string report = fmt::format("{}\n\nreproduce: {}\n", r.summary, reproduce);

  if (r.kind == tools::CulpritKind::kPass) {
    std::printf("  where: %s\n", r.difference.c_str());
    std::printf("  the module before and after %s differ by:\n%s", r.pass.c_str(), Indented(diff, 24).c_str());
    const std::string see = fmt::format(
        "xlens opt {} --xla_dump_to={}/dump --xla_dump_hlo_pass_re={}{}", ShellQuoteArg(args.file),
        ShellQuoteArg(dir), r.pass, flags);
    std::printf("see it in the dumps: %s\n", see.c_str());
    report += "see it in the dumps: " + see + "\n";
  } else if (r.kind == tools::CulpritKind::kCodegen) {
    std::printf("  the compiled result: %s\n", r.difference.c_str());
    std::printf("  kernel %s, its own result: %s\n", r.kernel.c_str(), r.kernel_difference.c_str());
    if (!r.kernel_source.empty()) {
      std::printf("  made from: %s\n", r.kernel_source.c_str());
      report += "made from: " + r.kernel_source + "\n";
    }
    std::printf("%s", Indented(r.kernel_text, 16).c_str());
  } else if (!r.error.empty()) {
    std::printf("  %s\n", r.error.c_str());
  } else {
    std::printf("  the compiled result: %s\n", r.difference.c_str());
  }
  if (!r.disabled.empty()) {
    DebugOptions without = setup.debug;
    for (const std::string& pass : r.disabled) {
      if (std::find(without.xla_disable_hlo_passes.begin(), without.xla_disable_hlo_passes.end(), pass) ==
          without.xla_disable_hlo_passes.end()) {
        without.xla_disable_hlo_passes.push_back(pass);
      }
    }
    const std::string avoid =
        fmt::format("xlens run {} --inputs {}/inputs --reference{}{}{}", ShellQuoteArg(args.file),
                    ShellQuoteArg(dir), tolerance, backend, FlagArguments(without));
    std::printf("agrees without it: %s\n", avoid.c_str());
    report += "agrees without it: " + avoid + "\n";
  }
  std::printf("reproduce: %s\n", reproduce.c_str());
  if (files.ok()) files = write("report.txt", report);
  if (!files.ok()) {
    std::fprintf(stderr, "xlens bisect: warning: the report could not be written: %s\n",
                 files.message().c_str());
  } else {
    std::printf("wrote %s\n", fmt::format("{}", fmt::join(written, ", ")).c_str());
  }
  std::printf("(%lld evaluations, %lld compilations, %.1f s)\n", static_cast<long long>(r.evaluations),
              static_cast<long long>(r.compilations), SecondsSince(start));
  return 0;
}

int RunReduce(const ReduceArgs& args) {
  FlagsSetup setup;
  auto settings = SettingsFromFlags(args.extra_flags, "reduce", args.backend, "", setup);
  if (!settings.ok()) return Fail(settings.status());
  auto module = LoadModule(args.file, /*verify=*/true);
  if (!module.ok()) return Fail(module.status());
  if (args.test.empty()) return Fail(Error("reduce: --test is required: crash, miscompare, bisect or a shell command"));

  // The candidates and their outputs go in a private directory under $TMPDIR, removed at the end.
  auto work = TemporaryDirectory::Create("reduce");
  if (!work.ok()) return Fail(work.status().WithContext("reduce"));

  tools::ReductionTestSpec spec;
  spec.test = args.test;
  spec.timeout_seconds = args.timeout_seconds;
  spec.max_work = args.max_work;
  spec.compile = *settings;
  spec.tolerance = ReferenceTolerance(args.tolerance, args.tolerance_given);
  spec.seed = args.seed;
  spec.work_directory = work->path();
  spec.xlens_flags = args.extra_flags;
  std::error_code error;
  spec.xlens_binary = std::filesystem::read_symlink("/proc/self/exe", error).string();
  auto test = tools::MakeReductionTest(spec);
  if (!test.ok()) return Fail(test.status());

  tools::ReduceOptions options;
  options.time_limit_seconds = args.time_limit_seconds;
  options.progress = [](const std::string& line) {
    std::fprintf(stderr, "xlens reduce: %s\n", line.c_str());
  };
  auto result = tools::ReduceModule(**module, *test, options);
  if (!result.ok()) return Fail(result.status().WithContext(args.file));

  std::string output = args.output;
  if (output.empty()) {
    output = std::filesystem::path(args.file).stem().string() + ".reduced.hlo";
  }
  const std::string text = PrintModule(*result->module);
  if (Status s = WriteFileAtomic(output, text); !s.ok()) return Fail(s);
  std::fputs(text.c_str(), stdout);
  std::fprintf(stderr,
               "xlens reduce: %lld -> %lld instructions in %.1f s (%lld tests, %lld kept)%s; wrote %s\n",
               static_cast<long long>(result->initial_instructions),
               static_cast<long long>(result->final_instructions), result->seconds,
               static_cast<long long>(result->tests), static_cast<long long>(result->accepted),
               result->timed_out ? "; stopped at --time-limit" : "", output.c_str());
  return 0;
}

}  // namespace xlens::cli
