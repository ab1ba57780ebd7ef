#include "compiler/passes/horizontal_fusion.h"

#include <algorithm>

#include <fmt/format.h>

namespace xlens {

namespace {

constexpr size_t kMaxCandidates = 512;  // bounds the pairwise dependence checks

bool DirectlyConnected(const HloInstruction& a, const HloInstruction& b) {
  auto uses = [](const HloInstruction& user, const HloInstruction& operand) {
    return std::find(user.operands().begin(), user.operands().end(), &operand) !=
           user.operands().end();
  };
  return uses(a, b) || uses(b, a);
}

}  // namespace

bool HorizontalLoopFusion::IsCandidate(const HloInstruction& instruction) const {
  if (!instruction.control_predecessors().empty() ||
      !instruction.control_successors().empty() || !instruction.shape().IsArray() ||
      instruction.shape().num_elements() > options_.max_elements) {
    return false;
  }
  if (instruction.opcode() == HloOpcode::kFusion) {
    return instruction.fused_computation() != nullptr &&
           instruction.fusion_kind == FusionKind::kLoop && !HasReduction(instruction) &&
           !HasDotOrConvolution(instruction);
  }
  return instruction.IsElementwise() && instruction.operand_count() > 0;
}

StatusOr<bool> HorizontalLoopFusion::FuseComputation(HloComputation& computation) {
  std::vector<HloInstruction*> candidates;
  for (HloInstruction* instruction : computation.MakeInstructionPostOrder()) {
    if (IsCandidate(*instruction)) candidates.push_back(instruction);
    if (candidates.size() == kMaxCandidates) break;
  }
  std::vector<bool> taken(candidates.size(), false);
  bool changed = false;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (taken[i]) continue;
    FusionPlan plan;
    plan.members = {candidates[i]};
    std::vector<size_t> group = {i};
    for (size_t j = i + 1; j < candidates.size(); ++j) {
      if (static_cast<int64_t>(group.size()) >= options_.max_fused) break;
      if (taken[j]) continue;
      HloInstruction* candidate = candidates[j];
      if (std::any_of(plan.members.begin(), plan.members.end(), [&](HloInstruction* member) {
            return DirectlyConnected(*member, *candidate);
          })) {
        continue;
      }
      plan.members.push_back(candidate);
      const FusionFootprint footprint = EstimateFusion(plan);
      if (FindCycleWitness(plan) != nullptr ||
          footprint.instructions > options_.limits.max_instructions ||
          footprint.operands + footprint.outputs > options_.limits.max_operands) {
        plan.members.pop_back();
        continue;
      }
      group.push_back(j);
    }
    if (group.size() < 2) continue;
    for (size_t k : group) taken[k] = true;
    std::vector<std::string> names, sources;
    for (HloInstruction* member : plan.members) {
      names.push_back(member->name());
      sources.push_back(DecisionSource(*member));
    }
    plan.keep_name_of =
        plan.members[0]->opcode() == HloOpcode::kFusion ? plan.members[0] : nullptr;
    ASSIGN_OR_RETURN(HloInstruction* fusion, BuildFusion(plan));
    for (size_t k = 1; k < names.size(); ++k) {
      decisions_.push_back({names[k], names[0], true,
                            fmt::format("{} independent small kernels launched as one",
                                        names.size()),
                            "kLoop", fusion->name(), sources[k]});
    }
    changed = true;
  }
  return changed;
}

StatusOr<bool> HorizontalLoopFusion::Run(HloModule& module) {
  decisions_.clear();
  bool changed = false;
  for (HloComputation* computation : FusibleComputations(module)) {
    ASSIGN_OR_RETURN(bool fused, FuseComputation(*computation));
    changed = changed || fused;
  }
  return changed;
}

}  // namespace xlens
