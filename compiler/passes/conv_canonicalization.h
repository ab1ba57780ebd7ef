// conv-canonicalization: puts every convolution into the one dimension order XLA's CPU
// ConvCanonicalization targets, so later passes and emitters see one layout of convolution:
//   input [batch, spatial..., feature], kernel [spatial..., input_feature, output_feature]
//   -> output [batch, spatial..., feature]      (dim_labels=b01..f_01..io->b01..f)
// The input and kernel are transposed into that order (spatial dimensions keep their relative
// order, so the window applies unchanged), a convolution with the canonical dim_labels is built on
// them with the original's window, feature_group_count, batch_group_count, precision and other
// attributes, and its result is transposed back to the original output order. Only the
// transposes that are not identities are inserted; every new instruction keeps the original's
// metadata.
// It leaves alone canonical convolutions, convolutions in fusion computations (the fusion was
// formed around the convolution as written) and convolutions over dynamic or malformed shapes.
// Reports a change when it rewrote any convolution.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class ConvCanonicalization : public HloPass {
 public:
  std::string_view name() const override { return "conv-canonicalization"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
