// reduce-factor-hoisting: takes the factors that do not vary along a sum's reduced dimensions out
// of the sum, as loop-invariant code motion takes them out of a loop:
//   reduce(a * broadcast(c) * b, 0), with c broadcast along kept dimensions only
//     -> reduce(a * b, 0) * c      (c in the reduce's shape: one multiply per output)
//   reduce(-a, 0)  -> -reduce(a, 0)
// A sum that read a per-channel value computed from another sum then no longer waits for it. The
// backward pass of a training batch norm is the case: JAX writes sum(dy * gamma * rsqrt(var)) and
// sum((x - mean) * rsqrt(var) * dy), which become gamma * rsqrt(var) * sum(dy) and
// rsqrt(var) * sum((x - mean) * dy): with the mean known, all its sums but the variance are
// independent and share one sweep over x and dy, where they waited for the variance, and the
// last of them for another sum (two sweeps).
//
// What it rewrites: reduces of one array operand whose reducer adds its two parameters and whose
// init value is zero, over integers or floats; their operand is walked through multiplies and
// negates of its own shape (whatever their other users: those keep the old values), and each
// broadcast found there whose dimensions are all kept leaves the sum. The remaining product is
// summed instead: an existing sum of the same array over the same dimensions is reused (JAX's
// sums each have their own reducer computation, which CSE does not merge), and a product built
// here is reused by the others that need it.
//
// Integers give the same bits (multiplication distributes modulo 2^n); floats round differently:
// c * sum(a) rounds once where sum(c * a) rounds each product, the same order of error as the sum's
// own, and the order of a reduction's additions is left open anyway. Infinities can differ where
// the products' overflow or inf - inf made NaN. Zero keeps its sign: a float sum from +0 is never
// -0, and the rewritten one gets + 0 last (-sum(a) of +0s and c * sum(a) with c < 0 were -0); a
// float sum from -0 (-0 exactly where every addend is) is left as it is. A sum with nothing left
// once the factors are out (a broadcast summed alone) is left as it is. Leaves alone fusion
// computations and instructions with control dependencies. Reports a change when it rewrote a
// reduce.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class ReduceFactorHoisting : public HloPass {
 public:
  std::string_view name() const override { return "reduce-factor-hoisting"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
