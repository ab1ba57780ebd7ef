// `xlens replay BUNDLE`: recompiles a bundle's module from before_optimizations with the flags it
// was compiled with, runs it on the recorded arguments, and compares the results with the recorded
// ones and with the reference evaluator. One line says what happened:
//   reproduced: out0 differs from the recorded result by 3.1e-2 (max abs), the evaluator agrees
//               with the recorded result
//   reproduced: out0 differs from the evaluator by 0.5 (max abs), as in the recorded run
//   reproduced: compilation fails at pass X with ...
//   not reproduced: all outputs match
// Exit 0 when a failure is reproduced, 2 when it is not, 1 on an error (a bad bundle included, and
// a run stopped by --timeout). Runs are compared as they come and let go: --iterations costs time,
// not memory.
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <regex>

#include <fmt/format.h>

#include "compiler/cli/bug_report_commands.h"
#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/npy.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/runtime/cuda_driver.h"
#include "compiler/runtime/gpu_compiler.h"
#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_sim_device.h"
#include "compiler/runtime/measured_choice.h"
#include "compiler/support/activity.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "compiler/support/watchdog.h"
#include "dump/bundle_reader.h"
#include "dump/flags.h"
#include "dump/hlo_snapshot.h"

namespace xlens::cli {
namespace {

constexpr int kReproduced = 0;
constexpr int kNotReproduced = 2;

// 0.031 -> "3.1e-2", 0.25 -> "0.25", 1 -> "1": differences as the issue's examples write them.
std::string Magnitude(double value) {
  if (value == 0 || (value >= 0.1 && value < 1000)) return fmt::format("{:.2g}", value);
  std::string text = fmt::format("{:.1e}", value);
  const size_t e = text.find('e');
  std::string mantissa = text.substr(0, e), exponent = text.substr(e + 1);
  const bool negative = exponent[0] == '-';
  exponent = exponent.substr(1);
  exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
  return mantissa + "e" + (negative ? "-" : "") + exponent;
}

// The recorded flags that say how to compile: dump and profile flags are left out, so a replay
// never writes where the recording wrote, and so are the kernel choice files (the bundle's own
// kernel_choices.json is loaded instead).
StatusOr<std::vector<std::string>> CompileFlags(const ManifestInvocation& invocation) {
  std::vector<std::string> out;
  for (const std::string* text : {&invocation.tf_xla_flags, &invocation.xla_flags}) {
    auto tokens = SplitFlagString(*text);
    if (!tokens.ok()) return tokens.status().WithContext("the recorded flags");
    for (std::string& token : *tokens) {
      if (token.starts_with("--xla_dump") || token.starts_with("--tf_dump_graph_prefix") ||
          token.starts_with("--xla_hlo_profile") || token.starts_with("--tf_xla_clustering_debug") ||
          token.starts_with("--xla_cpu_xlens_dump_kernel_choices_to") ||
          token.starts_with("--xla_cpu_xlens_load_kernel_choices_from")) {
        continue;
      }
      out.push_back(std::move(token));
    }
  }
  return out;
}

// A recorded tensor, checked against its checksum.
StatusOr<Literal> ReadRecorded(const std::string& directory, const ManifestTensor& tensor) {
  const std::string path = directory + "/" + tensor.file;
  if (!CheckBundleMemberName(tensor.file).empty()) {
    return Error(fmt::format("the manifest names {}, which is not a file of the bundle",
                             DisplayPath(tensor.file)));
  }
  auto bytes = ReadFile(path);
  if (!bytes.ok()) {
    return Error(fmt::format("{} is listed in the manifest but missing from the bundle",
                             DisplayPath(tensor.file)));
  }
  if (!tensor.checksum.empty() && SnapshotChecksum(*bytes) != tensor.checksum) {
    return Error(fmt::format("{}: checksum {} does not match the manifest's {}: the bundle is "
                             "damaged",
                             DisplayPath(tensor.file), SnapshotChecksum(*bytes), tensor.checksum));
  }
  return ParseNpy(*bytes, DisplayPath(tensor.file));
}

// A compiled module, run once per call on the arguments it was given.
using RunOnce = std::function<StatusOr<Literal>()>;

StatusOr<RunOnce> Compile(const std::string& backend, FlagsSetup& setup,
                          std::unique_ptr<HloModule> module, const std::vector<Literal>& args) {
  if (backend == "gpu" || backend == "gpu-sim") {
    struct OnGpu {
      std::unique_ptr<runtime::GpuDevice> device;
      std::unique_ptr<runtime::GpuExecutable> exe;  // declared last: goes before its device
    };
    auto gpu = std::make_shared<OnGpu>();
    if (backend == "gpu-sim") {
      ASSIGN_OR_RETURN(gpu->device, runtime::OpenSimulatedGpuDevice(runtime::GpuSimOptions{}));
    } else {
      RETURN_IF_ERROR(runtime::CheckCudaDevice());
      ASSIGN_OR_RETURN(gpu->device, runtime::OpenCudaDevice());
    }
    runtime::GpuCompileOptions options;
    options.optimize = setup.optimize;
    options.nvptx.opt_level = setup.opt_level;
    ASSIGN_OR_RETURN(gpu->exe, runtime::GpuExecutable::Create(std::move(module), options, *gpu->device));
    RETURN_IF_ERROR(gpu->exe->SetArguments(args));
    return RunOnce([gpu]() -> StatusOr<Literal> {
      RETURN_IF_ERROR(gpu->exe->Run());
      return gpu->exe->Results();
    });
  }
  runtime::CompileOptions options;
  options.optimize = setup.optimize;
  options.opt_level = setup.opt_level;
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> made,
                   runtime::CompileForCpu(std::move(module), options));
  std::shared_ptr<runtime::Executable> exe = std::move(made);
  RETURN_IF_ERROR(exe->SetArguments(args));
  return RunOnce([exe]() -> StatusOr<Literal> {
    RETURN_IF_ERROR(exe->Run());
    return exe->Results();
  });
}

// How two results of one output depart, as words that follow "differs from X ": "by 3.1e-2 (max
// abs)" when the values do, else what does: the dtype, the shape, or where NaN and infinities are
// (a comparison of values alone would say "by 0" for those). `a` and `b` name the two sides.
std::string HowTheyDiffer(const Literal& first, std::string_view a, const Literal& second,
                          std::string_view b, double max_abs) {
  const Shape& x = first.shape();
  const Shape& y = second.shape();
  if (x.IsTuple() || y.IsTuple()) {
    return fmt::format("in structure ({} {}, {} {})", x.ToString(false), a, y.ToString(false), b);
  }
  if (x.element_type() != y.element_type()) {
    return fmt::format("in dtype ({} {}, {} {})", PrimitiveTypeName(x.element_type()), a,
                       PrimitiveTypeName(y.element_type()), b);
  }
  if (!shape_util::Compatible(x, y)) {
    return fmt::format("in shape ({} {}, {} {})", x.ToString(false), a, y.ToString(false), b);
  }
  const PrimitiveType type = x.element_type();
  if (IsFloatingPointType(type) || IsComplexType(type)) {
    int64_t apart = 0, first_apart = -1;
    std::string values;
    for (int64_t i = 0; i < first.element_count(); ++i) {
      const complex128 u = first.GetAsComplex(i), v = second.GetAsComplex(i);
      bool differs = false;
      for (auto [p, q] : {std::pair{u.real(), v.real()}, std::pair{u.imag(), v.imag()}}) {
        const bool special = std::isnan(p) || std::isnan(q) || std::isinf(p) || std::isinf(q);
        differs = differs || (special && !(std::isnan(p) && std::isnan(q)) && p != q);
      }
      if (!differs) continue;
      if (apart++ == 0) {
        first_apart = i;
        values = fmt::format("{} {}, {} {}", first.ElementToString(i), a, second.ElementToString(i), b);
      }
    }
    if (apart > 0) {
      return fmt::format("in where it holds NaN or infinity: {} element{} (the first, linear index {}: {}){}",
                         apart, apart == 1 ? "" : "s", first_apart, values,
                         max_abs > 0 ? fmt::format(", and by {} (max abs) elsewhere", Magnitude(max_abs))
                                     : "");
    }
    return fmt::format("by {} (max abs)", Magnitude(max_abs));
  }
  // Integers and pred: the comparison counts no float error, so the largest difference is ours.
  double largest = 0;
  for (int64_t i = 0; i < first.element_count(); ++i) {
    largest = std::max(largest, std::fabs(static_cast<double>(first.GetAsInt64(i)) -
                                          static_cast<double>(second.GetAsInt64(i))));
  }
  return fmt::format("by {} (max abs)", Magnitude(largest));
}

// The first output beyond tolerance, and how many are.
struct Comparison {
  bool match = true;
  int64_t first_leaf = -1;
  int64_t leaves_differing = 0;
  std::string how;  // HowTheyDiffer for the first differing leaf
};

// `expected` and `actual` are named by `e` and `a` in the description.
Comparison Compare(const std::vector<const Literal*>& expected, std::string_view e,
                   const std::vector<const Literal*>& actual, std::string_view a, const ErrorSpec& tolerance) {
  Comparison out;
  if (expected.size() != actual.size()) {
    out.match = false;
    out.how = fmt::format("in the number of outputs ({} {}, {} {})", actual.size(), a, expected.size(), e);
    return out;
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    LiteralDifference difference;
    Status near = ExpectLiteralNear(*expected[i], *actual[i], tolerance,
                                    &difference);
    if (near.ok()) continue;
    ++out.leaves_differing;
    if (out.match) {
      out.match = false;
      out.first_leaf = static_cast<int64_t>(i);
      // Beside NaN and infinities, a largest error is news only where finite values are beyond
      // the tolerance too.
      out.how = HowTheyDiffer(*actual[i], a, *expected[i], e,
                              difference.finite_mismatches() > 0 ? difference.max_abs_error : 0);
    }
  }
  return out;
}

// "out0", "out0 (and 2 other outputs)": the subject of the verdict.
std::string Where(const Comparison& c) {
  if (c.first_leaf < 0) return "the outputs";
  const int64_t others = c.leaves_differing - 1;
  if (others == 0) return fmt::format("out{}", c.first_leaf);
  return fmt::format("out{} (and {} other output{})", c.first_leaf, others, others == 1 ? "" : "s");
}

// A message that may hold recorded text, for the terminal.
std::string Shown(const Status& status) { return EscapeForTerminal(TruncateUtf8(status.message(), 2000)); }

}  // namespace

