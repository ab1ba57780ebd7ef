// multi-output-fusion: merges kernels that read the same data into one kernel with several
// outputs (a tuple root, read back through get-tuple-elements), as XLA's MultiOutputFusion does.
//
//  * producer-consumer: a producer that a kernel reads but that also has other users (typically
//    an expensive one instruction fusion would not duplicate, or a multi-output fusion whose
//    outputs are also results: Adam's new moments, which its parameter update reads) moves into
//    the consumer's fusion and becomes one of its outputs; its other users read that output, and
//    the consumer no longer reads back what the producer wrote. Into a reduction the producer
//    may be read through any loop-fusible op; into a loop kernel only elementwise, at the loop's
//    own index (else it would be computed twice), and every output of both kernels must have the
//    same dimensions (one loop writes them all).
//  * siblings: two kernels that read the same array (two reductions of one input, a reduction and
//    an elementwise consumer of one producer) become one fusion that reads it once.
// Both need the same iteration space (a loop kernel's output shape, a reduction's input shape;
// two reductions also reduce the same dimensions), no path between the merged kernels through
// another instruction (that would make a cycle), and FusionLimits. Siblings whose paths between
// them run only through small kernels (each output and operand at most 1/16 of the iteration
// space: batch norm's rsqrt(var + eps) per channel, between the variance and the kernel that
// normalizes with it) take those kernels in too, computed once between the merged kernel's
// sweeps, so that the variance shares a sweep with the sums that need only the mean. Merged: fusions of kind kLoop
// or kInput, unfused loop-fusible instructions and reduces. Left alone: dot and convolution
// (kOutput) fusions, kCustom fusions, instructions with control dependencies, constants and
// parameters. Merges into reductions and between siblings come first, merges into loop kernels
// (and of multi-output producers) only when none of those is left: taken earlier, one can close
// a path that a merge around a batch norm's reductions needs. Reports a change when it merged
// anything; decisions() explains each merge and each refusal.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "compiler/passes/fusion_utils.h"
#include "compiler/passes/hlo_pass.h"

namespace xlens {

class MultiOutputFusion : public HloPass {
 public:
  explicit MultiOutputFusion(FusionLimits limits = {}) : limits_(limits) {}

  std::string_view name() const override { return "multi-output-fusion"; }
  StatusOr<bool> Run(HloModule& module) override;

  // The decisions of the last Run, in the order they were taken.
  const std::vector<FusionDecision>& decisions() const { return decisions_; }

 private:
  // One merge in `computation`, or false when none is left.
  // Without `widened`, array producers into reductions only; with it, producers into loop
  // consumers and multi-output producers, which are merged after the siblings.
  StatusOr<bool> MergeProducerIntoConsumer(HloComputation& computation, bool widened);
  StatusOr<bool> MergeSiblings(HloComputation& computation);
  // Checks limits and cycles; builds and records the fusion when they allow it. With
  // `take_bridges`, small kernels on the paths between the two join the merge instead of
  // refusing it.
  StatusOr<bool> TryMerge(HloInstruction* into, HloInstruction* other, std::string note,
                          const TopologicalPositions& positions, bool take_bridges = false);
  void Refuse(const HloInstruction& producer, const HloInstruction& consumer, std::string reason);

  FusionLimits limits_;
  std::vector<FusionDecision> decisions_;
  bool WasRefused(const HloInstruction& producer, const HloInstruction& consumer) const;
  std::set<std::string> refused_;  // "producer\nconsumer" already explained
};

}  // namespace xlens
