// batchnorm-expander: rewrites batch-norm-training, batch-norm-inference and batch-norm-grad into
// the reduce / broadcast / elementwise HLO that XLA's BatchNormExpander builds, so that they fuse
// like any other arithmetic. With N the elements per feature (every dimension but feature_index)
// and every per-feature value broadcast along feature_index:
//   training(x, scale, offset) -> (y, mean, var):
//     mean = sum(x) / N, var = sum(x * x) / N - mean * mean (biased),
//     y = (x - mean) * rsqrt(var + epsilon) * scale + offset
//   inference(x, scale, offset, mean, var) -> y:
//     s = scale * rsqrt(var + epsilon), y = x * s + (offset - mean * s)
//   grad(x, scale, mean, var, dy) -> (dx, dscale, doffset):
//     doffset = sum(dy), dscale = sum(dy * (x - mean)) * rsqrt(var + epsilon),
//     dx = scale * rsqrt(var + epsilon) / N
//          * (dy * N - doffset - (x - mean) * sum(dy * (x - mean)) / (var + epsilon))
// Arithmetic is in the operand's element type; epsilon is a float converted to it, as XLA's
// attribute is a float. The sums reduce with a new scalar add computation, one per element type.
// It leaves alone batch norms in fusion computations and over dynamic shapes. Reports a change
// when it rewrote any.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class BatchNormExpander : public HloPass {
 public:
  std::string_view name() const override { return "batchnorm-expander"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
