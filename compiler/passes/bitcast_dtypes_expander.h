// Rewrites a bitcast-convert between element types of different widths (u32[n,2] <-> u64[n],
// s8[n,4] <-> f32[n], ...), which changes the shape and so cannot be generated element by
// element, into same-width ops, as XLA's BitcastDtypesExpander does for its CPU backend:
//   narrow -> wide   the k = wide/narrow pieces of the last dimension, each bitcast to its
//                    unsigned type, widened, shifted left by i * narrow bits and or-ed together
//                    (element i of the last dimension holds the lowest bits first)
//   wide -> narrow   the wide value broadcast along a new last dimension of k, shifted right by
//                    iota * narrow bits, truncated to the narrow unsigned type
// then bitcast (same width) to the result type. jax's rbg PRNG writes such bitcasts around
// rng-bit-generator. Leaves alone complex, pred and sub-byte types, and fusion computations.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class BitcastDtypesExpander : public HloPass {
 public:
  std::string_view name() const override { return "bitcast-dtypes-expander"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
