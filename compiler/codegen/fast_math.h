// Transcendental functions of f32 as straight-line LLVM IR (range reduction, a polynomial, a few
// selects for the special values) instead of calls to the C library. A loop of them vectorizes at
// the target's full width and inlines into its fusion, so softmax, GELU and sigmoid run at memory
// speed rather than at the speed of a libm or libmvec call per element or vector.
//
// Accuracy, measured against the reference evaluator (the C library) by
// tests/codegen/fast_math_test.cc, and against double precision with subnormals kept by
// fast_math_accuracy_test.cc, over the whole float range: exp and log within 1 ulp, tanh within
// 4 (XLA's CPU tanh, the same rational function), logistic within 2 of double precision and 4 of
// the evaluator (whose 1 / (1 + exp(-x)) in f32 rounds three times), erf within 2. Special values
// are exact: exp(-inf) = 0, exp(inf) = inf, log(0) = -inf, log(x < 0) = NaN, tanh(+-inf) = +-1,
// NaN in gives NaN out; denormal inputs and results are computed, not flushed. Compiled code
// runs with subnormals flushed to zero all the same (compiler/support/float_environment.h), as
// XLA's CPU runtime runs it: there e^x for x in about [-103.9, -87.3] is 0 where the evaluator
// gives a subnormal, in XLA:CPU too (jax 0.10.2: jnp.exp(float32(-88)) and (-95) are 0, not
// 6.05e-39 and 5.52e-42, and so is its 1e-38 * 0.5: the runtime's flush, not its exponential's).
#pragma once

#include <string>

#include <llvm/IR/IRBuilder.h>

namespace xlens::codegen {

// Whether the module being emitted is for a CPU (its target triple is set and not NVPTX): there
// the functions below replace the C library's; GPU code keeps libdevice's.
bool UseInlineTranscendentals(llvm::IRBuilder<>& b);

// e^x of a float `x`; `not_positive`: the caller knows x is <= 0 or NaN (a softmax's x minus its
// row's maximum), which saves the upper clamp and the choice of scaling.
llvm::Value* EmitFastExpF32(llvm::IRBuilder<>& b, llvm::Value* x, bool not_positive = false);
// e^x 2^34 of a float `x` <= 0 or NaN: EmitFastExpF32's value before its last multiply (by
// kFastExpScaledFactor), which a sum of such exponentials takes once after the sum instead of
// once an element (exact: the terms and the sum are normal floats, and scaling by a power of two
// commutes with their rounding; terms that the multiply would make subnormal are each below
// 2^-126, where a softmax's sum is at least 1).
llvm::Value* EmitFastExpF32Scaled(llvm::IRBuilder<>& b, llvm::Value* x);
inline constexpr double kFastExpScaledFactor = 0x1p-34;
// The natural logarithm of a float `x`.
llvm::Value* EmitFastLogF32(llvm::IRBuilder<>& b, llvm::Value* x);
// tanh of a float `x`.
llvm::Value* EmitFastTanhF32(llvm::IRBuilder<>& b, llvm::Value* x);
// 1 / (1 + e^-x) of a float `x`.
llvm::Value* EmitFastLogisticF32(llvm::IRBuilder<>& b, llvm::Value* x);
// The error function of a float `x`.
llvm::Value* EmitFastErfF32(llvm::IRBuilder<>& b, llvm::Value* x);
// The complementary error function 1 - erf(x) of a float `x`, accurate relative to its own
// value where it is small (x large), which 1 - erf(x) is not: within 6 ulp of double precision.
llvm::Value* EmitFastErfcF32(llvm::IRBuilder<>& b, llvm::Value* x);

// Adds to `module` `void name(const float* in, float* out, i64 n)`, which writes emit(in[i]) to
// out[i] for i < n: one of the functions above in a loop alone, to check it element by element
// (fast_math_accuracy_test) or to time it (machine_limits' transcendental rates).
using UnaryF32Emitter = llvm::Value* (*)(llvm::IRBuilder<>&, llvm::Value*);
llvm::Function* EmitUnaryF32Loop(llvm::Module& module, const std::string& name,
                                 UnaryF32Emitter emit);

}  // namespace xlens::codegen
