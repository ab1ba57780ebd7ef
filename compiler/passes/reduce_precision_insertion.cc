#include "compiler/passes/reduce_precision_insertion.h"

#include <algorithm>
#include <vector>

namespace xlens {
namespace {

bool IsRoundedType(const Shape& shape) {
  if (!shape.IsArray()) return false;
  const PrimitiveType type = shape.element_type();
  return type == PrimitiveType::F32 || type == PrimitiveType::F16 || type == PrimitiveType::BF16;
}

}  // namespace

ReducePrecisionInsertion::ReducePrecisionInsertion(int64_t exponent_bits, int64_t mantissa_bits,
                                                   OpcodeFilter filter)
    : config_(Config{exponent_bits, mantissa_bits, std::move(filter)}) {}

ReducePrecisionInsertion::ReducePrecisionInsertion(int64_t exponent_bits, int64_t mantissa_bits,
                                                   std::set<HloOpcode> opcodes)
    : ReducePrecisionInsertion(exponent_bits, mantissa_bits,
                               [opcodes = std::move(opcodes)](HloOpcode opcode) {
                                 return opcodes.contains(opcode);
                               }) {}

StatusOr<bool> ReducePrecisionInsertion::Run(HloModule& module) {
  if (!config_ || !config_->filter) return false;
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      if (instruction->opcode() == HloOpcode::kReducePrecision ||
          !IsRoundedType(instruction->shape()) || !config_->filter(instruction->opcode())) {
        continue;
      }
      const std::vector<HloInstruction*> users = instruction->users();
      auto is_this_rounding = [&](const HloInstruction* user) {
        return user->opcode() == HloOpcode::kReducePrecision &&
               user->exponent_bits_attr == config_->exponent_bits &&
               user->mantissa_bits_attr == config_->mantissa_bits;
      };
      const bool all_rounded = !users.empty() && std::all_of(users.begin(), users.end(),
                                                             is_this_rounding);
      if (all_rounded || (users.empty() && !instruction->IsRoot())) continue;
      auto rounding = HloInstruction::CreateUnary(HloOpcode::kReducePrecision,
                                                  instruction->shape(), instruction);
      rounding->exponent_bits_attr = config_->exponent_bits;
      rounding->mantissa_bits_attr = config_->mantissa_bits;
      rounding->metadata = instruction->metadata;
      HloInstruction* rounded = computation->AddInstruction(std::move(rounding));
      for (HloInstruction* user : users) {
        for (int64_t i = 0; i < user->operand_count(); ++i) {
          if (user->operand(i) == instruction) user->ReplaceOperandWith(i, rounded);
        }
      }
      if (instruction->IsRoot()) computation->set_root_instruction(rounded);
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens
