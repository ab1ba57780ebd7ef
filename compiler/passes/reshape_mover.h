// reshape-mover: sinks reshapes and transposes below elementwise operations, as XLA's
// ReshapeMover does, so the elementwise work happens in the source shape and the reshapes meet
// (where the algebraic simplifier can merge them):
//   add(reshape(a), reshape(b))            -> reshape(add(a, b))
//   multiply(transpose(a), constant)       -> transpose(multiply(a, transpose'(constant)))
//   select(p, reshape(a), broadcast(s))    -> reshape(select(reshape'(p)...)) only when every
//                                             operand qualifies (see below).
// An elementwise instruction moves when every operand is either a reshape (or transpose) of the
// same kind as the first one found (same source dimensions, same permutation), a constant (it is
// reshaped or transposed the other way, for constant folding to fold), or a broadcast of a scalar
// (rebroadcast to the source shape); scalar min/max of clamp and a scalar select predicate stay.
// It leaves alone instructions with side effects or control dependencies and fusion computations.
// The moved reshape keeps its metadata; the elementwise instruction keeps its own. Reports a
// change when it moved anything.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class ReshapeMover : public HloPass {
 public:
  std::string_view name() const override { return "reshape-mover"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
