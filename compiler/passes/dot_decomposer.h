// dot-decomposer: puts every dot into the canonical batch-matmul form XLA's DotDecomposer uses,
// so later passes and emitters see one shape of dot:
//   lhs [batch..., M, K], rhs [batch..., K, N] -> [batch..., M, N]
// with the batch dimensions leading and in order, exactly one contracting dimension (last on the
// lhs, first after the batch on the rhs) and at most one non-contracting dimension per side (M or
// N is left out when that side has none). Operands are transposed (batch, free, contracting for
// the lhs; batch, contracting, free for the rhs) and reshaped to that form, and the result is
// reshaped back to the dot's shape: the order of the result's dimensions (batch, lhs free, rhs
// free) is unchanged, so no transpose is needed after. The new dot keeps the original's
// attributes (precision, algorithm) and every new instruction its metadata.
// It leaves alone canonical dots, dots in fusion computations and dots over dynamic shapes.
// Reports a change when it rewrote any dot.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class DotDecomposer : public HloPass {
 public:
  std::string_view name() const override { return "dot-decomposer"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
