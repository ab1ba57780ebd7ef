// algebraic-simplifier: local rewrites that make a computation smaller without changing a single
// bit of what it computes (the evaluator is the judge):
//   - identities: x+0 and 0+x (integers; for floats only with -0.0, since +0.0 turns -0.0 into
//     +0.0), x-0, x*1, 1*x, x/1, integer x*0 -> 0 (never for floats: NaN*0 and inf*0 are NaN);
//   - negate(negate(x)) -> x;
//   - chains: reshape(reshape(x)), transpose(transpose(x)), broadcast(broadcast(x)) collapse to one
//     op (or to x); convert(convert(x)) -> convert(x) (or x) when the inner convert is lossless;
//   - no-ops: same-shape reshape, identity transpose, identity broadcast, convert to the same
//     type, full slice, zero pad, one-operand concatenate, copy that keeps the layout;
//   - reduce over no elements -> broadcast(init); reduce whose reduced dimensions all have size 1
//     -> reshape (when init is the reducer's identity) or reducer(broadcast(init), reshape(x));
//   - dot whose contracting dimensions all have size 1 -> multiply of broadcasts;
//   - compare(x, x) of integers -> a constant; select with a constant predicate; select(p, x, x);
//   - a float divide of selects between constants (or of one such select and a constant) ->
//     selects between the quotients, unless one is a NaN: JAX's gradients of maximum and
//     minimum, select(x == max, 1, 0) / select(y == max, 2, 1), divide no more.
// It leaves alone fusion computations, anything whose replacement would change a layout, dots with
// an `algorithm=` (which rounds its inputs), and variadic reduces. New instructions take the
// metadata of the instruction they replace. Each computation is rewritten to a fixed point;
// reports a change when any rewrite happened.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class AlgebraicSimplifier : public HloPass {
 public:
  std::string_view name() const override { return "algebraic-simplifier"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
