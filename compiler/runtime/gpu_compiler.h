// GpuCompiler: HLO module -> PTX. Runs the GPU pass pipeline, emits one kernel per fusion (or
// unfused op) of every computation that runs on the device, and compiles them with the NVPTX back
// end for a compute capability. With dumping on, writes XLA's ir-no-opt.ll, ir-with-opt.ll and
// .ptx and records each kernel's launch dimensions in manifest.json.
// Running the PTX needs a GPU and the CUDA driver; compiling it needs neither.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <map>

#include "compiler/codegen/gpu/nvptx_backend.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/passes/hlo_optimizer.h"

namespace xlens::runtime {

struct GpuCompileOptions {
  OptimizeOptions optimize;  // backend is forced to GPU
  codegen::NvptxOptions nvptx;
  // PTX for a real device (needs libdevice); the NVVM IR for the simulator (needs neither).
  bool emit_ptx = true;
  bool keep_nvvm_ir = false;
};

struct GpuKernelInfo {
  std::string name;
  std::string hlo_instruction;
  int64_t blocks = 0;
  int64_t threads_per_block = 0;
};

struct GpuCompilation {
  std::unique_ptr<HloModule> module;  // optimized
  std::unique_ptr<BufferAssignment> buffers;
  // The kernel of each instruction that has one, its phases in launch order.
  std::map<const HloInstruction*, codegen::KernelSpec> specs;
  std::string ptx;
  // The kernels targeted at NVPTX with libdevice calls unresolved, before optimization
  // (keep_nvvm_ir): what the GPU simulator runs.
  std::string nvvm_ir;
  std::string ir_no_opt;
  std::string ir_with_opt;
  std::vector<GpuKernelInfo> kernels;  // one per launch, in program order
};

StatusOr<GpuCompilation> CompileForGpuToPtx(std::unique_ptr<HloModule> module,
                                            const GpuCompileOptions& options);

}  // namespace xlens::runtime
