#include "compiler/passes/dce.h"

#include <unordered_set>

namespace xlens {

bool HasSideEffect(const HloInstruction& instruction) {
  switch (instruction.opcode()) {
    case HloOpcode::kSend: case HloOpcode::kSendDone: case HloOpcode::kRecv:
    case HloOpcode::kRecvDone: case HloOpcode::kInfeed: case HloOpcode::kOutfeed:
    case HloOpcode::kRng: case HloOpcode::kRngGetAndUpdateState: case HloOpcode::kAfterAll:
    case HloOpcode::kAllReduce: case HloOpcode::kAllGather: case HloOpcode::kAllToAll:
    case HloOpcode::kCollectivePermute: case HloOpcode::kReduceScatter:
    case HloOpcode::kAllReduceStart: case HloOpcode::kAllReduceDone:
    case HloOpcode::kAllGatherStart: case HloOpcode::kAllGatherDone:
    case HloOpcode::kCollectivePermuteStart: case HloOpcode::kCollectivePermuteDone:
    case HloOpcode::kAsyncStart: case HloOpcode::kAsyncUpdate: case HloOpcode::kAsyncDone:
    case HloOpcode::kCopyStart: case HloOpcode::kCopyDone: case HloOpcode::kDomain:
    case HloOpcode::kAddDependency: case HloOpcode::kOptimizationBarrier:
      return true;
    case HloOpcode::kCustomCall: {
      const std::string* side_effect = instruction.raw_attribute("custom_call_has_side_effect");
      return side_effect != nullptr && *side_effect == "true";
    }
    default:
      return false;
  }
}

StatusOr<bool> HloDce::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    // Users before operands, so one sweep removes whole dead chains.
    std::vector<HloInstruction*> order = computation->MakeInstructionPostOrder();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      HloInstruction* instr = *it;
      if (instr->user_count() != 0 || instr == computation->root_instruction() ||
          instr->opcode() == HloOpcode::kParameter || HasSideEffect(*instr) ||
          !instr->control_successors().empty()) {
        continue;
      }
      RETURN_IF_ERROR(computation->RemoveInstruction(instr));
      changed = true;
    }
  }
  // Computations no live instruction calls (and that are not the entry) are dead too; removing
  // one can make its callees dead, so sweep until nothing more goes.
  for (bool removed = true; removed;) {
    removed = false;
    std::unordered_set<const HloComputation*> called;
    for (HloComputation* computation : module.computations()) {
      for (HloInstruction* instr : computation->instructions()) {
        for (HloComputation* callee : instr->called_computations()) called.insert(callee);
      }
    }
    for (HloComputation* computation : module.computations()) {
      if (computation != module.entry_computation() && !called.count(computation)) {
        module.RemoveComputation(computation);
        removed = changed = true;
      }
    }
  }
  return changed;
}

}  // namespace xlens
