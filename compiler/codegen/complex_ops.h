// Complex arithmetic and integer powers inline in LLVM IR, for targets that cannot call the CPU
// runtime's functions (the GPU: its math calls become libdevice's __nv_* functions). Each
// computes what the reference evaluator computes with std::complex (glibc's cexp, clog, csqrt,
// libgcc's __mulsc3 and __divsc3), with the formulas XLA's GPU backend uses where they agree:
// abs is hypot, division is Smith's algorithm with libgcc's scaling (in f64 for complex64, as
// libgcc computes it), log is log(max) + log1p((min/max)^2)/2 and atan2, sqrt the cancellation-free
// form, and the C99 Annex G rules for infinities where a NaN would otherwise appear.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "compiler/hlo/opcode.h"
#include "compiler/support/status.h"

namespace xlens::codegen {

// Whether complex transcendental functions and integer powers are emitted inline for the module
// being built (an NVPTX module, or one flagged kNoRuntimeFlag) instead of as calls of the CPU
// runtime's functions.
bool UseInlineComplexMath(llvm::IRBuilder<>& b);
// The module flag of code that runs without the xlens runtime (an ahead-of-time object).
inline constexpr const char* kNoRuntimeFlag = "xlens.no-runtime";
// A unary operation of complex `z` ({re, im} struct); abs returns the real magnitude.
StatusOr<llvm::Value*> EmitInlineComplexUnary(llvm::IRBuilder<>& b, HloOpcode op, llvm::Value* z);
// Multiply, divide or power of two complex values.
StatusOr<llvm::Value*> EmitInlineComplexBinary(llvm::IRBuilder<>& b, HloOpcode op, llvm::Value* lhs,
                                               llvm::Value* rhs);
// x^y for integers by repeated squaring, wrapping as the evaluator's; a negative signed exponent
// gives 0 except for the bases 1 and -1.
llvm::Value* EmitInlineIntegerPower(llvm::IRBuilder<>& b, bool is_signed, llvm::Value* x,
                                    llvm::Value* y);

}  // namespace xlens::codegen
