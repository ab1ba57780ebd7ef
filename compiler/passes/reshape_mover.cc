#include "compiler/passes/reshape_mover.h"

#include <optional>
#include <vector>

#include "compiler/passes/dce.h"
#include "compiler/passes/hlo_creation_utils.h"

namespace xlens {
namespace {

bool IsRearrangement(const HloInstruction& instruction) {
  return (instruction.opcode() == HloOpcode::kReshape ||
          instruction.opcode() == HloOpcode::kTranspose) &&
         instruction.operand(0)->shape().IsArray() && instruction.shape().IsArray();
}

// Same kind of move: same opcode, same source dimensions and (for transposes) permutation.
bool SameRearrangement(const HloInstruction& a, const HloInstruction& b) {
  return a.opcode() == b.opcode() &&
         a.operand(0)->shape().dimensions() == b.operand(0)->shape().dimensions() &&
         a.shape().dimensions() == b.shape().dimensions() &&
         (a.opcode() == HloOpcode::kReshape || a.dimensions() == b.dimensions());
}

bool IsScalarBroadcast(const HloInstruction& instruction) {
  return instruction.opcode() == HloOpcode::kBroadcast &&
         instruction.operand(0)->shape().IsArray() && instruction.operand(0)->shape().rank() == 0;
}

class Mover {
 public:
  explicit Mover(HloComputation* computation) : computation_(computation) {}

  StatusOr<bool> TryMove(HloInstruction* instruction) {
    if (!instruction->IsElementwise() || !instruction->shape().IsArray() ||
        instruction->shape().rank() == 0 || HasSideEffect(*instruction) ||
        !instruction->control_predecessors().empty() ||
        !instruction->control_successors().empty()) {
      return false;
    }
    const HloInstruction* model = nullptr;
    // The model rearranges a computed value: moving only constants' reshapes would undo itself
    // on the next run (op(reshape(c1), c2) <-> op(c1, reshape(c2))).
    for (const HloInstruction* operand : instruction->operands()) {
      if (IsRearrangement(*operand) && operand->operand(0)->opcode() != HloOpcode::kConstant) {
        model = operand;
        break;
      }
    }
    if (model == nullptr) return false;
    const std::vector<int64_t>& source_dims = model->operand(0)->shape().dimensions();
    const bool scalar_operands_allowed = instruction->opcode() == HloOpcode::kClamp ||
                                         instruction->opcode() == HloOpcode::kSelect;
    // Check every operand before building anything, so a refused move changes nothing.
    for (int64_t i = 0; i < instruction->operand_count(); ++i) {
      const HloInstruction* operand = instruction->operand(i);
      if (!operand->shape().IsArray()) return false;
      if (operand->shape().rank() == 0 && scalar_operands_allowed) continue;
      if (IsRearrangement(*operand)) {
        if (!SameRearrangement(*operand, *model)) return false;
      } else if (operand->opcode() != HloOpcode::kConstant && !IsScalarBroadcast(*operand)) {
        return false;
      }
    }
    std::vector<HloInstruction*> operands;
    for (HloInstruction* operand : instruction->operands()) {
      const Shape& shape = operand->shape();
      if (shape.rank() == 0) {
        operands.push_back(operand);
      } else if (IsRearrangement(*operand)) {
        operands.push_back(operand->operand(0));
      } else if (IsScalarBroadcast(*operand)) {
        operands.push_back(Add(HloOpcode::kBroadcast,
                               ShapeLike(shape.element_type(), source_dims, shape),
                               operand->operand(0), *operand, std::vector<int64_t>{}));
      } else {
        operands.push_back(Undo(*model, operand));
      }
    }
    HloInstruction* moved = computation_->AddInstruction(instruction->CloneWithNewOperands(
        ShapeLike(instruction->shape().element_type(), source_dims, instruction->shape()),
        operands));
    HloInstruction* result = Add(model->opcode(), instruction->shape(), moved, *model,
                                 model->opcode() == HloOpcode::kTranspose
                                     ? std::optional<std::vector<int64_t>>(model->dimensions())
                                     : std::nullopt);
    RETURN_IF_ERROR(computation_->ReplaceInstruction(instruction, result));
    return true;
  }

 private:
  HloInstruction* Add(HloOpcode opcode, Shape shape, HloInstruction* operand,
                      const HloInstruction& origin,
                      std::optional<std::vector<int64_t>> dimensions = std::nullopt) {
    auto instruction = HloInstruction::CreateUnary(opcode, std::move(shape), operand);
    instruction->dimensions_attr = std::move(dimensions);
    instruction->metadata = origin.metadata;
    return computation_->AddInstruction(std::move(instruction));
  }

  // `constant` rearranged the other way, into the model's source shape.
  HloInstruction* Undo(const HloInstruction& model, HloInstruction* constant) {
    const Shape& shape = constant->shape();
    const std::vector<int64_t>& source_dims = model.operand(0)->shape().dimensions();
    Shape target = ShapeLike(shape.element_type(), source_dims, shape);
    if (model.opcode() == HloOpcode::kReshape) {
      return Add(HloOpcode::kReshape, std::move(target), constant, *constant);
    }
    const std::vector<int64_t>& permutation = model.dimensions();
    std::vector<int64_t> inverse(permutation.size());
    for (size_t i = 0; i < permutation.size(); ++i) inverse[permutation[i]] = static_cast<int64_t>(i);
    return Add(HloOpcode::kTranspose, std::move(target), constant, *constant, std::move(inverse));
  }

  HloComputation* computation_;
};

}  // namespace

StatusOr<bool> ReshapeMover::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    Mover mover(computation);
    // Operands before users: a reshape moved below one op can move below its users in the same
    // sweep. ReplaceInstruction only removes instructions before the current one in this order.
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      ASSIGN_OR_RETURN(bool moved, mover.TryMove(instruction));
      changed |= moved;
    }
  }
  return changed;
}

}  // namespace xlens
