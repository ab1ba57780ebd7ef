// The 8-bit floats in LLVM IR: held as i8, computed with as f32. Both conversions are plain
// integer and float arithmetic (no table, no call), so that they vectorize and run the same on
// every backend; they give exactly what Float8ToDouble and Float8FromDouble (compiler/hlo/
// float8.h) give, which are XLA's and ml_dtypes' conversions.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "compiler/hlo/float8.h"

namespace xlens::codegen {

// The f32 value of the i8 `bits`.
llvm::Value* EmitFloat8ToF32(llvm::IRBuilder<>& b, const Float8Format& format, llvm::Value* bits);
// `value` (an f32 or f64) rounded to nearest even into the format, as i8 bits.
llvm::Value* EmitToFloat8(llvm::IRBuilder<>& b, const Float8Format& format, llvm::Value* value);

}  // namespace xlens::codegen
