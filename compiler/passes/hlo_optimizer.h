// Runs the HLO pipeline of a backend on a module, the way `xlens opt` and the compiler do: the
// stage pipelines one after another with their instruments (verifier, change check, dumps), then
// buffer assignment, with before_optimizations / *_after_optimizations dumps and the manifest.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/passes/buffer_assignment.h"
#include "compiler/passes/hlo_pipelines.h"
#include "compiler/passes/planted_miscompile.h"
#include "dump/dump_context.h"

namespace xlens {

struct OptimizeOptions {
  Backend backend = Backend::kCpu;
  // --xla_disable_hlo_passes / --xla_enable_hlo_passes_only.
  PassFilter filter;
  // --passes=a,b: run exactly these passes, in this order, instead of the pipeline.
  std::vector<std::string> only_passes;
  // Verify after every pass, and fail a pass that changes the module while reporting no change.
  bool verify_each_pass = false;
  bool check_changes = false;
  // --xla_reduce_precision; unset: reduce-precision-insertion does nothing.
  std::optional<ReducePrecisionConfig> reduce_precision;
  // Where dumps go; null for none.
  DumpContext* dump = nullptr;
  // End the module in the dump context when done (a compiler that dumps more, LLVM IR and the
  // thunk sequence, ends it itself so that every file has the same module id).
  bool end_dump_module = true;
  // The GPU's compute capability, for the name of the optimized module's dump
  // ("sm_8.0_gpu_after_optimizations").
  int gpu_major = 9;
  int gpu_minor = 0;
  // At most this many fusions by the fusion pass (-1: no limit); see InstructionFusion::set_fuel.
  int64_t fusion_fuel = -1;
  // Test-only faults (hidden --xla_test_miscompile_* flags); the compilers read the kernel one.
  PlantedBugs planted;
  // More instruments to run around every pass (after the recorder, before dumping), not owned:
  // how `xlens bisect` evaluates the module after each pass.
  std::vector<PassInstrumentation*> extra_instrumentation;
  // --xla_gpu_xlens_naive_emitters: read by the GPU compiler's kernel emitters, not by passes.
  bool gpu_naive_emitters = false;
  // --xla_gpu_xlens_split_launches (codegen::KernelOptions::gpu_split_launches).
  bool gpu_split_launches = true;
};

struct OptimizeResult {
  std::vector<PassEvent> events;          // every pass that ran, in order
  std::vector<std::string> warnings;      // fixed points that hit their cap, dump problems
  std::vector<FusionDecision> fusion_decisions;
  std::optional<BufferAssignment> buffers;
  int64_t kernels_before = 0;
  int64_t kernels_after = 0;
  int64_t wall_ns = 0;
};

StatusOr<OptimizeResult> OptimizeHloModule(HloModule& module, const OptimizeOptions& options);

// A new instance of the pass called `name` for `backend` (for --passes); an error lists the
// known names.
StatusOr<std::unique_ptr<HloPass>> MakePassByName(std::string_view name, Backend backend);

// "cpu_after_optimizations" or "sm_9.0_gpu_after_optimizations" (the GPU name of an sm_90
// device, the default target without one).
std::string AfterOptimizationsName(Backend backend, int gpu_major = 9, int gpu_minor = 0);

}  // namespace xlens