int RunReplay(const ReplayArgs& args) {
  if (args.iterations < 1) return Fail(Error("--iterations: expected at least 1"));
  if (!args.backend.empty() && args.backend != "cpu" && args.backend != "gpu" && args.backend != "gpu-sim") {
    return Fail(Error(fmt::format("--backend: expected cpu, gpu or gpu-sim, found '{}'",
                                  DisplayText(args.backend))));
  }
  ActivityScope activity("replaying bundle " + args.bundle);
  auto unpacked = UnpackBundle(args.bundle);
  if (!unpacked.ok()) return Fail(unpacked.status());
  const std::string& dir = unpacked->directory.path();
  const std::string shown = DisplayPath(args.bundle);
  if (unpacked->strip_constants) {
    return Fail(Error(fmt::format(
        "{}: made with --strip-constants: its large constants are elided, so it cannot be "
        "replayed (ask for a bundle without --strip-constants)",
        shown)));
  }
  // The module with a recorded execution, else the first one with its unoptimized dump.
  const ManifestModule* chosen = nullptr;
  std::string before;
  for (int pass = 0; pass < 2 && chosen == nullptr; ++pass) {
    for (const ManifestModule& module : unpacked->manifest.modules) {
      if (pass == 0 && module.executions.empty()) continue;
      for (const std::string& file : module.files) {
        if (file.ends_with(".before_optimizations.txt") && CheckBundleMemberName(file).empty()) {
          chosen = &module;
          before = file;
          break;
        }
      }
      if (chosen != nullptr) break;
    }
  }
  if (chosen == nullptr) {
    return Fail(Error(fmt::format("{}: no module in the bundle has a before_optimizations dump",
                                  shown)));
  }
  const std::string backend = !args.backend.empty()            ? args.backend
                              : !chosen->invocation.backend.empty() ? chosen->invocation.backend
                                                                    : "cpu";
  if (backend != "cpu" && backend != "gpu" && backend != "gpu-sim") {
    return Fail(Error(fmt::format("{}: recorded on backend '{}', which this xlens cannot run; pick "
                                  "one with --backend",
                                  shown, DisplayText(backend))));
  }
  auto flags = CompileFlags(chosen->invocation);
  if (!flags.ok()) return Fail(flags.status().WithContext(shown));
  FlagsSetup setup;
  if (Status s = SetUpFromFlags(*flags, "replay", setup); !s.ok()) {
    return Fail(s.WithContext(shown + ": the recorded flags"));
  }
  // The kernels the recording chose by timing (a depthwise convolution's), forced, so that the
  // replay computes with the same kernels whatever this machine's timings would say.
  size_t kernel_choices = 0;
  for (const std::string& file : chosen->files) {
    if (!file.ends_with(".kernel_choices.json") || !CheckBundleMemberName(file).empty()) continue;
    StatusOr<size_t> loaded = runtime::LoadKernelChoices(dir + "/" + file);
    if (!loaded.ok()) return Fail(Error(fmt::format("{}: {}: {}", shown, DisplayPath(file), Shown(loaded.status()))));
    kernel_choices = *loaded;
  }
  auto module = LoadModule(dir + "/" + before, /*verify=*/true);
  if (!module.ok()) return Fail(module.status().WithContext(shown));
  auto original = LoadModule(dir + "/" + before, /*verify=*/true);
  if (!original.ok()) return Fail(original.status().WithContext(shown));

  std::vector<Literal> arguments;
  std::vector<Literal> recorded;
  const ManifestExecution* execution =
      chosen->executions.empty() ? nullptr : &chosen->executions.front();
  if (execution != nullptr) {
    const HloComputation& entry = *(*module)->entry_computation();
    if (static_cast<int64_t>(execution->arguments.size()) != entry.num_parameters()) {
      return Fail(Error(fmt::format("{}: execution {} recorded {} arguments, the module takes {}",
                                    shown, execution->execution, execution->arguments.size(),
                                    entry.num_parameters())));
    }
    for (size_t i = 0; i < execution->arguments.size(); ++i) {
      auto literal = ReadRecorded(dir, execution->arguments[i]);
      if (!literal.ok()) return Fail(literal.status().WithContext(shown));
      const Shape& shape = entry.parameter_instruction(static_cast<int64_t>(i))->shape();
      if (!shape_util::Compatible(literal->shape(), shape)) {
        return Fail(Error(fmt::format("{}: recorded argument {} is {}, the parameter is {}", shown,
                                      i, literal->shape().ToString(false), shape.ToString(false))));
      }
      if (shape.has_layout()) literal->set_layout(shape.layout());
      arguments.push_back(*std::move(literal));
    }
    for (const ManifestTensor& tensor : execution->results) {
      auto literal = ReadRecorded(dir, tensor);
      if (!literal.ok()) return Fail(literal.status().WithContext(shown));
      recorded.push_back(*std::move(literal));
    }
  } else {
    auto random = LoadInputs(*(*module)->entry_computation(), "", 42);
    if (!random.ok()) return Fail(random.status().WithContext(shown));
    arguments = *std::move(random);
  }
  // Work the evaluator could never finish is refused before anything runs; work that merely
  // takes long, or never ends, is stopped by --timeout.
  if (Status s = CheckEvaluationWork(**original, args.max_work); !s.ok()) {
    return Fail(s.WithContext(shown));
  }
  // Recorded text (the module's name, the flags) reaches the terminal escaped.
  std::fprintf(stderr, "xlens replay: module %s on %s%s%s, %s\n",
               EscapeForTerminal((*module)->name()).c_str(), backend.c_str(),
               flags->empty()
                   ? ""
                   : EscapeForTerminal(TruncateUtf8(fmt::format(" with {}", fmt::join(*flags, " ")), 2000)).c_str(),
               kernel_choices == 0 ? ""
                                   : fmt::format(", the recording's {} kernel choice{}", kernel_choices,
                                                 kernel_choices == 1 ? "" : "s").c_str(),
               execution ? fmt::format("the arguments of recorded execution {}",
                                       execution->execution).c_str()
                         : "no recorded execution: random arguments (seed 42)");

  Watchdog watchdog(args.timeout_seconds, "replay");
  const std::string module_name = EscapeForTerminal((*module)->name());
  watchdog.SetActivity(fmt::format("compiling module {}", module_name));
  auto compiled = Compile(backend, setup, std::move(*module), arguments);
  auto failed = [&](const Status& status) {
    const std::string message = Shown(status);
    std::smatch match;
    static const std::regex kPass(R"(pass ([A-Za-z0-9_.-]+) \(pipeline [^)]*\): )");
    if (std::regex_search(message, match, kPass)) {
      std::printf("reproduced: compilation fails at pass %s with %s\n", match[1].str().c_str(),
                  message.substr(static_cast<size_t>(match.position(0) + match.length(0))).c_str());
    } else {
      std::printf("reproduced: compilation or execution fails with %s\n", message.c_str());
    }
    return kReproduced;
  };
  if (!compiled.ok()) return failed(compiled.status());
  if (kernel_choices > 0) {
    // A recorded choice whose key matches no call here (other CPUs, another oneDNN kernel) forces
    // nothing: the call was timed again, and may run another kernel than the recording's.
    const std::vector<std::string> missed = runtime::LoadedKernelChoicesNotTaken();
    if (!missed.empty()) {
      std::fprintf(stderr,
                   "xlens replay: %zu of the recording's %zu kernel choice%s matched no call here and forced "
                   "nothing (its key holds the call's shape, the pool's threads and oneDNN's kernel): %s\n",
                   missed.size(), kernel_choices, kernel_choices == 1 ? "" : "s",
                   EscapeForTerminal(TruncateUtf8(fmt::format("{}", fmt::join(missed, "; ")), 2000)).c_str());
    }
  }

  // The evaluator runs once, after the first run (a compilation that fails needs none).
  std::optional<StatusOr<Literal>> evaluated;
  std::vector<const Literal*> evaluator_leaves;
  std::vector<const Literal*> recorded_leaves;
  for (const Literal& r : recorded) recorded_leaves.push_back(&r);

  // The worst run decides: a failure seen in any iteration is reproduced. Each run is compared
  // and let go before the next.
  for (int i = 0; i < args.iterations; ++i) {
    if (watchdog.fired()) return Fail(Error(watchdog.StopMessage()).WithContext(shown));
    watchdog.SetActivity(args.iterations > 1
                             ? fmt::format("running module {} (run {} of {})", module_name, i + 1, args.iterations)
                             : fmt::format("running module {}", module_name));
    StatusOr<Literal> run = (*compiled)();
    if (watchdog.fired()) return Fail(Error(watchdog.StopMessage()).WithContext(shown));
    if (!run.ok()) return failed(run.status());
    if (!evaluated) {
      watchdog.SetActivity(fmt::format("evaluating module {}", module_name));
      EvaluatorOptions evaluator_options{.cancel = watchdog.cancel_flag(), .max_work = args.max_work};
      evaluated = EvaluateModule(**original, arguments, evaluator_options);
      if (!evaluated->ok() && watchdog.fired()) {
        return Fail(Error(watchdog.StopMessage()).WithContext(shown));
      }
      if (evaluated->ok()) CollectLeaves(**evaluated, evaluator_leaves);
    }
    const StatusOr<Literal>& reference = *evaluated;
    std::vector<const Literal*> leaves;
    CollectLeaves(*run, leaves);
    const std::string in_run =
        args.iterations > 1 ? fmt::format(" in run {} of {}", i + 1, args.iterations) : "";
    Comparison vs_evaluator, vs_recorded;
    if (reference.ok()) vs_evaluator = Compare(evaluator_leaves, "from the evaluator", leaves, "here", ReferenceTolerance(args.tolerance, args.tolerance_given));
    if (execution != nullptr) vs_recorded = Compare(recorded_leaves, "recorded", leaves, "here", ReferenceTolerance(args.tolerance, args.tolerance_given));
    if (!vs_recorded.match) {
      std::string evaluator_says;
      if (!reference.ok()) {
        evaluator_says = fmt::format("the evaluator could not run ({})", Shown(reference.status()));
      } else if (Compare(evaluator_leaves, "", recorded_leaves, "", ReferenceTolerance(args.tolerance, args.tolerance_given)).match) {
        evaluator_says = "the evaluator agrees with the recorded result";
      } else if (vs_evaluator.match) {
        // The recording was wrong and this run is right: the failure is gone here.
        continue;
      } else {
        evaluator_says = fmt::format("the evaluator agrees with neither (this run differs from it {})",
                                     vs_evaluator.how);
      }
      std::printf("reproduced: %s differs from the recorded result %s%s, %s\n",
                  Where(vs_recorded).c_str(), vs_recorded.how.c_str(), in_run.c_str(),
                  evaluator_says.c_str());
      return kReproduced;
    }
    if (!vs_evaluator.match) {
      std::printf("reproduced: %s differs from the evaluator %s%s, %s\n", Where(vs_evaluator).c_str(),
                  vs_evaluator.how.c_str(), in_run.c_str(),
                  execution ? "as in the recorded run" : "with random arguments");
      return kReproduced;
    }
  }
  const StatusOr<Literal>& reference = *evaluated;
  if (execution != nullptr && reference.ok()) {
    Comparison recorded_vs_evaluator =
        Compare(evaluator_leaves, "from the evaluator", recorded_leaves, "recorded", ReferenceTolerance(args.tolerance, args.tolerance_given));
    if (!recorded_vs_evaluator.match) {
      std::printf("not reproduced: every output agrees with the evaluator here; the recorded %s "
                  "differed from it %s\n",
                  Where(recorded_vs_evaluator).c_str(), recorded_vs_evaluator.how.c_str());
      return kNotReproduced;
    }
  }
  if (!reference.ok()) {
    std::printf("not reproduced: all outputs match the recorded result (the evaluator could not "
                "run: %s)\n",
                Shown(reference.status()).c_str());
    return kNotReproduced;
  }
  std::printf("not reproduced: all outputs match%s\n",
              execution ? "" : " the evaluator (no recorded execution; random arguments)");
  return kNotReproduced;
}

}  // namespace xlens::cli
