// `xlens run` and `xlens compile`: the compiler end to end, in the spirit of XLA's
// run_hlo_module. run compiles a module for the CPU, runs it, times it and (with --reference)
// proves every output against the reference evaluator.
#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/cli/thunk_profile.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/codegen/cpu/cpu_jit.h"
#include "compiler/runtime/compilation_cache.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/runtime/cuda_driver.h"
#include "compiler/runtime/gpu_compiler.h"
#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_kernel_resources.h"
#include "compiler/runtime/gpu_sim_analysis.h"
#include "compiler/runtime/gpu_sim_device.h"
#include "compiler/runtime/gpu_timing_model.h"
#include "compiler/support/activity.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "compiler/support/watchdog.h"
#include "dump/flags.h"
#include "profiler/chrome_trace_writer.h"
#include "profiler/cupti_collector.h"
#include "profiler/hlo_profile.h"
#include "profiler/host_tracer.h"
#include "profiler/predicted_kernels.h"
#include "profiler/steal_time.h"

namespace xlens::cli {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// printf into a string.
__attribute__((format(printf, 2, 3))) void Appendf(std::string& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  char buffer[1024];
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  out += buffer;
}

// The device of --backend: the GPU found by the driver, or the GPU simulator.
StatusOr<std::unique_ptr<runtime::GpuDevice>> OpenGpuDevice(const RunArgs& args, int opt_level,
                                                            bool want_ptx) {
  if (args.backend != "gpu-sim") return runtime::OpenCudaDevice();
  runtime::GpuSimOptions options;
  options.race_check = args.gpu_sim_race_check;
  options.opt_level = opt_level;
  options.want_ptx = want_ptx;
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::GpuSimDevice> device, runtime::OpenSimulatedGpuDevice(options));
  return std::unique_ptr<runtime::GpuDevice>(std::move(device));
}

