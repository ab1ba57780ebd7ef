// Rewrites rng-bit-generator into ordinary HLO, as XLA's RngBitGeneratorExpander does for its
// CPU and GPU backends, with the same bits (the algorithm is described in
// compiler/hlo/evaluator_rng.cc, which computes it plainly):
//   rng_philox, rng_default  counter + iota over Philox blocks, 10 rounds of multiplies,
//                            shifts and xors on u32 words, the words interleaved into values
//   rng_three_fry            counter + iota over the (halved, for 32-bit values) shape, 20
//                            rounds of add, rotate and xor; the two words fill even and odd
//                            positions of the split dimension (or form one u64)
// and the new state, (key, counter + runs), as a tuple with the values (the values alone where
// the op returns no state). The arithmetic runs on flat u32/u64 vectors, reshaped to the value
// shape at the end and bitcast to its type.
// It leaves alone rng-bit-generator in fusion computations, over dynamic shapes, and of states
// or types XLA does not expand (the evaluator then reports them). Reports a change when it
// rewrote any.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class RngBitGeneratorExpander : public HloPass {
 public:
  std::string_view name() const override { return "rng-bit-generator-expander"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
