#include "compiler/hlo/custom_call_targets.h"

namespace xlens {
namespace {

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// A call into a GPU library or a GPU kernel: only a GPU can run it, and XLA registers no CPU
// implementation (jaxlib's CPU client says "No registered implementation ... for Host").
std::string GpuOnly(std::string_view what) {
  return std::string("is ") + std::string(what) +
         ", which XLA's GPU compiler wrote for a GPU; XLA:CPU cannot run it either";
}

}  // namespace

std::string WhyCustomCallCannotRunOnCpu(std::string_view target) {
  if (StartsWith(target, "__cublasLt$")) return GpuOnly("a cuBLASLt matrix product");
  if (StartsWith(target, "__cublas$")) return GpuOnly("a cuBLAS matrix product");
  if (StartsWith(target, "__cudnn$")) return GpuOnly("a cuDNN call");
  if (StartsWith(target, "__cusolver$") || target == "cusolver_getrf" ||
      StartsWith(target, "cusolver_")) {
    return GpuOnly("a cuSOLVER call");
  }
  if (StartsWith(target, "triton_kernel_call") || target == "__gpu$xla.gpu.triton") {
    return GpuOnly("a Triton kernel");
  }
  if (StartsWith(target, "__gpu$") || StartsWith(target, "xla.gpu.")) {
    return GpuOnly("an XLA GPU runtime call");
  }
  if (StartsWith(target, "lapack_")) {
    return "is a LAPACK call: it runs compiled (xlens run); the reference evaluator has none";
  }
  if (target.find("python_cpu_callback") != std::string_view::npos ||
      target.find("python_gpu_callback") != std::string_view::npos) {
    return "calls back into the Python process that compiled the program (jax.pure_callback, "
           "io_callback, jax.debug.print); a module run on its own has no such process, and "
           "XLA:CPU cannot run it without one either";
  }
  if (target == "SliceToDynamic" || target == "PadToStatic" || target == "SetBound" ||
      target == "DynamicReshape") {
    return "makes a size known only at run time (XLA's dynamic padder); xlens runs bounded "
           "dynamic shapes at their bounds and has no run-time sizes";
  }
  if (target == "SPMDFullToShardShape" || target == "SPMDShardToFullShape" ||
      StartsWith(target, "xla.sdy.")) {
    return "belongs to a program partitioned over several devices; xlens runs one device";
  }
  return "";
}

}  // namespace xlens
