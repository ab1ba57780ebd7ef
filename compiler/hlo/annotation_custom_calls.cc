#include "compiler/hlo/annotation_custom_calls.h"

#include <string_view>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/instruction.h"

namespace xlens {

bool IsAnnotationCustomCall(const HloInstruction& instruction) {
  if (instruction.opcode() != HloOpcode::kCustomCall || !instruction.custom_call_target ||
      instruction.operand_count() != 1 || !instruction.called_computations().empty()) {
    return false;
  }
  const std::string& target = *instruction.custom_call_target;
  if (target != "Sharding" && target != "xla.sdy.FuncResultSharding" &&
      target != "annotate_device_placement" && target != "MoveToHost" &&
      target != "MoveToDevice") {
    return false;
  }
  return shape_util::Compatible(instruction.shape(), instruction.operand(0)->shape());
}

StatusOr<int64_t> RemoveAnnotationCustomCalls(HloModule& module) {
  int64_t removed = 0;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      if (!IsAnnotationCustomCall(*instruction)) continue;
      RETURN_IF_ERROR(computation->ReplaceInstruction(instruction, instruction->operand(0)));
      ++removed;
    }
  }
  return removed;
}

}  // namespace xlens
