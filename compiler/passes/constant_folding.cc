#include "compiler/passes/constant_folding.h"

#include <vector>

#include "compiler/hlo/elided_constants.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/passes/dce.h"

namespace xlens {
namespace {

bool IsFoldable(const HloInstruction& instruction) {
  switch (instruction.opcode()) {
    case HloOpcode::kParameter: case HloOpcode::kConstant: case HloOpcode::kBroadcast:
    case HloOpcode::kIota: case HloOpcode::kCustomCall: case HloOpcode::kWhile:
    case HloOpcode::kConditional: case HloOpcode::kCall: case HloOpcode::kTuple:
      return false;
    default:
      break;
  }
  const Shape& shape = instruction.shape();
  if (!shape.IsArray() || !shape.is_static() ||
      shape.num_elements() > HloConstantFolding::kMaxFoldedElements) {
    return false;
  }
  // Zero-operand instructions (replica-id, partition-id, ...) depend on where they run.
  if (instruction.operand_count() == 0 || HasSideEffect(instruction) ||
      !instruction.control_predecessors().empty() || !instruction.control_successors().empty()) {
    return false;
  }
  for (const HloInstruction* operand : instruction.operands()) {
    if (operand->opcode() != HloOpcode::kConstant || !operand->has_literal()) return false;
    // A constant XLA printed as {...} (or holds only as text) has no values to fold with.
    if (HasElidedValues(operand->literal()) || operand->literal().is_text_only()) return false;
  }
  return true;
}

}  // namespace

StatusOr<bool> HloConstantFolding::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    // Operands before users: a folded operand lets its users fold in the same sweep.
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      if (!IsFoldable(*instruction)) continue;
      std::vector<const Literal*> operands;
      for (const HloInstruction* operand : instruction->operands()) {
        operands.push_back(&operand->literal());
      }
      StatusOr<Literal> value = EvaluateInstruction(*instruction, operands);
      if (!value.ok()) continue;
      Literal literal = std::move(value).value();
      if (instruction->shape().has_layout()) literal.set_layout(instruction->shape().layout());
      auto constant = HloInstruction::CreateConstant(std::move(literal));
      constant->set_shape(instruction->shape());
      constant->metadata = instruction->metadata;
      HloInstruction* folded = computation->AddInstruction(std::move(constant));
      // Removes the folded instruction and the constants only it used.
      RETURN_IF_ERROR(computation->ReplaceInstruction(instruction, folded));
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens
