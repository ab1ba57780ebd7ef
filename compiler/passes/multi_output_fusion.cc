#include "compiler/passes/multi_output_fusion.h"

#include <algorithm>

#include <fmt/format.h>

namespace xlens {

namespace {

bool IsTupleRootedFusion(const HloInstruction& instruction) {
  return instruction.opcode() == HloOpcode::kFusion &&
         instruction.fused_computation()->root_instruction()->opcode() == HloOpcode::kTuple;
}

// A kernel this pass may merge with another.
bool IsMergeable(const HloInstruction& instruction) {
  if (!instruction.control_predecessors().empty() ||
      !instruction.control_successors().empty()) {
    return false;
  }
  switch (instruction.opcode()) {
    case HloOpcode::kFusion: {
      if (instruction.fused_computation() == nullptr ||
          (instruction.fusion_kind != FusionKind::kLoop &&
           instruction.fusion_kind != FusionKind::kInput) ||
          HasDotOrConvolution(instruction)) {
        return false;
      }
      if (instruction.shape().IsArray()) return true;
      // A multi-output fusion: every user reads one output.
      return IsTupleRootedFusion(instruction) &&
             std::all_of(instruction.users().begin(), instruction.users().end(),
                         [](auto* u) { return u->opcode() == HloOpcode::kGetTupleElement; });
    }
    case HloOpcode::kReduce:
      return instruction.shape().IsArray();
    case HloOpcode::kConstant: case HloOpcode::kIota:
      return false;
    default:
      return IsLoopFusible(instruction) && instruction.operand_count() > 0;
  }
}

const HloInstruction* FirstReduce(const HloInstruction& instruction) {
  if (instruction.opcode() == HloOpcode::kReduce) return &instruction;
  if (instruction.opcode() != HloOpcode::kFusion) return nullptr;
  for (const HloInstruction* inner : instruction.fused_computation()->MakeInstructionPostOrder()) {
    if (inner->opcode() == HloOpcode::kReduce) return inner;
  }
  return nullptr;
}

// The shape a kernel's threads walk: a reduction's input, a loop kernel's (first) output.
const Shape& IterationShape(const HloInstruction& instruction) {
  if (const HloInstruction* reduce = FirstReduce(instruction)) return reduce->operand(0)->shape();
  if (IsTupleRootedFusion(instruction)) {
    return instruction.fused_computation()->root_instruction()->operand(0)->shape();
  }
  return instruction.shape();
}

std::string IterationMismatch(const HloInstruction& a, const HloInstruction& b) {
  const Shape& sa = IterationShape(a);
  const Shape& sb = IterationShape(b);
  if (!sa.IsArray() || !sb.IsArray() || !shape_util::SameDimensions(sa, sb)) {
    return fmt::format("{} iterates over {} and {} over {}; one kernel needs one iteration space",
                       a.name(), sa.ToString(false), b.name(), sb.ToString(false));
  }
  const HloInstruction* ra = FirstReduce(a);
  const HloInstruction* rb = FirstReduce(b);
  if (ra != nullptr && rb != nullptr) {
    std::vector<int64_t> da = ra->dimensions(), db = rb->dimensions();
    std::sort(da.begin(), da.end());
    std::sort(db.begin(), db.end());
    if (da != db) {
      return fmt::format("{} and {} reduce different dimensions", a.name(), b.name());
    }
  }
  return "";
}

// Where `producer` would land inside `consumer`: only element-by-element readers may take it.
bool FeedsOnlyFusibleUses(const HloInstruction& producer, const HloInstruction& consumer) {
  if (consumer.opcode() != HloOpcode::kFusion) return true;
  for (int64_t i = 0; i < consumer.operand_count(); ++i) {
    if (consumer.operand(i) != &producer) continue;
    for (const HloInstruction* user : consumer.fused_computation()->parameter_instruction(i)->users()) {
      if (!IsLoopFusible(*user) && user->opcode() != HloOpcode::kReduce &&
          user->opcode() != HloOpcode::kTuple) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

// A refused pair stays refused for the rest of the run: merges elsewhere only add paths (a cycle
// stays a cycle), fusions only grow, and iteration spaces do not change. Skipping it saves the
// cycle search each time the scan starts over after a merge.
bool MultiOutputFusion::WasRefused(const HloInstruction& producer,
                                   const HloInstruction& consumer) const {
  return refused_.count(producer.name() + "\n" + consumer.name()) > 0;
}

void MultiOutputFusion::Refuse(const HloInstruction& producer, const HloInstruction& consumer,
                               std::string reason) {
  if (!refused_.insert(producer.name() + "\n" + consumer.name()).second) return;
  decisions_.push_back({producer.name(), consumer.name(), false, std::move(reason), "", "",
                        DecisionSource(producer)});
}

StatusOr<bool> MultiOutputFusion::TryMerge(HloInstruction* into, HloInstruction* other,
                                           const std::string& note,
                                           const TopologicalPositions& positions) {
  FusionPlan plan;
  plan.members = {other, into};
  plan.keep_name_of = into->opcode() == HloOpcode::kFusion    ? into
                      : other->opcode() == HloOpcode::kFusion ? other
                                                              : nullptr;
  if (const HloInstruction* witness = FindCycleWitness(plan, &positions)) {
    Refuse(*other, *into,
           fmt::format("merging would create a cycle: {} lies on a path from one to the other",
                       witness->name()));
    return false;
  }
  const FusionFootprint footprint = EstimateFusion(plan);
  if (footprint.instructions > limits_.max_instructions ||
      footprint.operands + footprint.outputs > limits_.max_operands) {
    Refuse(*other, *into,
           fmt::format("the fusion would hold {} instructions, {} operands and {} outputs, over "
                       "the limits of {} instructions and {} operands and outputs",
                       footprint.instructions, footprint.operands, footprint.outputs,
                       limits_.max_instructions, limits_.max_operands));
    return false;
  }
  FusionDecision decision{other->name(), into->name(), true, note,
                          std::string(FusionKindString(PlannedKind(plan))), "",
                          DecisionSource(*other)};
  ASSIGN_OR_RETURN(HloInstruction* fusion, BuildFusion(plan));
  decision.fusion = fusion->name();
  decisions_.push_back(std::move(decision));
  return true;
}

StatusOr<bool> MultiOutputFusion::MergeProducerIntoReduction(HloComputation& computation) {
  // Each call merges at most once and returns, so the numbering stays exact while it is used.
  const TopologicalPositions positions = PostOrderPositions(computation);
  for (HloInstruction* consumer : computation.MakeInstructionPostOrder()) {
    if (!HasReduction(*consumer) || !IsMergeable(*consumer)) continue;
    std::vector<HloInstruction*> operands;
    for (HloInstruction* operand : consumer->operands()) {
      if (std::find(operands.begin(), operands.end(), operand) == operands.end()) {
        operands.push_back(operand);
      }
    }
    for (HloInstruction* producer : operands) {
      if (!IsMergeable(*producer) || HasReduction(*producer) || UseCount(*producer) < 2 ||
          !producer->shape().IsArray()) {
        continue;
      }
      if (!shape_util::SameDimensions(producer->shape(), IterationShape(*consumer))) continue;
      if (!FeedsOnlyFusibleUses(*producer, *consumer)) continue;
      if (WasRefused(*producer, *consumer)) continue;
      ASSIGN_OR_RETURN(bool merged,
                       TryMerge(consumer, producer,
                                fmt::format("its {} other users read it as an output",
                                            UseCount(*producer) - 1),
                                positions));
      if (merged) return true;
    }
  }
  return false;
}

StatusOr<bool> MultiOutputFusion::MergeSiblings(HloComputation& computation) {
  const TopologicalPositions positions = PostOrderPositions(computation);
  for (HloInstruction* shared : computation.MakeInstructionPostOrder()) {
    // Sharing a scalar or a constant saves no memory traffic worth a merge.
    if (!shared->shape().IsArray() || shared->shape().num_elements() <= 1 ||
        shared->opcode() == HloOpcode::kConstant || shared->user_count() < 2) {
      continue;
    }
    std::vector<HloInstruction*> siblings;
    for (HloInstruction* user : shared->users()) {
      if (IsMergeable(*user)) siblings.push_back(user);
    }
    for (size_t i = 0; i < siblings.size(); ++i) {
      for (size_t j = i + 1; j < siblings.size(); ++j) {
        HloInstruction* a = siblings[i];
        HloInstruction* b = siblings[j];
        if (WasRefused(*b, *a)) continue;
        if (std::string mismatch = IterationMismatch(*a, *b); !mismatch.empty()) {
          Refuse(*b, *a, mismatch);
          continue;
        }
        ASSIGN_OR_RETURN(bool merged,
                         TryMerge(a, b, fmt::format("siblings reading {}", shared->name()),
                                  positions));
        if (merged) return true;
      }
    }
  }
  return false;
}

StatusOr<bool> MultiOutputFusion::Run(HloModule& module) {
  decisions_.clear();
  refused_.clear();
  bool changed = false;
  for (HloComputation* computation : FusibleComputations(module)) {
    for (bool merged = true; merged;) {
      ASSIGN_OR_RETURN(merged, MergeProducerIntoReduction(*computation));
      if (!merged) {
        ASSIGN_OR_RETURN(merged, MergeSiblings(*computation));
      }
      changed = changed || merged;
    }
  }
  return changed;
}

}  // namespace xlens