// Compiles for the GPU found by the driver (or the simulator) and runs; the timing and the
// launches go to `report`. With `gpu_trace`, CUPTI records the GPU's activity during the runs
// into it; when CUPTI cannot (absent, refused, another profiler attached, the simulator) one
// warning says why and the run goes on.
// On the simulator with --gpu_sim_analysis (or --xla_hlo_profile), one more run is observed and
// every launch's analysis and predicted time go to `report`; with `predicted`, the predicted
// kernels go there for the trace.
StatusOr<Literal> RunOnGpu(const RunArgs& args, FlagsSetup& setup, std::unique_ptr<HloModule> module,
                           const std::vector<Literal>& inputs, std::string& report,
                           profiler::Trace* gpu_trace, Watchdog& watchdog,
                           std::vector<profiler::PredictedKernel>* predicted, std::string* predicted_device) {
  const bool simulated = args.backend == "gpu-sim";
  const bool analysing = simulated && (args.gpu_sim_analysis || setup.debug.xla_hlo_profile);
  runtime::GpuTarget target;
  if (analysing) {
    ASSIGN_OR_RETURN(target, runtime::GpuTargetByName(args.gpu_target));
  }
  watchdog.SetActivity(fmt::format("compiling and running module {} on the {}", module->name(),
                                   simulated ? "GPU simulator" : "GPU"));
  // PTX (for ptxas's register counts) needs the CUDA toolkit; without it the analysis says so.
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::GpuDevice> device,
                   OpenGpuDevice(args, setup.opt_level, analysing && !runtime::FindPtxas().empty()));
  if (setup.debug.xla_hlo_profile && !simulated) {
    std::fprintf(stderr, "xlens run: --xla_hlo_profile times CPU kernels so far; on the GPU, --trace "
                         "records every kernel's time (CUPTI) and `xlens trace summary` lists them\n");
  }
  runtime::GpuCompileOptions options;
  options.optimize = setup.optimize;
  options.nvptx.opt_level = setup.opt_level;
  ASSIGN_OR_RETURN(auto exe, runtime::GpuExecutable::Create(std::move(module), options, *device));
  std::unique_ptr<profiler::CuptiCollector> cupti;
  if (gpu_trace != nullptr && !simulated) {
    // Started before the measured region: its buffers are allocated here, not during the runs.
    auto started = profiler::CuptiCollector::Start();
    if (started.ok()) {
      cupti = std::move(*started);
    } else {
      std::fprintf(stderr, "xlens run: warning: the trace has no GPU activity: %s\n",
                   started.status().message().c_str());
    }
  }
  RETURN_IF_ERROR(exe->SetArguments(inputs));
  // --xla_dump_hlo_snapshots: each execution's arguments and results, fetched only when wanted.
  auto snapshot = [&]() -> Status {
    if (!setup.dump || !setup.dump->WantsExecution(exe->module())) return OkStatus();
    ASSIGN_OR_RETURN(Literal result, exe->Results());
    setup.dump->DumpExecution(exe->module(), inputs, result);
    return OkStatus();
  };
  if (args.iterations > 1) {
    RETURN_IF_ERROR(exe->Run(cupti.get()));
    RETURN_IF_ERROR(snapshot());
  }
  std::vector<double> run_ms;
  for (int i = 0; i < args.iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(exe->Run(cupti.get()));
    run_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    RETURN_IF_ERROR(snapshot());
  }
  ASSIGN_OR_RETURN(Literal result, exe->Results());
  if (cupti != nullptr) {
    *gpu_trace = cupti->Stop();
    for (const char* counter : {"dropped_records", "kernels_before_launch"}) {
      const profiler::TraceArg* value = gpu_trace->FindMetadata(counter);
      const int64_t* count = value ? std::get_if<int64_t>(&value->value) : nullptr;
      if (count != nullptr && *count > 0) {
        std::fprintf(stderr, "xlens run: warning: CUPTI %s: %lld (written into the trace)\n", counter,
                     static_cast<long long>(*count));
      }
    }
  }
  Appendf(report, "compile %.1f ms for %s%s; run median %.3f ms over %d iteration%s\n", exe->compile_ns() / 1e6,
              device->arch().c_str(), simulated ? " (simulated)" : "", Median(run_ms), args.iterations, args.iterations == 1 ? "" : "s");
  if (analysing) {
    watchdog.SetActivity(fmt::format("analysing the memory traffic of module {} on the GPU simulator",
                                     exe->module().name()));
    auto* sim = dynamic_cast<runtime::GpuSimDevice*>(device.get());
    if (sim == nullptr) return Error("--gpu_sim_analysis: the device is not the simulator");
    ASSIGN_OR_RETURN(runtime::GpuSimAnalysis analysis,
                     runtime::AnalyseGpuSimRun(*exe, *sim, target, args.gpu_sim_sample_blocks));
    if (args.gpu_sim_analysis) {
      report += runtime::FormatGpuLaunchAnalyses(analysis.launches, target, analysis.resources_source);
    }
    if (setup.debug.xla_hlo_profile) {
      std::string profile = profiler::FormatHloProfile(runtime::PredictedHloProfile(analysis, *exe, target));
      report += profile;
      if (setup.dump && setup.dump->enabled()) setup.dump->DumpText(exe->module(), "hlo_profile.txt", profile);
    }
    if (predicted != nullptr) {
      *predicted = runtime::PredictedKernels(analysis, target);
      *predicted_device = target.description;
    }
    return result;
  }
  Appendf(report, "%zu kernel launches:\n", exe->launches().size());
  for (const runtime::GpuLaunch& launch : exe->launches()) {
    Appendf(report, "  %s (%s): grid %lld, block %lld\n", launch.kernel.c_str(), launch.hlo_instruction.c_str(),
                static_cast<long long>(launch.dims.blocks), static_cast<long long>(launch.dims.threads_per_block));
  }
  return result;
}

