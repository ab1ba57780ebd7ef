// tuple-simplifier: removes tuples that are built only to be taken apart:
//   get-tuple-element(tuple(a, b, ...), i)        -> the i-th operand;
//   tuple(gte(x, 0), gte(x, 1), ..., gte(x, n-1)) -> x, when x has exactly that tuple shape.
// Tuples and get-tuple-elements the rewrites leave unused are removed with them. It leaves alone
// fusion computations (their root tuples are the fusion's outputs), instructions with control
// dependencies, and rewrites whose replacement would change a layout. Reports a change when it
// rewrote anything.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class TupleSimplifier : public HloPass {
 public:
  std::string_view name() const override { return "tuple-simplifier"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
