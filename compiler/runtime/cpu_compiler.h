// CpuCompiler: HLO module -> Executable for the host CPU. Runs the CPU pass pipeline and buffer
// assignment, emits one LLVM module with a kernel per fusion (or unfused op), a comparator per
// sort and Eigen calls for dots, compiles it with the ORC JIT, and builds the thunk sequence.
// With dumping on, writes XLA's ir-no-opt.ll, ir-with-opt.ll and thunk_sequence.txt and records
// every kernel in manifest.json.
#pragma once

#include <memory>

#include "compiler/hlo/collective_attributes.h"
#include "compiler/passes/hlo_optimizer.h"
#include "compiler/runtime/executable.h"

namespace xlens::runtime {

struct CompileOptions {
  // The pass pipeline's options (backend is forced to CPU); its dump context is used for the
  // code generation dumps too.
  OptimizeOptions optimize;
  // --xla_backend_optimization_level: LLVM's -O level.
  int opt_level = 3;
  // Keep the LLVM IR before and after optimization in the executable (always kept when dumping).
  bool keep_llvm_ir = false;
  // --xla_xlens_persistent_cache_dir: compiled kernels are reused from (and saved to) here.
  std::string persistent_cache_dir;
  // The devices the program runs on (XLA's num_replicas, num_partitions): its collectives'
  // groups must fit them (CheckModuleCollectives). multi_device_executable.h runs several.
  DeviceTopology topology;
  // codegen::KernelOptions::cpu_streaming_store_bytes: element loops writing at least this many
  // bytes use streaming stores (-1: half the host's last-level cache; 0: never).
  int64_t cpu_streaming_store_bytes = -1;
};

StatusOr<std::unique_ptr<Executable>> CompileForCpu(std::unique_ptr<HloModule> module,
                                                    const CompileOptions& options);

}  // namespace xlens::runtime
