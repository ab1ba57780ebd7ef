// horizontal-loop-fusion (GPU pipeline only): launches small independent loop kernels as one, as
// XLA's HorizontalLoopFusion does, because a small kernel costs more in launch overhead than in
// work. Candidates are array-shaped kLoop fusions and unfused elementwise instructions of at most
// `max_elements` elements each, without reductions, dots or control dependencies. Candidates with
// no data dependence between them (no path from one to another, directly or through other
// instructions) are grouped, at most `max_fused` per group, into one kLoop fusion whose root is a
// tuple of their results (XLA concatenates the outputs into one buffer; xlens keeps a tuple, so
// each output keeps its shape and its users read it through a get-tuple-element). Leaves
// everything else alone. Reports a change when it formed a group.
#pragma once

#include <string>
#include <vector>

#include "compiler/passes/fusion_utils.h"
#include "compiler/passes/hlo_pass.h"

namespace xlens {

struct HorizontalFusionOptions {
  int64_t max_fused = 16;            // kernels per horizontal fusion
  int64_t max_elements = 1 << 16;    // a candidate's output size; bigger kernels are not small
  FusionLimits limits;
};

class HorizontalLoopFusion : public HloPass {
 public:
  explicit HorizontalLoopFusion(HorizontalFusionOptions options = {}) : options_(options) {}

  std::string_view name() const override { return "horizontal-loop-fusion"; }
  StatusOr<bool> Run(HloModule& module) override;

  // The merges of the last Run: each candidate fused into the group's first kernel.
  const std::vector<FusionDecision>& decisions() const { return decisions_; }

 private:
  bool IsCandidate(const HloInstruction& instruction) const;
  StatusOr<bool> FuseComputation(HloComputation& computation);

  HorizontalFusionOptions options_;
  std::vector<FusionDecision> decisions_;
};

}  // namespace xlens
