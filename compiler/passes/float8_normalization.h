// float8-normalization: a dot or convolution with an 8-bit float operand (f8e4m3fn x f8e5m2, as
// fp8 training recipes write them) becomes one over f32 operands with an f32 result (f64 when the
// result is f64), converted back to the result type. XLA's CPU backend does the same through its
// float-normalization and change-op-data-type passes: the library paths (Eigen, oneDNN) only take
// f32 and f64, and the value is unchanged, since both the evaluator and the emitted loops already
// accumulate 8-bit floats in f32 and round once at the end.
// Leaves fusion computations alone. Reports a change when it rewrote any instruction.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class Float8Normalization : public HloPass {
 public:
  std::string_view name() const override { return "float8-normalization"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
