// What bisect and reduce share: copying a module, random arguments, and compiling and running a
// module on a backend with given pipeline options, in this process.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compiler/hlo/literal.h"
#include "compiler/hlo/module.h"
#include "compiler/passes/hlo_optimizer.h"

namespace xlens::tools {

// The backend the compiled result comes from.
enum class RunBackend { kCpu, kGpu, kGpuSim };

// Parses "cpu" / "gpu"; "gpu-sim" and anything else are errors that say what is available.
StatusOr<RunBackend> ParseRunBackend(std::string_view name);

// A deep copy (printed and parsed back, verified).
StatusOr<std::unique_ptr<HloModule>> CloneModule(const HloModule& module);

// One random literal per entry parameter, from `seed` (as `xlens run` makes them).
StatusOr<std::vector<Literal>> RandomArguments(const HloModule& module, uint64_t seed);

// How a module is compiled for a run.
struct CompileSettings {
  RunBackend backend = RunBackend::kCpu;
  OptimizeOptions optimize;  // filter, planted bugs, reduce precision; dump is ignored
  int opt_level = 3;
};

// What a compiled run gave: its result and the module after the pipeline, with the passes that
// changed it.
struct CompiledRun {
  Literal result;
  std::unique_ptr<HloModule> optimized;
  std::vector<std::string> changed_passes;  // unique names, in the order they first changed it
  std::vector<FusionDecision> fusion_decisions;  // of every fusion pass, in the order taken
};

// Compiles a copy of `module` with `settings` and runs it once on `arguments`.
StatusOr<CompiledRun> CompileAndRun(const HloModule& module, std::span<const Literal> arguments,
                                    const CompileSettings& settings);

}  // namespace xlens::tools