// Compiles for the CPU (through the compilation cache) and runs; the timing of every thunk goes
// to `report`, and with --xla_hlo_profile the per-HLO profile too (also dumped when dumping).
StatusOr<Literal> RunOnCpu(const RunArgs& args, FlagsSetup& setup, const HloModule& module,
                           const std::vector<Literal>& inputs, std::string& report, Watchdog& watchdog) {
  watchdog.SetActivity(fmt::format("compiling module {} for the CPU", module.name()));
  runtime::CompilationCache cache;
  runtime::CompileOptions options;
  options.optimize = setup.optimize;
  options.opt_level = setup.opt_level;
  options.persistent_cache_dir = setup.debug.xla_xlens_persistent_cache_dir;
  ASSIGN_OR_RETURN(std::shared_ptr<runtime::Executable> executable, cache.GetOrCompile(module, options));
  runtime::Executable& exe = *executable;
  RETURN_IF_ERROR(exe.SetArguments(inputs));
  // --xla_dump_hlo_snapshots: each execution's arguments and results, fetched only when wanted.
  auto snapshot = [&]() -> Status {
    if (!setup.dump || !setup.dump->WantsExecution(exe.module())) return OkStatus();
    ASSIGN_OR_RETURN(Literal result, exe.Results());
    setup.dump->DumpExecution(exe.module(), inputs, result);
    return OkStatus();
  };
  std::vector<double> run_ms;
  std::vector<int64_t> thunk_ns;
  // One untimed run first when timing several: it pays for the first touch of every buffer.
  if (args.iterations > 1) {
    watchdog.SetActivity(fmt::format("running module {} (the untimed first run)", module.name()));
    RETURN_IF_ERROR(exe.Run());
    RETURN_IF_ERROR(snapshot());
  }
  const std::optional<profiler::CpuTicks> ticks_before = profiler::ReadProcessCpuTicks();
  for (int i = 0; i < args.iterations; ++i) {
    watchdog.SetActivity(fmt::format("running module {} (iteration {} of {})", module.name(), i + 1,
                                     args.iterations));
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(exe.Run(&thunk_ns));
    run_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    RETURN_IF_ERROR(snapshot());
  }
  ASSIGN_OR_RETURN(Literal result, exe.Results());
  // The best run beside the median: a machine's limits (STREAM, peak FLOP/s, a library call run
  // standalone) are the best of many runs, and are compared with this one's best.
  Appendf(report, "compile %.1f ms; run median %.3f ms over %d iteration%s", exe.compile_ns() / 1e6,
          Median(run_ms), args.iterations, args.iterations == 1 ? "" : "s");
  if (args.iterations > 1) Appendf(report, " (best %.3f ms)", *std::min_element(run_ms.begin(), run_ms.end()));
  report += "\n";
  // On a virtual machine whose host took the CPUs from it meanwhile, the median is the host's as
  // much as the module's (profiler/steal_time.h); said where it took 1% or more.
  const std::optional<profiler::CpuTicks> ticks_after = profiler::ReadProcessCpuTicks();
  if (ticks_before && ticks_after) {
    const std::optional<double> steal = profiler::StealShare(*ticks_before, *ticks_after);
    if (steal && *steal >= 0.01) {
      Appendf(report, "steal %.1f%%: the host ran other work on this process's CPUs for that share of their time "
              "during the runs (/proc/stat), so the median moves with it more than the best run does\n", *steal * 100);
    }
  }
  if (setup.debug.xla_hlo_profile) {
    std::string profile = ThunkProfileText(exe, exe.module().name(), thunk_ns, args.iterations);
    report += profile;
    if (setup.dump && setup.dump->enabled()) setup.dump->DumpText(exe.module(), "hlo_profile.txt", profile);
    return result;
  }
  // What ran, the slowest first: kernels, library calls and control flow.
  std::vector<std::pair<int64_t, size_t>> order;
  for (size_t i = 0; i < thunk_ns.size(); ++i) order.push_back({thunk_ns[i], i});
  std::sort(order.rbegin(), order.rend());
  int64_t total = 0;
  for (int64_t ns : thunk_ns) total += ns;
  // A kernel a library call runs on its parts is timed within the call's thunk, not as one of its own.
  const size_t in_calls = static_cast<size_t>(std::count_if(
      exe.kernels().begin(), exe.kernels().end(), [](const runtime::KernelInfo& k) { return !k.run_by_call.empty(); }));
  const std::string within = in_calls == 0 ? "" : fmt::format(", {} more run by library calls", in_calls);
  Appendf(report, "%zu thunks (%zu kernels%s), mean time per iteration:\n", exe.thunks().size(),
          exe.kernels().size() - in_calls, within.c_str());
  for (size_t k = 0; k < order.size() && k < 10; ++k) {
    const runtime::Thunk& thunk = *exe.thunks()[order[k].second];
    std::string line = thunk.ToString(0);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    if (auto nl = line.find('\n'); nl != std::string::npos) line = line.substr(0, nl);
    Appendf(report, "  %9.3f ms %5.1f%%  %s\n", order[k].first / 1e6 / args.iterations,
                total ? 100.0 * order[k].first / total : 0.0, line.c_str());
  }
  if (order.size() > 10) Appendf(report, "  ... %zu more\n", order.size() - 10);
  return result;
}

}  // namespace

