// Convolutions for ahead-of-time objects. The JIT runs a canonical convolution (NHWC input,
// HWIO kernel, NHWC output) as im2col and Eigen products; the kernel emitter's elemental
// convolution walks the kernel along its input features (strided) and runs an order of
// magnitude slower. An object that links only libc gets this loop nest instead: for each output
// pixel and window position inside the input, each input feature's kernel row scaled and added
// into the output pixel's features, the innermost loop contiguous so that LLVM vectorizes it.
#pragma once

#include <string>

#include <llvm/IR/Module.h>

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/instruction.h"

namespace xlens::aot {

// Emits `convolution` (runtime::IsEigenConvolution holds) as a one-phase kernel with the kernel
// emitter's calling convention (buffers: input, kernel, output, scratch).
codegen::KernelSpec EmitCanonicalConvolution(const HloInstruction& convolution,
                                             const std::string& name, llvm::Module& module);

}  // namespace xlens::aot
