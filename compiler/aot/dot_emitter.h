// Matrix products for ahead-of-time objects. The JIT hands an unfused dot in canonical form to
// Eigen; the kernel emitter's elemental dot walks the right-hand side by columns (one strided
// load per multiply-add) and runs several times slower. An object that links only libc gets this
// loop nest instead: for each row of the left-hand side, rows of the right-hand side scaled and
// added into the output row, the innermost loop contiguous so that LLVM vectorizes it. Each
// output element still sums its products in order of the contracted index, as the evaluator does.
#pragma once

#include <functional>
#include <string>

#include <llvm/IR/IRBuilder.h>

#include <llvm/IR/Module.h>

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/instruction.h"

namespace xlens::aot {

// for (i = 0; i < count; ++i) body(i), leaving `b` after the loop.
void EmitCountedLoop(llvm::IRBuilder<>& b, const std::string& name, int64_t count,
                     const std::function<void(llvm::Value*)>& body);

// for (j = 0; j < count; ++j) out[j] += scale * row[j], over elements of type `t`: the loop
// both loop nests end in, contiguous so that LLVM vectorizes it.
void EmitScaledRowAdd(llvm::IRBuilder<>& b, const std::string& name, int64_t count, llvm::Type* t,
                      llvm::Value* scale, llvm::Value* row, llvm::Value* out);

// A kernel function with the kernel emitter's calling convention, `void name(ptr buffers, i64,
// i64)`, its buffer table not aliased, not unwinding; empty.
llvm::Function* CreateLoopNestKernel(const std::string& name, llvm::Module& module);
// The spec of such a kernel run as one sequential phase over two operands and one output, doing
// `work` multiply-adds.
codegen::KernelSpec OnePhaseKernelSpec(const std::string& name, int64_t work);

// Emits `dot` (runtime::IsEigenDot holds) as a one-phase kernel with the kernel emitter's
// calling convention (buffers: lhs, rhs, output, scratch).
codegen::KernelSpec EmitRowMajorDot(const HloInstruction& dot, const std::string& name,
                                    llvm::Module& module);

}  // namespace xlens::aot
