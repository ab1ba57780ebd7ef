// The NVPTX back end: LLVM IR of GPU kernels (kernel_emitter.h with KernelTarget::kGpu) to PTX
// text for a compute capability, as XLA's GPU compiler does: math functions are taken from the
// CUDA toolkit's libdevice, the module is optimized for the device and printed as PTX.
#pragma once

#include <string>

#include "compiler/support/status.h"

namespace llvm {
class Module;
}

namespace xlens::codegen {

struct NvptxOptions {
  std::string gpu_arch = "sm_90";  // --gpu_arch, or the device's compute capability
  int opt_level = 3;
  // libdevice.10.bc; found under $CUDA_HOME or /usr/local/cuda when empty.
  std::string libdevice_path;
};

// Whether `arch` is an NVIDIA architecture name LLVM targets ("sm_90", "sm_80", ...).
Status CheckGpuArch(const std::string& arch);

// Targets the module at NVPTX and rewrites its math calls to libdevice's (__nv_expf, ...),
// without linking libdevice: the IR the GPU simulator retargets to the host. Idempotent.
Status PrepareForNvptx(llvm::Module& module, const NvptxOptions& options);

// Rewrites the module's math calls to libdevice, links it, optimizes for the GPU and returns the
// PTX. Errors name what the GPU back end cannot compile (complex numbers, integer powers).
StatusOr<std::string> CompileToPtx(llvm::Module& module, const NvptxOptions& options);

}  // namespace xlens::codegen
