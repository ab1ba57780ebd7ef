// shifted-moments: sums of powers of x - mean computed about a sample mean of x, so that they no
// longer wait for the mean. A training batch norm over N, H and W sums x for the mean, then
// (x - mean)^2, (x - mean) * dy and x - mean: two sweeps over the batch before the one that writes
// y and dx. With a per-channel shift K that needs no full sweep, and v = x - K, d = mean - K:
//   mean                   = K + sum(v) / n                     (d = sum(v) / n)
//   sum((x - mean) * g)    = sum(v * g) - d * sum(g)
//   sum((x - mean)^2 * g)  = sum(v^2 * g) - 2d * sum(v * g) + d^2 * sum(g)
// and every sum reads only x, K and the other factors g (dy): one sweep.
//
// The shift's choice bounds the error. E[x^2] - E[x]^2 (K = 0) cancels away the variance when the
// mean is large against the spread (2.5e-2 relative at a mean of 100 in f32); about K the
// cancellation grows with d^2 / var. K here is the mean of a fraction f of the batch (the first
// ceil(size / 32) entries of the major-most reduced dimension of size 2 or more, a contiguous
// block in the usual layouts): for any data, var >= f * d^2 (the subset's share of the spread
// between it and the rest), so d^2 / var <= 1 / f whatever the batch holds, an outlier or a
// sorted one included, and for shuffled data d^2 / var is about 1 / (f * n). Its sum reads f of x
// (1/32 at a batch of 32) ahead of the sweep.
//
// What it rewrites: a sum (add reducer, +0 init: see IsShiftableSum for zero's sign) of an F32 or
// F64 array x over dimensions D that keep x's minor-most dimension (a column reduction: rows in
// cache gain nothing from one sweep less), divided by the number of elements it adds (the mean);
// and every other such sum over D whose operand is, through multiplies and negates of x's shape, a
// product of one or two factors x - broadcast(mean) and factors that do not depend on the mean. The
// mean's other users take K + d. Sums of g are found where they exist (JAX's sums each have their
// own reducer, which CSE does not merge). F16 and BF16 sums are left alone: the variance's error
// after the cancellation, up to about 32 ulps, would be 1.6% and 12% there.
//
// Infinities and NaNs come out as the unrewritten sums give them, chosen per channel after the
// sweep: a sample holding one shifts by zero (the mean is then sum(x) / n); where d is not finite
// (an infinity or a NaN in x) every moment is NaN, as x - mean is where x is the infinite mean;
// where sum(g) is not finite (an infinity or a NaN in g) the moment is sum(v * g) (sum(v^2 * g)),
// where sum(v * g) - d * sum(g) would be inf - inf. The sign of such an infinity is that of x - K
// for x - mean: the same but where the infinity's x lies between K and the mean. Sums that
// overflow from finite values can still come out differently (both non-finite, or only the
// unrewritten one, whose x - mean is larger).
// Leaves alone fusion computations and instructions with control dependencies. Reports a change
// when it rewrote a sum.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class ShiftedMoments : public HloPass {
 public:
  std::string_view name() const override { return "shifted-moments"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