int RunRun(const RunArgs& args) {
  if (args.backend != "cpu" && args.backend != "gpu" && args.backend != "gpu-sim") {
    return Fail(Error(fmt::format("--backend: expected cpu, gpu or gpu-sim, found '{}'", args.backend)));
  }
  if (args.gpu_sim_race_check && args.backend != "gpu-sim") {
    return Fail(Error("--gpu_sim_race_check: the race check needs --backend=gpu-sim"));
  }
  if (args.gpu_sim_analysis && args.backend != "gpu-sim") {
    return Fail(Error("--gpu_sim_analysis: the analysis needs --backend=gpu-sim (a real GPU is measured "
                      "with --trace, and Nsight Compute)"));
  }
  if (auto target = runtime::GpuTargetByName(args.gpu_target); !target.ok()) return Fail(target.status());
  if (args.backend == "gpu") {
    if (Status s = runtime::CheckCudaDevice(); !s.ok()) return Fail(s);
  }
  if (args.iterations < 1) return Fail(Error("--iterations: expected at least 1"));
  FlagsSetup setup;
  if (Status s = SetUpFromFlags(args.extra_flags, "run", setup); !s.ok()) return Fail(s);
  if (setup.dump) setup.dump->SetBackend(args.backend);
  auto module = LoadModule(args.file, /*verify=*/true);
  if (!module.ok()) return Fail(module.status());
  if (Status s = PrepareModuleToRun(**module, args.file, "run", args.fill_elided_constants, args.seed);
      !s.ok()) {
    return Fail(s);
  }
  ActivityScope activity("compiling and running module " + (*module)->name() + " of " + args.file);
  auto inputs = LoadInputs(*(*module)->entry_computation(), args.inputs, args.seed);
  if (!inputs.ok()) return Fail(inputs.status());
  // Work that would never finish is refused before compiling; work that merely takes long is
  // stopped by --timeout.
  if (Status s = CheckEvaluationWork(**module, args.max_work); !s.ok()) {
    return Fail(s.WithContext(args.file));
  }
  Watchdog watchdog(args.timeout_seconds, "run");
  std::string report;
  const bool tracing = !args.trace.empty();
  Status trace_written;
  if (tracing) {
    profiler::SetCurrentThreadName("main");
    if (!profiler::TracerSession::Start()) return Fail(Error("--trace: another trace is being recorded"));
    KeepTraceWhenStopped(watchdog, args.trace);
  }
  profiler::Trace gpu_trace;
  std::vector<profiler::PredictedKernel> predicted;
  std::string predicted_device;
  auto result = args.backend != "cpu"
                    ? RunOnGpu(args, setup, std::move(*module), *inputs, report, tracing ? &gpu_trace : nullptr,
                               watchdog, tracing ? &predicted : nullptr, &predicted_device)
                    : RunOnCpu(args, setup, **module, *inputs, report, watchdog);
  if (tracing) {
    // Written even when the run failed: the timeline up to the failure is what the user needs.
    profiler::Trace trace = profiler::TracerSession::Stop();
    trace.Append(std::move(gpu_trace));
    profiler::AppendPredictedKernels(trace, predicted_device, std::move(predicted));
    profiler::LinkExternalIds(trace);
    MarkStopped(trace, watchdog);
    trace_written = profiler::WriteChromeTrace(trace, args.trace);
    if (trace_written.ok() && result.ok()) {
      std::fprintf(stderr, "xlens run: wrote %zu trace events to %s\n", trace.events.size(), args.trace.c_str());
    }
  }
  if (!result.ok()) {
    // One line: what failed, and where the trace up to the failure is.
    Status failed = result.status().WithContext(args.file);
    if (watchdog.fired()) failed = Error(watchdog.StopMessage() + ": " + failed.message());
    if (tracing) {
      failed = Error(failed.message() + (trace_written.ok() ? "; the trace up to here is in " + DisplayPath(args.trace)
                                                            : "; the trace could not be written: " + trace_written.message()));
    }
    return Fail(failed);
  }

  std::vector<const Literal*> leaves;
  CollectLeaves(*result, leaves);
  if (!args.outputs.empty()) {
    if (Status s = WriteOutputs(args.outputs, leaves); !s.ok()) return Fail(s);
  } else {
    for (size_t i = 0; i < leaves.size(); ++i) {
      std::printf("out%zu: %s %s\n", i, leaves[i]->shape().ToString(false).c_str(),
                  Summarize(*leaves[i]).c_str());
    }
  }
  std::fputs(report.c_str(), stdout);

  // A trace that could not be written fails the command, after the outputs it computed.
  int exit_code = trace_written.ok() ? 0 : Fail(trace_written);
  if (args.reference) {
    auto original = LoadModule(args.file, /*verify=*/true);
    if (!original.ok()) return Fail(original.status());
    // The same values as the compiled module's: the same fill and seed.
    if (Status s = PrepareModuleToRun(**original, args.file, "run", args.fill_elided_constants,
                                      args.seed, /*quiet=*/true);
        !s.ok()) {
      return Fail(s);
    }
    watchdog.SetActivity(fmt::format("evaluating module {} for --reference", (*original)->name()));
    EvaluatorOptions options{.cancel = watchdog.cancel_flag(), .max_work = args.max_work};
    auto expected = EvaluateModule(**original, *inputs, options);
    if (!expected.ok() && watchdog.fired()) {
      return Fail(Error(watchdog.StopMessage() + ": " + expected.status().message())
                      .WithContext("reference evaluator"));
    }
    if (!expected.ok()) return Fail(expected.status().WithContext("reference evaluator"));
    LiteralDifference difference;
    // An f16 or bf16 output that differs from the evaluator's only in its rounding (a sum taken in
    // another order) is held to its own type's tolerance, not to one chosen for f32.
    ErrorSpec spec = ReferenceTolerance(args.tolerance, args.tolerance_given);
    Status match = ExpectLiteralNear(*expected, *result, spec, &difference);
    std::fputs(ReferenceVerdict(difference, "", ReferenceToleranceLabel(spec, leaves), match.ok()).c_str(),
               stdout);
    if (!match.ok()) {
      std::fprintf(stderr, "xlens: %s: the compiled result differs from the reference evaluator: %s\n",
                   args.file.c_str(), match.message().c_str());
      exit_code = 1;
    }
  }
  if (setup.dump && setup.dump->enabled() && !setup.dump->dumping_to_stdout()) {
    setup.dump->FlushManifest();
    std::fprintf(stderr, "xlens run: %s\n", setup.dump->Summary().c_str());
  }
  for (const std::string& w : setup.dump ? setup.dump->warnings() : std::vector<std::string>{}) {
    std::fprintf(stderr, "xlens run: warning: %s\n", w.c_str());
  }
  return exit_code;
}

