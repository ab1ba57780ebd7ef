// topk-decomposer: rewrites every topk into the sort XLA's TopkDecomposer makes of it, so that
// it runs wherever sort runs:
//   topk(x), k=K, largest=L  ->  s = sort(x, iota(s32, last dimension)), stable,
//                                 dimensions={last}, comparator: GT (L) or LT on x
//                                 (TOTALORDER for floating point, as XLA's GtTotalOrder)
//                                 tuple(slice(gte(s, 0)), slice(gte(s, 1)))  first K of each
// Stability keeps the lower index first among equal values, as XLA. The comparator is a new
// computation of four scalar parameters (x lhs, x rhs, index lhs, index rhs), one per topk.
// It leaves alone topk in fusion computations and over dynamic shapes. Reports a change when it
// rewrote any topk.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class TopkDecomposer : public HloPass {
 public:
  std::string_view name() const override { return "topk-decomposer"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
