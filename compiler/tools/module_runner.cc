#include "compiler/tools/module_runner.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/runtime/cuda_driver.h"
#include "compiler/runtime/gpu_device.h"
#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_sim_device.h"
#include "compiler/support/terminal_text.h"

namespace xlens::tools {

StatusOr<RunBackend> ParseRunBackend(std::string_view name) {
  if (name == "cpu") return RunBackend::kCpu;
  if (name == "gpu") {
    RETURN_IF_ERROR(runtime::CheckCudaDevice());
    return RunBackend::kGpu;
  }
  if (name == "gpu-sim") return RunBackend::kGpuSim;
  return Error(fmt::format("--backend: expected cpu, gpu or gpu-sim, found '{}'", DisplayText(name)));
}

StatusOr<std::unique_ptr<HloModule>> CloneModule(const HloModule& module) {
  return ParseHloModule(PrintModule(module), ParseOptions{.verify = true});
}

StatusOr<std::vector<Literal>> RandomArguments(const HloModule& module, uint64_t seed) {
  std::vector<Literal> args;
  std::mt19937_64 rng(seed);
  const HloComputation& entry = *module.entry_computation();
  for (int64_t i = 0; i < entry.num_parameters(); ++i) {
    ASSIGN_OR_RETURN(Literal lit, MakeRandomLiteral(entry.parameter_instruction(i)->shape(), rng));
    args.push_back(std::move(lit));
  }
  return args;
}

StatusOr<CompiledRun> CompileAndRun(const HloModule& module, std::span<const Literal> arguments,
                                    const CompileSettings& settings) {
  ASSIGN_OR_RETURN(std::unique_ptr<HloModule> copy, CloneModule(module));
  OptimizeOptions optimize = settings.optimize;
  optimize.dump = nullptr;
  CompiledRun run;
  const OptimizeResult* optimized = nullptr;
  std::unique_ptr<runtime::Executable> cpu;
  // The device outlives the executable that frees its buffers on it (members go in reverse).
  std::unique_ptr<runtime::GpuDevice> device;
  std::unique_ptr<runtime::GpuExecutable> gpu;
  if (settings.backend == RunBackend::kCpu) {
    runtime::CompileOptions options;
    options.optimize = optimize;
    options.opt_level = settings.opt_level;
    ASSIGN_OR_RETURN(cpu, runtime::CompileForCpu(std::move(copy), options));
    ASSIGN_OR_RETURN(run.result, cpu->Execute(arguments));
    optimized = &cpu->optimize_result();
    ASSIGN_OR_RETURN(run.optimized, CloneModule(cpu->module()));
  } else {
    if (settings.backend == RunBackend::kGpuSim) {
      // The GPU backend's kernels on the simulator: a GPU bug found and bisected without a GPU.
      ASSIGN_OR_RETURN(std::unique_ptr<runtime::GpuSimDevice> sim,
                       runtime::OpenSimulatedGpuDevice(runtime::GpuSimOptions{}));
      device = std::move(sim);
    } else {
      ASSIGN_OR_RETURN(device, runtime::OpenCudaDevice());
    }
    runtime::GpuCompileOptions options;
    options.optimize = optimize;
    options.nvptx.opt_level = settings.opt_level;
    ASSIGN_OR_RETURN(gpu, runtime::GpuExecutable::Create(std::move(copy), options, *device));
    ASSIGN_OR_RETURN(run.result, gpu->Execute(arguments));
    // The GPU executable keeps no pipeline record: the optimized module is compiled again for
    // the record only (the same pipeline, so the same module).
    ASSIGN_OR_RETURN(run.optimized, CloneModule(module));
    optimize.backend = Backend::kGpu;
    ASSIGN_OR_RETURN(OptimizeResult result, OptimizeHloModule(*run.optimized, optimize));
    run.fusion_decisions = result.fusion_decisions;
    for (const PassEvent& e : result.events) {
      if (e.changed && std::find(run.changed_passes.begin(), run.changed_passes.end(), e.pass) ==
                           run.changed_passes.end()) {
        run.changed_passes.push_back(e.pass);
      }
    }
    return run;
  }
  run.fusion_decisions = optimized->fusion_decisions;
  for (const PassEvent& e : optimized->events) {
    if (e.changed && std::find(run.changed_passes.begin(), run.changed_passes.end(), e.pass) ==
                         run.changed_passes.end()) {
      run.changed_passes.push_back(e.pass);
    }
  }
  return run;
}

}  // namespace xlens::tools