int RunCompile(const CompileArgs& args) {
  if (args.emit != "llvm" && args.emit != "llvm-opt" && args.emit != "ptx" && args.emit != "obj") {
    return Fail(Error(fmt::format("--emit: expected llvm, llvm-opt, ptx or obj, found '{}'", args.emit)));
  }
  if (args.backend != "cpu" && args.backend != "gpu" && args.backend != "gpu-sim") {
    return Fail(Error(fmt::format("--backend: expected cpu, gpu or gpu-sim, found '{}'", args.backend)));
  }
  FlagsSetup setup;
  if (Status s = SetUpFromFlags(args.extra_flags, "compile", setup); !s.ok()) return Fail(s);
  if (args.emit == "ptx" || args.backend != "cpu") {
    // PTX needs the CUDA toolkit's libdevice, not a GPU: it compiles anywhere.
    auto module = LoadModule(args.file, /*verify=*/true);
    if (!module.ok()) return Fail(module.status());
    runtime::GpuCompileOptions gpu;
    gpu.optimize = setup.optimize;
    gpu.nvptx.gpu_arch = args.gpu_arch;
    gpu.nvptx.opt_level = setup.opt_level;
    auto compiled = runtime::CompileForGpuToPtx(std::move(*module), gpu);
    if (!compiled.ok()) return Fail(compiled.status().WithContext(args.file));
    const std::string& text = args.emit == "ptx"        ? compiled->ptx
                              : args.emit == "llvm-opt" ? compiled->ir_with_opt
                                                        : compiled->ir_no_opt;
    if (args.output.empty()) {
      std::fputs(text.c_str(), stdout);
      return 0;
    }
    if (Status s = WriteFileAtomic(args.output, text); !s.ok()) return Fail(s);
    return 0;
  }
  auto module = LoadModule(args.file, /*verify=*/true);
  if (!module.ok()) return Fail(module.status());
  runtime::CompileOptions options;
  options.optimize = setup.optimize;
  options.opt_level = setup.opt_level;
  options.persistent_cache_dir = setup.debug.xla_xlens_persistent_cache_dir;
  options.keep_llvm_ir = true;
  auto exe = runtime::CompileForCpu(std::move(*module), options);
  if (!exe.ok()) return Fail(exe.status().WithContext(args.file));
  std::string ir = args.emit == "llvm" ? (*exe)->llvm_ir().ir_no_opt : (*exe)->llvm_ir().ir_with_opt;
  if (args.emit == "obj") {
    if (args.output.empty()) return Fail(Error("--emit=obj writes a binary file: give -o FILE"));
    auto object = codegen::CompileIrToHostObject(ir);
    if (!object.ok()) return Fail(object.status());
    ir = std::move(*object);
  }
  if (args.output.empty()) {
    std::fputs(ir.c_str(), stdout);
    return 0;
  }
  if (Status s = WriteFileAtomic(args.output, ir); !s.ok()) return Fail(s);
  return 0;
}

}  // namespace xlens::cli
