#include "compiler/passes/float8_normalization.h"

#include <vector>

namespace xlens {
namespace {

bool IsFloat8Array(const Shape& shape) {
  return shape.IsArray() && IsF8OrSmallerFloat(shape.element_type()) &&
         IsEvaluatorSupportedType(shape.element_type());
}

Shape WithType(const Shape& shape, PrimitiveType type) {
  return shape_util::ChangeElementType(shape, type);
}

}  // namespace

StatusOr<bool> Float8Normalization::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      const HloOpcode op = instruction->opcode();
      if ((op != HloOpcode::kDot && op != HloOpcode::kConvolution) ||
          instruction->operand_count() != 2 || !instruction->shape().IsArray()) {
        continue;
      }
      const Shape& lhs = instruction->operand(0)->shape();
      const Shape& rhs = instruction->operand(1)->shape();
      if (!IsFloat8Array(lhs) && !IsFloat8Array(rhs)) continue;
      // Only products of floats: an f8 times an integer is left to the emitted loops.
      if (!lhs.IsArray() || !rhs.IsArray() || !IsFloatingPointType(lhs.element_type()) ||
          !IsFloatingPointType(rhs.element_type())) {
        continue;
      }
      const PrimitiveType result_type = instruction->shape().element_type();
      if (!IsFloatingPointType(result_type)) continue;
      const PrimitiveType wide = result_type == PrimitiveType::F64 ? PrimitiveType::F64
                                                                   : PrimitiveType::F32;
      std::vector<HloInstruction*> operands;
      for (HloInstruction* operand : instruction->operands()) {
        if (operand->shape().element_type() == PrimitiveType::F32 ||
            operand->shape().element_type() == PrimitiveType::F64) {
          operands.push_back(operand);
          continue;
        }
        auto convert = HloInstruction::CreateUnary(
            HloOpcode::kConvert, WithType(operand->shape(), PrimitiveType::F32), operand);
        convert->metadata = instruction->metadata;
        operands.push_back(computation->AddInstruction(std::move(convert)));
      }
      HloInstruction* wide_product = computation->AddInstruction(
          instruction->CloneWithNewOperands(WithType(instruction->shape(), wide), operands));
      HloInstruction* replacement = wide_product;
      if (wide != result_type) {
        auto narrow = HloInstruction::CreateUnary(HloOpcode::kConvert, instruction->shape(),
                                                  wide_product);
        narrow->metadata = instruction->metadata;
        replacement = computation->AddInstruction(std::move(narrow));
      }
      RETURN_IF_ERROR(computation->ReplaceInstruction(instruction, replacement));
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens
